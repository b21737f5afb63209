//go:build !wasip1

package pdk

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

// registerMiddleware registers all eight middleware hooks; seen records
// what the observing ones were given.
func registerMiddleware(seen *[]string) {
	Plugin("mw", "1")
	OnTurnStart(func(in abi.TurnStart) error {
		*seen = append(*seen, "turn_start "+in.SessionID+" "+in.Input+" "+itoa(len(in.History)))
		return nil
	})
	OnAction(func(in abi.Action) error {
		*seen = append(*seen, "action "+in.Tool+" "+in.Input["text"].(string))
		if in.Tool == "bad" {
			return errors.New("bad action")
		}
		return nil
	})
	OnObservation(func(in abi.Observation) error {
		*seen = append(*seen, "observation "+in.Observation)
		return nil
	})
	OnFinal(func(in abi.TurnEnd) error {
		*seen = append(*seen, "final "+in.Status+" "+itoa(in.TurnUsage.TotalTokens))
		return nil
	})
	AfterRun(func(in abi.AfterRunInput) error {
		*seen = append(*seen, "after_run "+in.Status+" "+in.Final.Thought)
		return nil
	})
	BeforeRun(func(in abi.BeforeRunInput) (abi.BeforeRunOutput, error) {
		if in.Turn == 1 {
			return abi.BeforeRunOutput{}, nil // unchanged
		}
		return abi.BeforeRunOutput{SystemPrompt: in.SystemPrompt + "!", Tools: in.Tools[:1]}, nil
	})
	BeforeToolCall(func(in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
		switch in.Tool {
		case "rm":
			return abi.BeforeToolCallOutput{Deny: true, Reason: "no rm"}, nil
		case "upper":
			return abi.BeforeToolCallOutput{Input: map[string]any{"text": strings.ToUpper(in.Input["text"].(string))}}, nil
		case "panic":
			panic("guard broke")
		}
		return abi.BeforeToolCallOutput{}, nil
	})
	AfterToolCall(func(in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
		if !strings.Contains(in.Output, "secret") {
			return abi.AfterToolCallOutput{}, nil
		}
		s := strings.ReplaceAll(in.Output, "secret", "[redacted]")
		return abi.AfterToolCallOutput{Output: &s}, nil
	})
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestMiddlewareManifest(t *testing.T) {
	x := fresh(t)
	var seen []string
	registerMiddleware(&seen)
	BuildPrompt(func(abi.PromptInput) (abi.PromptOutput, error) { return abi.PromptOutput{}, nil })
	out, isErr := run(t, x, abi.ExportDescribe, "")
	if isErr {
		t.Fatal(out)
	}
	var m abi.Manifest
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	want := []string{abi.HookBuildPrompt, abi.HookOnTurnStart, abi.HookOnAction, abi.HookOnObservation, abi.HookOnFinal,
		abi.HookBeforeRun, abi.HookAfterRun, abi.HookBeforeToolCall, abi.HookAfterToolCall}
	if !reflect.DeepEqual(m.Hooks, want) || m.History || strings.Contains(out, "history") {
		t.Fatalf("manifest %s", out)
	}
	WantHistory()
	out, _ = run(t, x, abi.ExportDescribe, "")
	if err := json.Unmarshal([]byte(out), &m); err != nil || !m.History {
		t.Fatalf("manifest with history %s", out)
	}
}

func TestObservingMiddleware(t *testing.T) {
	x := fresh(t)
	var seen []string
	registerMiddleware(&seen)
	for _, c := range []struct{ export, input string }{
		{abi.ExportOnTurnStart, `{"session_id":"s1","turn":1,"input":"hi","history":[{"role":"user","content":"a"}],"later":1}`},
		{abi.ExportOnAction, `{"session_id":"s1","turn":1,"step":1,"tool":"echo","input":{"text":"x"}}`},
		{abi.ExportOnObservation, `{"session_id":"s1","turn":1,"step":1,"tool":"echo","observation":"x"}`},
		{abi.ExportOnFinal, `{"session_id":"s1","turn":1,"step":1,"status":"final","turn_usage":{"total_tokens":42}}`},
		{abi.ExportAfterRun, `{"session_id":"s1","turn":1,"status":"final","final":{"thought":"done","output":1}}`},
	} {
		// Observing hooks answer empty output: a zero result.
		out, isErr := run(t, x, c.export, c.input)
		if isErr || out != "" || x.last != nil {
			t.Fatalf("%s = %q, %v", c.export, out, isErr)
		}
	}
	want := []string{"turn_start s1 hi 1", "action echo x", "observation x", "final final 42", "after_run final done"}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("seen %q", seen)
	}
	out, isErr := run(t, x, abi.ExportOnAction, `{"tool":"bad","input":{"text":"y"}}`)
	if !isErr || out != "bad action" {
		t.Fatalf("failing on_action = %q, %v", out, isErr)
	}
	out, isErr = run(t, x, abi.ExportOnFinal, `{"turn":`)
	if !isErr || !strings.HasPrefix(out, "on_final: invalid input") {
		t.Fatalf("malformed on_final = %q, %v", out, isErr)
	}
}

func TestMutatingMiddleware(t *testing.T) {
	x := fresh(t)
	registerMiddleware(new([]string))
	for _, c := range []struct{ export, input, want string }{
		// The zero output changes nothing: {} on the wire.
		{abi.ExportBeforeRun, `{"turn":1,"system_prompt":"S","tools":["a","b"]}`, `{}`},
		{abi.ExportBeforeRun, `{"turn":2,"system_prompt":"S","tools":["a","b"]}`, `{"system_prompt":"S!","tools":["a"]}`},
		{abi.ExportBeforeToolCall, `{"tool":"ls","input":{}}`, `{}`},
		{abi.ExportBeforeToolCall, `{"tool":"rm","input":{}}`, `{"deny":true,"reason":"no rm"}`},
		{abi.ExportBeforeToolCall, `{"tool":"upper","input":{"text":"ab"}}`, `{"input":{"text":"AB"}}`},
		{abi.ExportAfterToolCall, `{"tool":"t","output":"fine"}`, `{}`},
		{abi.ExportAfterToolCall, `{"tool":"t","output":"a secret b","is_error":true}`, `{"output":"a [redacted] b"}`},
	} {
		out, isErr := run(t, x, c.export, c.input)
		if isErr || out != c.want {
			t.Fatalf("%s(%s) = %q, %v; want %q", c.export, c.input, out, isErr, c.want)
		}
	}
	out, isErr := run(t, x, abi.ExportBeforeToolCall, `{"tool":"panic"}`)
	if !isErr || out != "morph_before_tool_call: panic: guard broke" {
		t.Fatalf("panicking guard = %q, %v", out, isErr)
	}
}

func TestDestroy(t *testing.T) {
	x := fresh(t)
	Plugin("d", "")
	// Not registered: empty output, no error.
	if res := x.call(abi.ExportDestroy, 0, 0); res != 0 {
		t.Fatalf("destroy without OnDestroy = %#x (%q)", res, x.last)
	}
	n := 0
	OnDestroy(func() { n++ })
	if res := x.call(abi.ExportDestroy, 0, 0); res != 0 || n != 1 {
		t.Fatalf("destroy = %#x, ran %d times", res, n)
	}
	// morph_destroy is no hook: the manifest does not list it.
	out, _ := run(t, x, abi.ExportDescribe, "")
	if !strings.Contains(out, `"hooks":[]`) {
		t.Fatalf("manifest %s", out)
	}
	x = fresh(t)
	Plugin("d", "")
	OnDestroy(func() { panic("flush failed") })
	out, isErr := run(t, x, abi.ExportDestroy, "")
	if !isErr || out != "morph_destroy: panic: flush failed" {
		t.Fatalf("panicking destroy = %q, %v", out, isErr)
	}
}

func TestInstanceReplaced(t *testing.T) {
	x := fresh(t)
	Plugin("r", "")
	// Not registered: empty output, no error.
	if out, isErr := run(t, x, abi.ExportInstanceReplaced, `{"session_id":"s0","reason":"discarded"}`); isErr || out != "" {
		t.Fatalf("instance_replaced without OnInstanceReplaced = %q, %v", out, isErr)
	}
	var got []abi.InstanceReplaced
	OnInstanceReplaced(func(in abi.InstanceReplaced) { got = append(got, in) })
	if out, isErr := run(t, x, abi.ExportInstanceReplaced, `{"session_id":"s1","reason":"moved"}`); isErr || out != "" {
		t.Fatalf("instance_replaced = %q, %v", out, isErr)
	}
	if len(got) != 1 || got[0] != (abi.InstanceReplaced{SessionID: "s1", Reason: abi.ReplacedMoved}) {
		t.Fatalf("told %+v", got)
	}
	if out, isErr := run(t, x, abi.ExportInstanceReplaced, `{"session_id":`); !isErr || !strings.Contains(out, "morph_instance_replaced") {
		t.Fatalf("bad input = %q, %v", out, isErr)
	}
	// No hook: the manifest does not list it.
	if out, _ := run(t, x, abi.ExportDescribe, ""); !strings.Contains(out, `"hooks":[]`) {
		t.Fatalf("manifest %s", out)
	}
}

func TestMiddlewareRegistrationMistakes(t *testing.T) {
	cases := map[string]struct {
		register func()
		want     string
	}{
		"nil observer":  {func() { Plugin("p", ""); OnAction(nil) }, "hook on_action registered with a nil function"},
		"nil mutator":   {func() { Plugin("p", ""); BeforeToolCall(nil) }, "hook before_tool_call registered with a nil function"},
		"duplicate":     {func() { registerMiddleware(new([]string)); OnFinal(func(abi.TurnEnd) error { return nil }) }, "hook on_final registered twice"},
		"nil destroy":   {func() { Plugin("p", ""); OnDestroy(nil) }, "pdk.OnDestroy: nil function"},
		"destroy twice": {func() { Plugin("p", ""); OnDestroy(func() {}); OnDestroy(func() {}) }, "pdk.OnDestroy: registered twice"},
		"nil replaced":  {func() { Plugin("p", ""); OnInstanceReplaced(nil) }, "pdk.OnInstanceReplaced: nil function"},
		"nil after_run": {func() { Plugin("p", ""); AfterRun(nil) }, "hook after_run registered with a nil function"},
		"dup before_run": {func() {
			registerMiddleware(new([]string))
			BeforeRun(func(abi.BeforeRunInput) (abi.BeforeRunOutput, error) { return abi.BeforeRunOutput{}, nil })
		}, "hook before_run registered twice"},
		"nil after_tool":  {func() { Plugin("p", ""); AfterToolCall(nil) }, "hook after_tool_call registered with a nil function"},
		"nil turn start":  {func() { Plugin("p", ""); OnTurnStart(nil) }, "hook on_turn_start registered with a nil function"},
		"nil observation": {func() { Plugin("p", ""); OnObservation(nil) }, "hook on_observation registered with a nil function"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			x := fresh(t)
			c.register()
			out, isErr := run(t, x, abi.ExportDescribe, "")
			if !isErr || !strings.Contains(out, c.want) {
				t.Fatalf("describe = %q (error %v), want an error containing %q", out, isErr, c.want)
			}
		})
	}
}

func TestRequiresInManifest(t *testing.T) {
	fresh(t)
	Plugin("dependent", "1")
	Requires("audit", "auth")
	m, err := reg.manifest()
	if err != nil || !reflect.DeepEqual(m.Requires, []string{"audit", "auth"}) {
		t.Fatalf("manifest %+v, %v", m, err)
	}
}
