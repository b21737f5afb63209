package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/morphhost/morph/abi"
)

// flood is a tool whose output or error is n bytes of multi-byte text.
func flood(name string, n int, fail bool) *testTool {
	text := strings.Repeat("é", n/2)
	return &testTool{name: name, fn: func(map[string]any) (string, error) {
		if fail {
			return "", errors.New(text) // a plugin's trap message can be megabytes
		}
		return text, nil
	}}
}

// A tool's output or error of a megabyte reaches the model, the step
// record and the events cut to the limit, on a character boundary, with a
// note; before the fix all of it was appended to the conversation.
func TestObservationsAreCapped(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
		want int
	}{
		{"default", nil, DefaultMaxObservationBytes},
		{"option", []Option{WithMaxObservationBytes(1000)}, 1000},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := script(toolCall("big", `{}`), toolCall("trap", `{}`), finalReply("done"))
			var events []Event
			e := New(m, registry(flood("big", 1<<20, false), flood("trap", 1<<20, true)), append(c.opts, collectEvents(&events))...)
			_, rc, err := e.Run(context.Background(), "t", RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range rc.Steps[:2] {
				model := userMessages(m.reqs[i+1])
				sent := model[len(model)-1]
				for what, s := range map[string]string{"observation": st.Observation, "message": sent, "step error": st.Error} {
					if i == 0 && what == "step error" {
						continue
					}
					if len(s) > c.want+100 {
						t.Errorf("step %d %s: %d bytes, want at most %d: %.80q...", i+1, what, len(s), c.want+100, s)
					}
					if !utf8.ValidString(s) {
						t.Errorf("step %d %s: not valid UTF-8: %.80q...", i+1, what, s)
					}
					if !strings.Contains(s, "more bytes)") {
						t.Errorf("step %d %s: no %q note: %.80q...", i+1, what, "more bytes)", s)
					}
				}
				if !st.Truncated {
					t.Errorf("step %d: Truncated not set", i+1)
				}
			}
			for _, ev := range events {
				if ev.Err != nil && len(ev.Err.Error()) > c.want+100 {
					t.Errorf("%s event error of %d bytes", ev.Kind, len(ev.Err.Error()))
				}
			}
		})
	}
}

// An after_tool_call middleware cannot inflate an observation past the cap.
func TestRewrittenObservationIsCapped(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	mw := &Funcs{ID: "inflate", AfterToolCall: func(context.Context, abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
		return abi.AfterToolCallOutput{Output: &huge}, nil
	}}
	m := script(toolCall("echo", `{"text":"hi"}`), finalReply("done"))
	_, rc, err := New(m, registry(echoTool()), WithMiddleware(mw), WithMaxObservationBytes(500)).Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := len(rc.Steps[0].Observation); n > 600 {
		t.Errorf("observation of %d bytes, want at most 600", n)
	}
	if !rc.Steps[0].Truncated {
		t.Error("Truncated = false, want true")
	}
}

// A hook failing with a megabyte of error text yields a bounded event
// error that still matches the original.
func TestEventTextIsBounded(t *testing.T) {
	sentinel := errors.New("sentinel")
	var events []Event
	e := New(script(finalReply("ok")), nil, collectEvents(&events), WithMaxObservationBytes(1000),
		WithHook(abi.HookBuildPrompt, func(context.Context, any) (any, error) {
			return nil, errors.Join(sentinel, errors.New(strings.Repeat("\x1b[2J", 1<<18)))
		}))
	if _, _, err := e.Run(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range events {
		if ev.Err != nil {
			found = true
			if len(ev.Err.Error()) > 1100 || !errors.Is(ev.Err, sentinel) {
				t.Errorf("%s event: %d bytes, matches the original: %v", ev.Kind, len(ev.Err.Error()), errors.Is(ev.Err, sentinel))
			}
		}
	}
	if !found {
		t.Fatal("no event carried the hook's error")
	}
}

// A final nested too deep gets a correction, and the run still ends with
// the model's next final.
func TestDeepReplyIsCorrected(t *testing.T) {
	deep := `{"type":"final","final":{"output":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}`
	m := script(deep, finalReply("flat"))
	final, rc, err := New(m, nil).Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if final.Output != "flat" {
		t.Errorf("final output = %v, want %q", final.Output, "flat")
	}
	if rc.Steps[0].Action != "parse_error" {
		t.Errorf("step 1's Action = %q, want %q", rc.Steps[0].Action, "parse_error")
	}
	if !strings.Contains(rc.Steps[0].Error, "nested") {
		t.Errorf("step 1's Error = %q, want it to say %q", rc.Steps[0].Error, "nested")
	}
	if msgs := userMessages(m.last()); !strings.Contains(msgs[len(msgs)-1], "could not be used") {
		t.Fatalf("no correction: %q", msgs[len(msgs)-1])
	}
}

// A fail-closed before_run's megabyte of error text ends the turn with a
// bounded error, which a CLI prints.
func TestMiddlewareErrorIsBounded(t *testing.T) {
	f := &Funcs{ID: "gate", BeforeRun: func(context.Context, abi.BeforeRunInput) (abi.BeforeRunOutput, error) {
		return abi.BeforeRunOutput{}, errors.New(strings.Repeat("trap ", 1<<18))
	}}
	_, _, err := New(script(), nil, WithMiddleware(f, MiddlewareConfig{Policy: FailClosed})).Run(context.Background(), "t", RunOptions{})
	var me *MiddlewareError
	if !errors.As(err, &me) || len(err.Error()) > DefaultMaxObservationBytes+200 {
		t.Fatalf("error of %d bytes: %.100v", len(err.Error()), err)
	}
}

// A name of a megabyte of escape bytes, which a plugin (a tool's, a
// required plugin's) or a model (the tool it calls) wrote, is cut wherever
// an error, a message or an event repeats it; before the fix CheckToolName
// made an error of 4 MiB, and the model's tool name reached the
// conversation past the observation cap.
func TestNamesAreCut(t *testing.T) {
	huge := strings.Repeat("\x1b", 1<<20)
	const bound = 1000
	if err := CheckToolName(huge); !errors.Is(err, ErrInvalidTool) || len(err.Error()) > bound {
		t.Errorf("CheckToolName: %d bytes: %.100q", len(fmt.Sprint(err)), err)
	}
	if err := NewRegistry().Validate(huge, nil); err == nil || len(err.Error()) > bound {
		t.Errorf("Validate: %d bytes: %.100q", len(fmt.Sprint(err)), err)
	}

	needy := &fakePlugin{name: "needy", ext: Extension{Requires: []string{huge}}}
	if err := New(nil, nil, WithExtenders(needy)).Initialize(context.Background()); !errors.Is(err, ErrInit) || len(err.Error()) > bound {
		t.Errorf("Initialize: %d bytes: %.100q", len(fmt.Sprint(err)), err)
	}

	// Three calls of a tool of that name, which is not found: the run ends
	// with the fallback final.
	name, _ := json.Marshal(huge)
	call := `{"type":"tool_call","tool_call":{"tool_name":` + string(name) + `,"tool_params":{}}}`
	m := script(call, call, call, "not json")
	var events []Event
	_, rc, err := New(m, nil, collectEvents(&events)).Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rc.StopReason != StopFallback {
		t.Errorf("StopReason = %q, want %q", rc.StopReason, StopFallback)
	}
	if len(rc.Steps) != 3 {
		t.Errorf("%d steps, want 3", len(rc.Steps))
	}
	for _, msg := range userMessages(m.last())[1:] {
		if len(msg) > bound && !strings.HasPrefix(msg, ForceConclusionPrompt) {
			t.Errorf("a message to the model of %d bytes: %.100q", len(msg), msg)
		}
	}
	for _, ev := range events {
		if len(ev.Message)+len(ev.Action) > bound {
			t.Errorf("%s event: message of %d bytes, action of %d", ev.Kind, len(ev.Message), len(ev.Action))
		}
	}
}

// WithMaxJSONDepth and SchemaLimits.MaxParamsDepth (agent.max_json_depth)
// set the depth that was abi.MaxDepth wherever a model or a plugin writes
// JSON: a reply, the parameters a builder returns, a fallback final, a tool
// call's parameters. Before the fix, nothing let 80 levels through.
func TestJSONDepthSetting(t *testing.T) {
	var nested any = 1.0
	for range 80 {
		nested = []any{nested}
	}
	deep, _ := json.Marshal(nested)
	reply := `{"type":"final","final":{"output":` + string(deep) + `}}`
	builder := WithParamsBuilder(func(RunOptions) map[string]any { return map[string]any{"deep": nested} })
	for _, c := range []struct {
		opts []Option
		ok   bool
	}{{nil, false}, {[]Option{WithMaxJSONDepth(100)}, true}, {[]Option{WithMaxJSONDepth(8)}, false}} {
		var events []Event
		m := script(reply, reply, reply, reply)
		final, rc, err := New(m, nil, append(c.opts, builder, collectEvents(&events))...).Run(context.Background(), "t", RunOptions{MaxSteps: 1})
		if err != nil {
			t.Fatal(err)
		}
		kept := rc.StopReason == StopFinal && m.reqs[0].Parameters["deep"] != nil && final.Output != nil
		if kept != c.ok {
			t.Errorf("%d options: stop %s, parameters %v, warnings %q; want the reply and the parameters kept: %v",
				len(c.opts), rc.StopReason, m.reqs[0].Parameters, warnings(events), c.ok)
		}
		hook := WithFallbackFinal(func() *Final { return &Final{Output: nested} })
		final, _, err = New(script("no json", "no json"), nil, append(c.opts, hook)...).Run(context.Background(), "t", RunOptions{MaxSteps: 1})
		if err != nil || (final.Output != DefaultFinalOutput) != c.ok {
			t.Errorf("%d options: fallback final %.40v, want it kept: %v", len(c.opts), final.Output, c.ok)
		}
	}

	// Tool parameters: the registry's limit, down to which a recursive
	// schema's cost is analysed (schemacost.TestCostIsAnalysedToMaxParamsDepth,
	// and TestCostLimitsCarryEveryLimit for the setting).
	list := &testTool{name: "list", schema: `{"type":"object","properties":{"next":{"$ref":"#"}}}`}
	var params map[string]any = map[string]any{}
	for range 80 {
		params = map[string]any{"next": params}
	}
	r := registry(list)
	if err := r.Validate("list", params); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("80 levels under the default limit: %v", err)
	}
	r.SetSchemaLimits(SchemaLimits{MaxParamsDepth: 100})
	if err := r.Validate("list", params); err != nil {
		t.Errorf("80 levels under a limit of 100: %v", err)
	}
}
