package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/llm"
)

// checkingModel is a model client that knows its parameters: only
// temperature, a number.
type checkingModel struct{ *model }

func (checkingModel) CheckParameters(p map[string]any) error {
	for k, v := range p {
		if _, ok := v.(float64); k != "temperature" || !ok {
			return fmt.Errorf("parameter %q: not supported", k)
		}
	}
	return nil
}

// paramsPlugin is a plugin whose build_params hook answers out.
func paramsPlugin(out map[string]any) *fakePlugin {
	return &fakePlugin{name: "tuner", ext: Extension{Options: []Option{WithParamsBuilder(func(RunOptions) map[string]any { return out })}}}
}

// A params builder answering a key the client rejects no longer ends the
// run before any model call: the base parameters are used, and a warning
// names the plugin and the key.
func TestBadBuiltParamsFallBackToBase(t *testing.T) {
	var deep any = 1.0
	for range 100 {
		deep = []any{deep}
	}
	for _, c := range []struct {
		name    string
		out     map[string]any
		checker bool // the client checks its parameters; the depth limit holds without
		bad     string
	}{
		{"unknown key", map[string]any{"temperature": 0.5, "tempreature": 0.7}, true, "tempreature"},
		{"too deep", map[string]any{"temperature": 0.5, "chat_template_kwargs": deep}, false, "nested more than 64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := script(finalReply("ok"))
			var client llm.Client = m
			if c.checker {
				client = checkingModel{m}
			}
			var events []Event
			final, rc, err := New(client, nil, WithExtenders(paramsPlugin(c.out)), collectEvents(&events)).
				Run(context.Background(), "t", RunOptions{Parameters: map[string]any{"temperature": 0.2}})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if final == nil {
				t.Error("no final")
			}
			if rc.StopReason != StopFinal {
				t.Errorf("StopReason = %q, want %q", rc.StopReason, StopFinal)
			}
			if got := m.last().Parameters; len(got) != 1 || got["temperature"] != 0.2 {
				t.Fatalf("sent parameters %v, want the base ones", got)
			}
			warned := false
			for _, ev := range events {
				warned = warned || (ev.Kind == EventWarning && ev.Plugin == "tuner" && strings.Contains(ev.Message, `"tuner"`) &&
					ev.Err != nil && strings.Contains(ev.Err.Error(), c.bad))
			}
			if !warned {
				t.Fatalf("no warning naming the plugin and %q: %v", c.bad, events)
			}
		})
	}
	t.Run("bad base parameters stay the run's error", func(t *testing.T) {
		m := checkingModel{script(finalReply("ok"))}
		_, rc, err := New(m, nil, WithExtenders(paramsPlugin(map[string]any{"temperature": 0.5}))).
			Run(context.Background(), "t", RunOptions{Parameters: map[string]any{"top_k": 3.0}})
		if err == nil || !strings.Contains(err.Error(), "top_k") {
			t.Errorf("err = %v, want one naming top_k", err)
		}
		if rc.StopReason != StopBadParams {
			t.Errorf("StopReason = %q, want %q", rc.StopReason, StopBadParams)
		}
		if len(m.reqs) != 0 {
			t.Errorf("%d requests, want none", len(m.reqs))
		}
	})
}

// rewriter is a before_tool_call middleware that replaces every input.
func rewriter(input map[string]any) *Funcs {
	return &Funcs{ID: "rewriter", BeforeToolCall: func(context.Context, abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
		return abi.BeforeToolCallOutput{Input: input}, nil
	}}
}

// A middleware rewriting a valid input into one the tool's schema rejects
// is blamed, not the model: fail-open uses the model's input with a
// warning, fail-closed denies the call naming the middleware.
func TestInvalidRewriteIsTheMiddlewares(t *testing.T) {
	broken := map[string]any{"times": "three"} // no text, times not an integer
	t.Run("fail_open", func(t *testing.T) {
		tool := echoTool()
		var events []Event
		_, rc, err := New(script(toolCall("echo", `{"text":"hi"}`), finalReply("x")), registry(tool), WithMiddleware(rewriter(broken)), collectEvents(&events)).
			Run(context.Background(), "t", RunOptions{})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if n := tool.calls.Load(); n != 1 {
			t.Errorf("the tool ran %d times, want 1", n)
		}
		if obs := rc.Steps[0].Observation; obs != "echo: hi" {
			t.Errorf("observation %q, want the model's input's, %q", obs, "echo: hi")
		}
		w := warnings(events)
		if len(w) != 1 {
			t.Fatalf("warnings %q, want one", w)
		}
		for _, name := range []string{`"rewriter"`, `"echo"`} {
			if !strings.Contains(w[0], name) {
				t.Errorf("warning %q, want it to name %s", w[0], name)
			}
		}
	})
	t.Run("fail_closed", func(t *testing.T) {
		tool := echoTool()
		_, rc, _ := New(script(toolCall("echo", `{"text":"hi"}`), finalReply("x")), registry(tool),
			WithMiddleware(rewriter(broken), MiddlewareConfig{Policy: FailClosed})).Run(context.Background(), "t", RunOptions{})
		if n := tool.calls.Load(); n != 0 {
			t.Errorf("the tool ran %d times, want none", n)
		}
		obs := rc.Steps[0].Observation
		if !strings.HasPrefix(obs, "Tool call denied: ") {
			t.Errorf("observation %q, want a denial", obs)
		}
		for _, part := range []string{`"rewriter"`, "'text'"} {
			if !strings.Contains(obs, part) {
				t.Errorf("observation %q, want it to name %s", obs, part)
			}
		}
	})
	t.Run("an input invalid already gets the model's own error", func(t *testing.T) {
		tool := echoTool()
		var events []Event
		_, rc, _ := New(script(toolCall("echo", `{"times":0}`), finalReply("x")), registry(tool),
			WithMiddleware(rewriter(broken), MiddlewareConfig{Policy: FailClosed}), collectEvents(&events)).Run(context.Background(), "t", RunOptions{})
		if n := tool.calls.Load(); n != 0 {
			t.Errorf("the tool ran %d times, want none", n)
		}
		obs := rc.Steps[0].Observation
		if !strings.Contains(obs, "/times") {
			t.Errorf("observation %q, want the model's input's error at /times", obs)
		}
		if strings.Contains(obs, "rewriter") {
			t.Errorf("observation %q names the middleware, want the model's error alone", obs)
		}
		if w := warnings(events); len(w) != 0 {
			t.Errorf("warnings %q, want none", w)
		}
	})
}

// A before_run hook's blank prompt and unknown tools are reported, not
// silently applied.
func TestBeforeRunOutputIsChecked(t *testing.T) {
	f := &Funcs{ID: "narrow", BeforeRun: func(context.Context, abi.BeforeRunInput) (abi.BeforeRunOutput, error) {
		return abi.BeforeRunOutput{SystemPrompt: " \n ", Tools: []string{"echo", "rm_rf"}}, nil
	}}
	m := script(finalReply("x"))
	var events []Event
	_, rc, err := New(m, registry(echoTool(), failTool()), WithMiddleware(f), collectEvents(&events)).Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if strings.TrimSpace(rc.SystemPrompt) == "" {
		t.Errorf("system prompt %q, want the default rather than the blank one", rc.SystemPrompt)
	}
	if !strings.Contains(rc.SystemPrompt, "- echo:") {
		t.Errorf("system prompt %q, want it to list echo", rc.SystemPrompt)
	}
	if strings.Contains(rc.SystemPrompt, "- boom:") {
		t.Errorf("system prompt %q lists boom, which before_run left out", rc.SystemPrompt)
	}
	w := strings.Join(warnings(events), "\n")
	if !strings.Contains(w, `"rm_rf"`) || !strings.Contains(w, "blank system prompt") {
		t.Fatalf("warnings %q", w)
	}
}

// A fallback final that cannot be written as JSON is replaced by the
// default one; before the fix the run's result could not be encoded.
func TestUnusableFallbackFinalIsReplaced(t *testing.T) {
	var events []Event
	m := script("no json", "no json", "no json", "no json")
	hook := WithFallbackFinal(func() *Final { return &Final{Output: math.NaN()} })
	final, rc, err := New(m, nil, hook, collectEvents(&events)).Run(context.Background(), "t", RunOptions{MaxSteps: 1})
	checkRun(t, final, rc, err, DefaultFinalOutput, StopFallback)
	if _, err := json.Marshal(final); err != nil || !json.Valid(rc.RawFinalAnswer) {
		t.Fatalf("final not encodable: %v", err)
	}
	if !strings.Contains(strings.Join(warnings(events), "\n"), "fallback_final hook failed") {
		t.Fatalf("warnings %q", warnings(events))
	}
}

// marshalCount is a parameter value that counts how often it is encoded:
// once per validation of an input that holds it.
type marshalCount struct{ n *atomic.Int32 }

func (c marshalCount) MarshalJSON() ([]byte, error) { c.n.Add(1); return []byte(`1`), nil }

// An input is validated once, however many middleware rewrite it: before
// the fix, execute validated a rewrite again, and each invalid rewrite
// validated the input it replaced again.
func TestRewriteIsValidatedOnce(t *testing.T) {
	var n atomic.Int32
	counted := map[string]any{"x": marshalCount{&n}}
	tool := &testTool{name: "t", schema: `{"type":"object","properties":{"x":{}},"additionalProperties":false}`,
		fn: func(map[string]any) (string, error) { return "ok", nil }}
	invalid := map[string]any{"y": 1}
	for _, c := range []struct {
		name  string
		chain []*Funcs
	}{
		{"a valid rewrite", []*Funcs{rewriter(counted)}},
		{"then invalid ones", []*Funcs{rewriter(counted), rewriter(invalid), rewriter(invalid)}},
	} {
		n.Store(0)
		var opts []Option
		for _, f := range c.chain {
			opts = append(opts, WithMiddleware(f))
		}
		_, rc, err := New(script(toolCall("t", `{}`), finalReply("x")), registry(tool), opts...).Run(context.Background(), "t", RunOptions{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if obs := rc.Steps[0].Observation; obs != "ok" {
			t.Errorf("%s: observation %q, want %q", c.name, obs, "ok")
		}
		if n.Load() != 1 {
			t.Errorf("%s: the input validated %d times, want once", c.name, n.Load())
		}
	}
}

// A plugin's tool schema is compiled (and its cost analysed) once at
// start-up; before the fix, when the plugin was checked and again by the
// registry's Check.
func TestPluginSchemasCompileOnce(t *testing.T) {
	var n atomic.Int32
	tool := &countingSchema{Tool: echoTool(), n: &n}
	e := New(nil, nil, WithExtenders(&fakePlugin{name: "p", ext: Extension{Tools: []Tool{tool}}}))
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Registry().Validate("echo", map[string]any{"text": "hi"}); err != nil || n.Load() != 1 {
		t.Fatalf("validate: %v; the schema was read %d times, want once", err, n.Load())
	}
}

// countingSchema counts the reads of its tool's schema.
type countingSchema struct {
	Tool
	n *atomic.Int32
}

func (c *countingSchema) ParameterSchema() string { c.n.Add(1); return c.Tool.ParameterSchema() }

// A hook bound by the table that answers another payload than its hook's
// fails as any failing hook does: the default is used, with a warning
// naming the types, and the hook's event says it failed.
func TestHookAnswerOfAnotherTypeFails(t *testing.T) {
	var events []Event
	m := script(finalReply("x"))
	wrong := WithHook(abi.HookBuildPrompt, func(context.Context, any) (any, error) {
		return &abi.ParamsOutput{}, nil // build_params' answer, not build_prompt's
	})
	e := New(m, nil, wrong, collectEvents(&events))
	_, rc, err := e.Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := DefaultPrompt(DefaultIdentity, DefaultRules, nil); rc.SystemPrompt != want {
		t.Errorf("system prompt %q, want the default", rc.SystemPrompt)
	}
	var outcome string
	var warned error
	for _, ev := range events {
		switch {
		case ev.Kind == EventHook && ev.Hook == abi.HookBuildPrompt:
			outcome = ev.Outcome
		case ev.Kind == EventWarning && ev.Hook == abi.HookBuildPrompt:
			warned = ev.Err
		}
	}
	if outcome != OutcomeError {
		t.Errorf("build_prompt hook event outcome %q, want %q", outcome, OutcomeError)
	}
	if want := "answered a *abi.ParamsOutput, not a *abi.PromptOutput"; warned == nil || !strings.Contains(warned.Error(), want) {
		t.Errorf("build_prompt warning's error %v, want one saying %q", warned, want)
	}
}

// WithHook takes the engine hooks only: a middleware's name, or one that is
// no hook's, is the caller's bug, refused at once.
func TestWithHookRefusesOtherNames(t *testing.T) {
	for _, name := range []string{abi.HookBeforeToolCall, "build_promt"} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), strconv.Quote(name)) {
					t.Errorf("WithHook(%q): recovered %v, want a panic naming it", name, r)
				}
			}()
			WithHook(name, func(context.Context, any) (any, error) { return nil, nil })
		}()
	}
}
