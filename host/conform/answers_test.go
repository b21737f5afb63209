package conform

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

// The output checks against the schemas of abi/schema/.
func TestConformOutputChecks(t *testing.T) {
	cases := []struct {
		hook, out, err string // err "": conforms
	}{
		{abi.HookBuildPrompt, `{"system_prompt":"Be brief.","added_later":1}`, ""},
		{abi.HookBuildPrompt, ``, "empty output: the export must answer a PromptOutput object"},
		{abi.HookBuildPrompt, `null`, "a JSON null, not a PromptOutput object"},
		{abi.HookBuildPrompt, `{"system_prompt":" \n"}`, "system_prompt is blank"},
		{abi.HookBuildPrompt, `{"System_Prompt":"x"}`, `lacks the required field "system_prompt"`},
		{abi.HookBuildPrompt, `{"system_prompt":null}`, "PromptOutput.system_prompt is a JSON null, want string"},
		{abi.HookBuildParams, ``, ""},
		{abi.HookBuildParams, `{}`, ""},
		{abi.HookBuildParams, `{"parameters":null}`, ""},
		{abi.HookBuildParams, `{"parameters":{"temperature":0.1}}`, ""},
		{abi.HookBuildParams, `{"parameters":[1]}`, "ParamsOutput.parameters is a JSON array, want object or null"},
		{abi.HookFallbackFinal, `{"thought":"t","output":null}`, ""},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"steps":["a",{"step":"b","status":"in_progress"},{"step":"c"}]}}`, ""},
		{abi.HookFallbackFinal, `{"thought":"t"}`, `Final lacks the required field "output"`},
		{abi.HookFallbackFinal, ``, "empty output"},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"summary":"s"}}`, `Plan lacks the required field "steps"`},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"steps":[{"step":"a","status":"done"}]}}`, `steps[0].status is "done"`},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"steps":[3]}}`, "steps[0]: a JSON number, not a PlanStep object"},
		{abi.HookBeforeRun, ``, ""},
		{abi.HookBeforeRun, `{"tools":null}`, ""},
		{abi.HookBeforeRun, `{"system_prompt":"p","tools":["a"]}`, ""},
		{abi.HookBeforeRun, `{"tools":"a"}`, "BeforeRunOutput.tools is a JSON string"},
		{abi.HookBeforeRun, `{"tools":[1]}`, "not a list of strings"},
		{abi.HookBeforeToolCall, `{}`, ""},
		{abi.HookBeforeToolCall, `{"input":{"text":"a"}}`, ""},
		{abi.HookBeforeToolCall, `{"deny":"yes"}`, "BeforeToolCallOutput.deny is a JSON string, want boolean"},
		{abi.HookAfterToolCall, `{"output":""}`, ""},
		{abi.HookAfterToolCall, `{"output":null}`, ""},
		{abi.HookAfterToolCall, `{"output":3}`, "AfterToolCallOutput.output is a JSON number"},
		{abi.HookOnFinal, ``, ""},
		{abi.HookOnFinal, `{"anything":1}`, ""},
		{abi.HookHandleStage, `{"status":"success","context_updates":{"v.passed":true},"later":1}`, ""},
		{abi.HookHandleStage, ``, "empty output: the export must answer a StageOutcome object"},
		{abi.HookHandleStage, `{"status":"ok"}`, `StageOutcome.status "ok": want one of success, fail`},
		{abi.HookHandleStage, `{"status":"success","suggested_next_ids":"a"}`, "StageOutcome.suggested_next_ids is a JSON string, want array"},
		{abi.HookHandleStage, `{"status":"success","context_updates":{"outcome":"fail"}}`, `StageOutcome.context_updates: key "outcome" is the pipeline runner's`},
		{"tool", `{"output":"3"}`, ""},
		{"tool", ``, "empty output: the export must answer a ToolCallOutput object"},
		{"tool", `{}`, `ToolCallOutput lacks the required field "output"`},
		{"tool", `{"output":3}`, "ToolCallOutput.output is a JSON number, want string"},
	}
	for _, c := range cases {
		pc := toolPayloads
		if c.hook != "tool" {
			pc = conformHooks[c.hook]
		}
		_, err := pc.check([]byte(c.out))
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s %s: error %v, want %q", c.hook, c.out, err, c.err)
		}
	}
	note, err := conformHooks[abi.HookBeforeToolCall].check([]byte(`{"deny":true,"reason":"no"}`))
	if err != nil || note != `denies the sample call (reason "no")` {
		t.Errorf("a denial: %q, %v", note, err)
	}
	note, err = conformHooks[abi.HookHandleStage].check([]byte(`{"status":"fail","failure_reason":"no marker"}`))
	if err != nil || note != `fails the sample stage (reason "no marker")` {
		t.Errorf("a failed stage: %q, %v", note, err)
	}
	// Every hook this host calls has its payloads here, and a sample.
	samples := hookSamples(abi.Manifest{History: true})
	for _, h := range hookOrder {
		pc, ok := conformHooks[h]
		if !ok || samples[h] == nil {
			t.Fatalf("hook %s has no payload check or no sample", h)
		}
		raw, _ := json.Marshal(samples[h])
		if err := decodeObject(raw, pc.input()); err != nil || reflect.TypeOf(pc.input()).Elem() != reflect.TypeOf(samples[h]) {
			t.Errorf("%s: sample %T does not decode as its input %T: %v", h, samples[h], pc.input(), err)
		}
	}
	for _, h := range abi.Hooks {
		if !slices.Contains(hookOrder, h.Name) {
			t.Errorf("hook %s is missing from hookOrder", h.Name)
		}
		if h.Mutates != (answerChecks[h.Name] != nil) {
			t.Errorf("hook %s: mutates %v, but an answer check %v", h.Name, h.Mutates, answerChecks[h.Name] != nil)
		}
	}
	known, unknown := declaredHooks([]string{"on_final", "later_hook", abi.HookBuildPrompt, abi.HookBuildPrompt})
	if !slices.Equal(known, []string{abi.HookBuildPrompt, abi.HookOnFinal}) || !slices.Equal(unknown, []string{"later_hook"}) {
		t.Errorf("declaredHooks: known %v, unknown %v", known, unknown)
	}
	if len(hookOrder) != len(conformHooks) {
		t.Errorf("hookOrder has %d hooks, conformHooks %d", len(hookOrder), len(conformHooks))
	}
}
