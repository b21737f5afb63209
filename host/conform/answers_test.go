package conform

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

// The answers against the schemas of abi/schema/: every case the
// hand-written checks that the schemas replaced caught is still caught,
// each naming the schema, the keyword and the JSON pointer of the value
// that breaks it; the semantic checks and the notes stay.
func TestConformOutputChecks(t *testing.T) {
	cases := []struct {
		hook, out, err string // err "": conforms
	}{
		{abi.HookBuildPrompt, `{"system_prompt":"Be brief.","added_later":1}`, ""},
		{abi.HookBuildPrompt, ``, "empty output, the zero payload {}, does not satisfy prompt_output.json: at the top level: missing property 'system_prompt' (prompt_output.json#/required)"},
		{abi.HookBuildPrompt, `null`, "at the top level: got null, want object (prompt_output.json#/type)"},
		{abi.HookBuildPrompt, `[]`, "at the top level: got array, want object (prompt_output.json#/type)"},
		{abi.HookBuildPrompt, `{"system_prompt":" \n"}`, "at /system_prompt: does not match the pattern (prompt_output.json#/properties/system_prompt/pattern)"},
		{abi.HookBuildPrompt, `{"system_prompt":""}`, "at /system_prompt: does not match the pattern"},
		// Blank as the engine's strings.TrimSpace has it, beyond RE2's \s.
		{abi.HookBuildPrompt, `{"system_prompt":"\u00a0\u3000\u000b\u2028"}`, "at /system_prompt: does not match the pattern"},
		{abi.HookBuildPrompt, `{"system_prompt":" x "}`, ""},
		{abi.HookBuildPrompt, `{"System_Prompt":"x"}`, "at the top level: missing property 'system_prompt' (prompt_output.json#/required)"},
		{abi.HookBuildPrompt, `{"system_prompt":null}`, "at /system_prompt: got null, want string (prompt_output.json#/properties/system_prompt/type)"},
		{abi.HookBuildParams, ``, ""},
		{abi.HookBuildParams, `{}`, ""},
		{abi.HookBuildParams, `{"parameters":null}`, ""},
		{abi.HookBuildParams, `{"parameters":{"temperature":0.1}}`, ""},
		{abi.HookBuildParams, `{"parameters":[1]}`, "at /parameters: got array, want null or object (params_output.json#/properties/parameters/type)"},
		{abi.HookFallbackFinal, `{"thought":"t","output":null}`, ""},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"steps":["a",{"step":"b","status":"in_progress"},{"step":"c"}]}}`, ""},
		{abi.HookFallbackFinal, `{"thought":"t"}`, "at the top level: missing property 'output' (final.json#/required)"},
		{abi.HookFallbackFinal, `{"thought":1,"output":1}`, "at /thought: got number, want string (final.json#/properties/thought/type)"},
		{abi.HookFallbackFinal, ``, "empty output, the zero payload {}, does not satisfy final.json: at the top level: missing properties 'thought', 'output' (final.json#/required)"},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":"p"}`, "at /plan: got string, want object (plan.json#/type)"},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"summary":"s"}}`, "at /plan: missing property 'steps' (plan.json#/required)"},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"steps":[],"risks":"r"}}`, "at /plan/risks: got string, want array (plan.json#/properties/risks/type)"},
		// A wrong status names the status alone, not also the string branch of the step's oneOf.
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"steps":[{"step":"a","status":"done"}]}}`,
			"does not satisfy final.json: at /plan/steps/0/status: value must be one of 'pending', 'in_progress', 'completed' (plan.json#/$defs/plan_step/oneOf/1/properties/status/enum)"},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"steps":[{"step":"a","status":""}]}}`, "at /plan/steps/0/status: value must be one of"},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"steps":[{"status":"pending"}]}}`, "at /plan/steps/0: missing property 'step' (plan.json#/$defs/plan_step/oneOf/1/required)"},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"steps":[3]}}`,
			"at /plan/steps/0: got number, want string (plan.json#/$defs/plan_step/oneOf/0/type); at /plan/steps/0: got number, want object (plan.json#/$defs/plan_step/oneOf/1/type)"},
		{abi.HookBeforeRun, ``, ""},
		{abi.HookBeforeRun, `{"tools":null}`, ""},
		{abi.HookBeforeRun, `{"system_prompt":"p","tools":["a"]}`, ""},
		{abi.HookBeforeRun, `{"tools":"a"}`, "at /tools: got string, want null or array (before_run_output.json#/properties/tools/type)"},
		{abi.HookBeforeRun, `{"tools":[1]}`, "at /tools/0: got number, want string (before_run_output.json#/properties/tools/items/type)"},
		{abi.HookBeforeRun, `{"system_prompt":false}`, "at /system_prompt: got boolean, want string (before_run_output.json#/properties/system_prompt/type)"},
		{abi.HookBeforeToolCall, `{}`, ""},
		{abi.HookBeforeToolCall, `{"input":null}`, ""},
		{abi.HookBeforeToolCall, `{"input":{"text":"a"}}`, ""},
		{abi.HookBeforeToolCall, `{"input":"a"}`, "at /input: got string, want null or object (before_tool_call_output.json#/properties/input/type)"},
		{abi.HookBeforeToolCall, `{"deny":"yes"}`, "at /deny: got string, want boolean (before_tool_call_output.json#/properties/deny/type)"},
		{abi.HookBeforeToolCall, `{"deny":true,"reason":3}`, "at /reason: got number, want string (before_tool_call_output.json#/properties/reason/type)"},
		{abi.HookAfterToolCall, `{"output":""}`, ""},
		{abi.HookAfterToolCall, `{"output":null}`, ""},
		{abi.HookAfterToolCall, `{"output":3}`, "at /output: got number, want null or string (after_tool_call_output.json#/properties/output/type)"},
		{abi.HookOnFinal, ``, ""},
		{abi.HookOnFinal, `{"anything":1}`, ""},
		{abi.HookHandleStage, `{"status":"success","context_updates":{"v.passed":true},"later":1}`, ""},
		{abi.HookHandleStage, ``, "empty output, the zero payload {}, does not satisfy stage_outcome.json: at the top level: missing property 'status' (stage_outcome.json#/required)"},
		{abi.HookHandleStage, `{"status":"ok"}`, "at /status: value must be one of 'success', 'fail', 'partial_success', 'retry', 'skipped' (stage_outcome.json#/properties/status/enum)"},
		{abi.HookHandleStage, `{"status":"success","suggested_next_ids":"a"}`, "at /suggested_next_ids: got string, want array (stage_outcome.json#/properties/suggested_next_ids/type)"},
		{abi.HookHandleStage, `{"status":"success","preferred_label":1}`, "at /preferred_label: got number, want string (stage_outcome.json#/properties/preferred_label/type)"},
		{abi.HookHandleStage, `{"status":"success","context_updates":[]}`, "at /context_updates: got array, want object (stage_outcome.json#/properties/context_updates/type)"},
		{abi.HookHandleStage, `{"status":"fail","failure_reason":{}}`, "at /failure_reason: got object, want string (stage_outcome.json#/properties/failure_reason/type)"},
		{abi.HookHandleStage, `{"status":"success","notes":[]}`, "at /notes: got array, want string (stage_outcome.json#/properties/notes/type)"},
		// What the schema cannot say: the host's rules (abi.StageOutcome.Check).
		{abi.HookHandleStage, `{"status":"success","context_updates":{"outcome":"fail"}}`, `StageOutcome.context_updates: key "outcome" is the pipeline runner's`},
		{abi.HookHandleStage, `{"status":"success","preferred_label":"` + strings.Repeat("é", 200) + `"}`, "StageOutcome.preferred_label"},
		{"tool", `{"output":"3"}`, ""},
		{"tool", ``, "empty output, the zero payload {}, does not satisfy tool_call_output.json: at the top level: missing property 'output' (tool_call_output.json#/required)"},
		{"tool", `{}`, "at the top level: missing property 'output' (tool_call_output.json#/required)"},
		{"tool", `{"output":3}`, "at /output: got number, want string (tool_call_output.json#/properties/output/type)"},
		{"tool", `{"output":"","images":[{"mime_type":"image/bmp","data":""}]}`, "at /images/0/mime_type: value must be one of"},
	}
	for _, c := range cases {
		pc := toolPayloads
		if c.hook != "tool" {
			pc = conformHooks[c.hook]
		}
		_, err := pc.check([]byte(c.out))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s %s: error %v, want none", c.hook, c.out, err)
		case c.err != "" && err == nil:
			t.Errorf("%s %s: no error, want %q", c.hook, c.out, c.err)
		case c.err != "" && !strings.Contains(err.Error(), c.err):
			t.Errorf("%s %s:\n got %v\nwant %q", c.hook, c.out, err, c.err)
		}
	}

	note, err := conformHooks[abi.HookBeforeToolCall].check([]byte(`{"deny":true,"reason":"no"}`))
	if err != nil {
		t.Errorf("a denial: %v", err)
	}
	if want := `denies the sample call (reason "no")`; note != want {
		t.Errorf("a denial's note %q, want %q", note, want)
	}
	note, err = conformHooks[abi.HookHandleStage].check([]byte(`{"status":"fail","failure_reason":"no marker"}`))
	if err != nil {
		t.Errorf("a failed stage: %v", err)
	}
	if want := `fails the sample stage (reason "no marker")`; note != want {
		t.Errorf("a failed stage's note %q, want %q", note, want)
	}
}

// Every hook of abi.Hooks is called, in the table's order, with a sample of
// its input type; those that answer have their answer's schema.
func TestConformHooksFromTable(t *testing.T) {
	samples := hookSamples(abi.Manifest{History: true})
	var names []string
	for _, h := range abi.Hooks {
		names = append(names, h.Name)
		pc, ok := conformHooks[h.Name]
		if !ok {
			t.Fatalf("hook %s has no payload check", h.Name)
		}
		if reflect.TypeOf(samples[h.Name]) != h.Input {
			t.Errorf("%s: sample %T, want a %s", h.Name, samples[h.Name], h.Input)
		}
		raw, _ := json.Marshal(samples[h.Name])
		if err := decodeObject(raw, pc.input()); err != nil {
			t.Errorf("%s: the sample does not decode as its input: %v", h.Name, err)
		}
		if pc.answer != h.Output {
			t.Errorf("%s: answer %v, want %v", h.Name, pc.answer, h.Output)
		}
		if h.Output == nil {
			continue
		}
		if err := pc.checkSchema([]byte(`{}`)); err != nil && !strings.Contains(err.Error(), "missing propert") {
			t.Errorf("%s: the schema of %s: %v", h.Name, h.Output, err)
		}
	}
	if len(samples) != len(abi.Hooks) {
		t.Errorf("%d samples for %d hooks", len(samples), len(abi.Hooks))
	}
	inputs := map[reflect.Type]bool{}
	for _, h := range abi.Hooks {
		inputs[h.Input] = true
	}
	for _, v := range sampleInputs(abi.Manifest{}) {
		if !inputs[reflect.TypeOf(v)] {
			t.Errorf("sample input %T is no hook's input: unused", v)
		}
	}
	known, unknown := declaredHooks([]string{"on_final", "later_hook", abi.HookBuildPrompt, abi.HookBuildPrompt})
	if want := []string{abi.HookBuildPrompt, abi.HookOnFinal}; !reflect.DeepEqual(known, want) {
		t.Errorf("declaredHooks: known %v, want %v", known, want)
	}
	if want := []string{"later_hook"}; !reflect.DeepEqual(unknown, want) {
		t.Errorf("declaredHooks: unknown %v, want %v", unknown, want)
	}
	if known, _ := declaredHooks(names); !reflect.DeepEqual(known, names) {
		t.Errorf("declaredHooks of every hook: %v, want the table's order %v", known, names)
	}
}

// Every schema of abi/schema/ compiles, once.
func TestAnswerSchemasCompile(t *testing.T) {
	schemas, err := compiledSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"prompt_output.json", "final.json", "plan.json", "stage_outcome.json", "tool_call_output.json"} {
		if schemas[file] == nil {
			t.Errorf("%s is not compiled", file)
		}
	}
	again, _ := compiledSchemas()
	if again["final.json"] != schemas["final.json"] {
		t.Error("the schemas are compiled again")
	}
}

// An answer the host refuses (nested deeper than abi.MaxDepth: the host's
// adapters decode with guest.DecodeJSON, ErrBadOutput) must not conform.
func TestConformRefusesTooDeepAnswer(t *testing.T) {
	deep := `{"input":{"a":` + strings.Repeat(`[`, abi.MaxDepth+5) + strings.Repeat(`]`, abi.MaxDepth+5) + `}}`
	if err := abi.CheckDepth([]byte(deep), abi.MaxDepth); err == nil {
		t.Fatal("the host would accept it: the test is wrong")
	}
	if _, err := conformHooks[abi.HookBeforeToolCall].check([]byte(deep)); err == nil {
		t.Error("conform accepts a before_tool_call answer the host refuses as ErrBadOutput")
	}
}

// A hook input without a built-in sample takes its schema's first example.
func TestSchemaExampleSample(t *testing.T) {
	v, ok := schemaExample(reflect.TypeFor[abi.InstanceReplaced]())
	if !ok {
		t.Fatal("no example of instance_replaced.json")
	}
	want := abi.InstanceReplaced{SessionID: "s-7f3a", Reason: abi.ReplacedMoved}
	if v != want {
		t.Errorf("example %#v, want %#v", v, want)
	}
	if _, ok := schemaExample(reflect.TypeFor[abi.Usage]()); ok {
		t.Error("an example of usage.json, which has none")
	}
}
