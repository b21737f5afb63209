package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/llm"
)

// reply is one scripted model answer: text, or an error from the client.
type reply struct {
	text string
	err  error
}

// model replays replies and records every request it got.
type model struct {
	mu      sync.Mutex
	replies []reply
	reqs    []llm.Request
}

func TestMain(m *testing.M) {
	// Warnings are asserted through events; keep test output readable.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(m.Run())
}

func script(texts ...string) *model {
	m := &model{}
	for _, t := range texts {
		m.replies = append(m.replies, reply{text: t})
	}
	return m
}

func (m *model) Chat(ctx context.Context, req llm.Request) (llm.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	if len(m.replies) == 0 {
		return llm.Result{}, errors.New("script exhausted")
	}
	r := m.replies[0]
	m.replies = m.replies[1:]
	if r.err != nil {
		return llm.Result{}, r.err
	}
	return llm.Result{Text: r.text, Usage: llm.Usage{InputTokens: 10, OutputTokens: 5, Cost: 0.001}, Duration: time.Millisecond}, nil
}

func (m *model) last() llm.Request { return m.reqs[len(m.reqs)-1] }

func toolCall(name, params string) string {
	return fmt.Sprintf(`{"type":"tool_call","tool_call":{"thought":"use %s","tool_name":%q,"tool_params":%s}}`, name, name, params)
}

func finalReply(out string) string {
	return fmt.Sprintf(`{"type":"final","final":{"thought":"done","output":%q}}`, out)
}

// testTool is a tool whose behaviour a test sets.
type testTool struct {
	name, schema string
	fn           func(map[string]any) (string, error)
	calls        atomic.Int64 // concurrent sessions share a tool
}

func (t *testTool) Name() string            { return t.name }
func (t *testTool) Description() string     { return "test tool " + t.name }
func (t *testTool) ParameterSchema() string { return t.schema }
func (t *testTool) Execute(_ context.Context, p map[string]any) (string, error) {
	t.calls.Add(1)
	return t.fn(p)
}

func echoTool() *testTool {
	return &testTool{name: "echo",
		schema: `{"type":"object","properties":{"text":{"type":"string"},"times":{"type":"integer","minimum":1}},"required":["text"]}`,
		fn:     func(p map[string]any) (string, error) { return "echo: " + p["text"].(string), nil }}
}

func failTool() *testTool {
	return &testTool{name: "boom", fn: func(map[string]any) (string, error) { return "", errors.New("disk on fire") }}
}

func registry(tools ...Tool) *Registry {
	r := NewRegistry()
	for _, t := range tools {
		r.Register(t)
	}
	return r
}

func userMessages(req llm.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == llm.RoleUser {
			out = append(out, m.Content)
		}
	}
	return out
}

// checkRun fails t unless a run ended without error in a final of output,
// for stop reason stop.
func checkRun(t *testing.T, final *Final, rc *Context, err error, output any, stop string) {
	t.Helper()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if final.Output != output {
		t.Errorf("final output = %v, want %v", final.Output, output)
	}
	if rc.StopReason != stop {
		t.Errorf("StopReason = %q, want %q", rc.StopReason, stop)
	}
}

// field is a value a test got, by name, and the value it wants.
type field struct {
	name      string
	got, want any
}

// eq is the field name whose value got should be want; the one type of
// the two keeps a constant want from taking another type than got's.
func eq[T comparable](name string, got, want T) field {
	return field{name, got, want}
}

// checkFields reports each of fields, of what, whose got is not its want.
func checkFields(t *testing.T, what string, fields ...field) {
	t.Helper()
	for _, f := range fields {
		if f.got != f.want {
			t.Errorf("%s: %s = %#v, want %#v", what, f.name, f.got, f.want)
		}
	}
}

// toolNames returns the names of specs, in order.
func toolNames(specs []abi.ToolSpec) []string {
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return names
}

func collectEvents(events *[]Event) Option {
	return WithEventHandler(func(ev Event) { *events = append(*events, ev) })
}

func warnings(events []Event) []string {
	var out []string
	for _, ev := range events {
		if ev.Kind == EventWarning {
			out = append(out, ev.Message)
		}
	}
	return out
}

func TestRunToolThenFinal(t *testing.T) {
	m := script(toolCall("echo", `{"text":"hi"}`), `{"type":"final","final":{"thought":"ok","output":"hi back","sources":["echo"]}}`)
	tool := echoTool()
	final, rc, err := New(m, registry(tool)).Run(context.Background(), "say hi", RunOptions{Model: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	if final.Output != "hi back" || rc.StopReason != StopFinal {
		t.Fatalf("final %+v stop %s", final, rc.StopReason)
	}
	if string(rc.RawFinalAnswer) != `{"thought":"ok","output":"hi back","sources":["echo"]}` {
		t.Fatalf("RawFinalAnswer = %s", rc.RawFinalAnswer)
	}
	if n := tool.calls.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
	if rc.Metrics.ToolCalls != 1 {
		t.Errorf("Metrics.ToolCalls = %d, want 1", rc.Metrics.ToolCalls)
	}
	if rc.Metrics.LLMRounds != 2 {
		t.Errorf("Metrics.LLMRounds = %d, want 2", rc.Metrics.LLMRounds)
	}
	if len(rc.Steps) != 2 {
		t.Fatalf("%d steps, want 2: %+v", len(rc.Steps), rc.Steps)
	}
	if rc.Steps[0].Action != "echo" {
		t.Errorf("step 1's Action = %q, want %q", rc.Steps[0].Action, "echo")
	}
	if rc.Steps[0].Observation != "echo: hi" {
		t.Errorf("step 1's Observation = %q, want %q", rc.Steps[0].Observation, "echo: hi")
	}
	second := m.reqs[1]
	if got := userMessages(second); got[len(got)-1] != "Tool Result (echo):\necho: hi" {
		t.Fatalf("observation message %q", got[len(got)-1])
	}
	for _, req := range m.reqs {
		if !req.ForceJSON || req.Model != "m1" {
			t.Fatalf("request %+v: want ForceJSON and model m1", req)
		}
	}
}

func TestDefaultPromptAndNoOptionsIsDefault(t *testing.T) {
	m := script(finalReply("x"))
	_, rc, err := New(m, registry(echoTool())).Run(context.Background(), "the task", RunOptions{Parameters: map[string]any{"temperature": 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	sys := m.reqs[0].Messages[0]
	if sys.Role != llm.RoleSystem || sys.Content != DefaultPrompt(DefaultIdentity, DefaultRules, registry(echoTool()).Specs()) {
		t.Fatalf("system prompt is not the default:\n%s", sys.Content)
	}
	for _, want := range []string{DefaultIdentity, "- echo: test tool echo", `"required":["text"]`, `"type":"tool_call"`, `"type":"plan"`, `"type":"final"`, DefaultRules[0]} {
		if !strings.Contains(sys.Content, want) {
			t.Errorf("default prompt lacks %q", want)
		}
	}
	if u := m.reqs[0].Messages[1]; u.Role != llm.RoleUser || u.Content != "the task" {
		t.Fatalf("second message %+v", u)
	}
	if m.reqs[0].Parameters["temperature"] != 0.2 || len(rc.Parameters) != 1 {
		t.Fatalf("params %v, want the base parameters unchanged", m.reqs[0].Parameters)
	}
}

func TestParamsBuiltOnceAndSentEveryRequest(t *testing.T) {
	// Three identical calls force a conclusion, whose request must carry the params too.
	m := script(toolCall("echo", `{"text":"a"}`), toolCall("echo", `{"text":"a"}`), toolCall("echo", `{"text":"a"}`), finalReply("forced"))
	builds := 0
	var seen RunOptions
	e := New(m, registry(echoTool()), WithParamsBuilder(func(o RunOptions) map[string]any {
		builds++
		seen = o
		return map[string]any{"temperature": 0.1, "seed": 7}
	}))
	final, rc, err := e.Run(context.Background(), "t", RunOptions{MaxSteps: 9, Parameters: map[string]any{"top_p": 0.5, "seed": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if final.Output != "forced" || rc.StopReason != StopForced {
		t.Fatalf("final %+v stop %s", final, rc.StopReason)
	}
	if builds != 1 || seen.MaxSteps != 9 {
		t.Fatalf("builder called %d times with %+v", builds, seen)
	}
	if len(m.reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(m.reqs))
	}
	for i, req := range m.reqs {
		p := req.Parameters
		for key, want := range map[string]any{"temperature": 0.1, "seed": 7, "top_p": 0.5} {
			if p[key] != want {
				t.Errorf("request %d: %s = %v, want the builder's %v over the base's", i, key, p[key], want)
			}
		}
	}
	if got := userMessages(m.last()); got[len(got)-1] != ForceConclusionPrompt {
		t.Fatalf("last request does not force a conclusion: %q", got[len(got)-1])
	}
}

func TestParseRetries(t *testing.T) {
	t.Run("correction then success resets the counter", func(t *testing.T) {
		m := script("nonsense", finalReply("ok"))
		final, rc, err := New(m, nil).Run(context.Background(), "t", RunOptions{ParseRetries: 1})
		if err != nil || final.Output != "ok" {
			t.Fatalf("err %v final %+v", err, final)
		}
		if rc.Metrics.ParseRetries != 1 || rc.Steps[0].Action != "parse_error" {
			t.Fatalf("metrics %+v steps %+v", rc.Metrics, rc.Steps)
		}
		msgs := m.reqs[1].Messages
		if msgs[len(msgs)-2].Content != "nonsense" || !strings.Contains(msgs[len(msgs)-1].Content, "could not be used") {
			t.Fatalf("retry lacks the raw reply and a correction: %+v", msgs)
		}
	})
	t.Run("exhausted retries force a conclusion", func(t *testing.T) {
		m := script("bad 1", "bad 2", "bad 3", finalReply("concluded"))
		final, rc, err := New(m, nil).Run(context.Background(), "t", RunOptions{ParseRetries: 2})
		checkRun(t, final, rc, err, "concluded", StopForced)
		if rc.Metrics.ParseRetries != 3 || len(m.reqs) != 4 {
			t.Fatalf("metrics %+v, %d requests", rc.Metrics, len(m.reqs))
		}
	})
	t.Run("a good parse resets the counter", func(t *testing.T) {
		m := script("bad", toolCall("echo", `{"text":"x"}`), "bad", finalReply("ok"))
		final, _, err := New(m, registry(echoTool())).Run(context.Background(), "t", RunOptions{ParseRetries: 1})
		if err != nil || final.Output != "ok" {
			t.Fatalf("err %v final %+v: two separated failures must not exhaust one retry", err, final)
		}
	})
}

func TestToolObservations(t *testing.T) {
	echo, boom := echoTool(), failTool()
	m := script(
		toolCall("nope", `{}`),
		toolCall("boom", `{}`),
		toolCall("echo", `{"times":"three"}`),
		toolCall("echo", `{"text":"fine"}`),
		finalReply("done"))
	successes := []string{}
	e := New(m, registry(echo, boom), WithOnToolSuccess(func(rc *Context, name string) {
		if rc == nil || rc.Task != "t" {
			t.Errorf("onToolSuccess got run context %+v", rc)
		}
		successes = append(successes, name)
	}))
	_, rc, err := e.Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obs := func(i int) string { return rc.Steps[i].Observation }
	if obs(0) != "Error: tool 'nope' not found. Available tools: boom, echo" {
		t.Errorf("unknown tool observation %q", obs(0))
	}
	if obs(1) != "error: disk on fire" || rc.Steps[1].Error == "" {
		t.Errorf("tool error observation %q", obs(1))
	}
	if !errors.Is(e.Registry().Validate("echo", map[string]any{"times": "three"}), ErrInvalidParams) {
		t.Errorf("Validate does not wrap ErrInvalidParams")
	}
	for _, field := range []string{"'text'", "/times"} {
		if !strings.Contains(obs(2), field) {
			t.Errorf("validation observation %q does not name %s", obs(2), field)
		}
	}
	if n := echo.calls.Load(); n != 1 {
		t.Errorf("echo executed %d times: invalid params must not reach Execute", n)
	}
	if strings.Join(successes, ",") != "echo" {
		t.Errorf("onToolSuccess calls %v, want only the successful echo", successes)
	}
}

func TestRepeatedCallForcesConclusion(t *testing.T) {
	// Params equal up to key order count as the same call.
	m := script(toolCall("echo", `{"text":"a","times":1}`), toolCall("echo", `{"times":1,"text":"a"}`), toolCall("echo", `{"text":"a","times":1}`), finalReply("f"))
	_, rc, err := New(m, registry(echoTool())).Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rc.StopReason != StopForced {
		t.Errorf("StopReason = %q, want %q", rc.StopReason, StopForced)
	}
	if len(rc.Steps) != 3 {
		t.Errorf("%d steps, want 3", len(rc.Steps))
	}
	// A different call in between resets the count.
	m = script(toolCall("echo", `{"text":"a"}`), toolCall("echo", `{"text":"a"}`), toolCall("echo", `{"text":"b"}`), toolCall("echo", `{"text":"a"}`), finalReply("f"))
	_, rc, _ = New(m, registry(echoTool())).Run(context.Background(), "t", RunOptions{})
	if rc.StopReason != StopFinal {
		t.Fatalf("stop %s, want final: the calls were not three in a row", rc.StopReason)
	}
}

func TestMaxStepsAndTokenBudget(t *testing.T) {
	plans := func(n int) []string {
		var s []string
		for i := 0; i < n; i++ {
			s = append(s, `{"type":"plan","plan":{"steps":["a"]}}`)
		}
		return s
	}
	m := script(append(plans(3), finalReply("late"))...)
	final, rc, err := New(m, nil).Run(context.Background(), "t", RunOptions{MaxSteps: 3})
	checkRun(t, final, rc, err, "late", StopForced)
	if len(m.reqs) != 4 {
		t.Errorf("%d requests, want 4", len(m.reqs))
	}
	if final.Plan == nil || final.Plan.Steps[0].Status != abi.StepCompleted {
		t.Fatalf("final plan %+v, want the stored plan marked completed", final.Plan)
	}
	// Each reply costs 15 tokens: a budget of 20 is exceeded after the second.
	m = script(append(plans(2), finalReply("budget"))...)
	final, rc, _ = New(m, nil).Run(context.Background(), "t", RunOptions{TokenBudget: 20})
	if final.Output != "budget" {
		t.Errorf("final output = %v, want %q", final.Output, "budget")
	}
	if len(rc.Steps) != 2 {
		t.Errorf("%d steps, want 2", len(rc.Steps))
	}
	if rc.Metrics.TotalTokens != 45 {
		t.Errorf("Metrics.TotalTokens = %d, want 45", rc.Metrics.TotalTokens)
	}
}

func TestFallbackFinal(t *testing.T) {
	forced := func(last reply) *model {
		m := script(`{"type":"plan","plan":{"steps":[]}}`)
		m.replies = append(m.replies, last)
		return m
	}
	points := map[string]reply{
		"chat error":   {err: errors.New("503")},
		"parse error":  {text: "not json"},
		"not a final":  {text: toolCall("echo", `{"text":"x"}`)},
		"unknown type": {text: `{"type":"wat"}`},
	}
	for name, last := range points {
		t.Run(name+" without hook", func(t *testing.T) {
			final, rc, err := New(forced(last), nil).Run(context.Background(), "t", RunOptions{MaxSteps: 1})
			checkRun(t, final, rc, err, DefaultFinalOutput, StopFallback)
			if string(rc.RawFinalAnswer) != `{"thought":"","output":"insufficient_evidence"}` {
				t.Fatalf("RawFinalAnswer = %s", rc.RawFinalAnswer)
			}
		})
		t.Run(name+" with hook", func(t *testing.T) {
			called := 0
			e := New(forced(last), nil, WithFallbackFinal(func() *Final {
				called++
				return &Final{Thought: "fb", Output: "from hook"}
			}))
			final, rc, err := e.Run(context.Background(), "t", RunOptions{MaxSteps: 1})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if called != 1 {
				t.Errorf("the hook was called %d times, want 1", called)
			}
			if final.Output != "from hook" {
				t.Errorf("final output = %v, want %q", final.Output, "from hook")
			}
			if string(rc.RawFinalAnswer) != `{"thought":"fb","output":"from hook"}` {
				t.Fatalf("RawFinalAnswer = %s", rc.RawFinalAnswer)
			}
		})
	}
}

// The engine makes its own final of a fallback hook's answer: a hook that
// answers the same final every time does not get a run's plan written into
// it (nor a concurrent run's), and cannot change a run's result after.
func TestFallbackAnswerIsCopied(t *testing.T) {
	kept := &Final{Output: map[string]any{"n": 1.0}}
	m := script(`{"type":"plan","plan":{"steps":["a"]}}`, "junk")
	final, rc, err := New(m, nil, WithFallbackFinal(func() *Final { return kept })).Run(context.Background(), "t", RunOptions{MaxSteps: 1})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rc.StopReason != StopFallback {
		t.Errorf("StopReason = %q, want %q", rc.StopReason, StopFallback)
	}
	if final.Plan == nil {
		t.Fatalf("final %+v has no Plan, want the fallback with the run's plan", final)
	}
	if kept.Plan != nil {
		t.Fatalf("the hook's final got the run's plan %+v", kept.Plan)
	}
	kept.Output.(map[string]any)["n"] = 2.0
	if final.Output.(map[string]any)["n"] != 1.0 {
		t.Fatalf("the hook changed the run's final: %+v", final.Output)
	}
}

func TestModelErrorFailsTheRun(t *testing.T) {
	m := &model{replies: []reply{{err: errors.New("401 unauthorized")}}}
	final, rc, err := New(m, nil).Run(context.Background(), "t", RunOptions{})
	if final != nil {
		t.Errorf("final = %+v, want none", final)
	}
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("err = %v, want the model's 401", err)
	}
	if rc.StopReason != StopModelFailed {
		t.Errorf("StopReason = %q, want %q", rc.StopReason, StopModelFailed)
	}
}

// blockingModel answers its first call and blocks on the second until ctx ends.
type blockingModel struct{ calls int }

func (b *blockingModel) Chat(ctx context.Context, _ llm.Request) (llm.Result, error) {
	b.calls++
	if b.calls == 1 {
		return llm.Result{Text: `{"type":"plan","plan":{"steps":["wait"]}}`}, nil
	}
	<-ctx.Done()
	return llm.Result{}, fmt.Errorf("transport: %w", ctx.Err())
}

func TestCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var final *Final
	var rc *Context
	var err error
	go func() {
		defer close(done)
		final, rc, err = New(&blockingModel{}, nil).Run(ctx, "t", RunOptions{})
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	if final != nil {
		t.Errorf("final = %+v, want none", final)
	}
	if err != context.Canceled {
		t.Fatalf("err = %v, want exactly ctx.Err(), %v", err, context.Canceled)
	}
	if rc.StopReason != StopCanceled {
		t.Fatalf("stop %s", rc.StopReason)
	}
	// An already-cancelled context makes no model call at all.
	m := script(finalReply("x"))
	_, _, err = New(m, nil).Run(ctx, "t", RunOptions{})
	if err != context.Canceled || len(m.reqs) != 0 {
		t.Fatalf("err %v, %d requests", err, len(m.reqs))
	}
}

func TestAddUsage(t *testing.T) {
	var rc Context
	rc.AddUsage(llm.Usage{InputTokens: 100, OutputTokens: 20, Cost: 0.5}, time.Second)
	rc.AddUsage(llm.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 16, Cost: 0.25}, time.Second)
	// No total again after a non-zero running total: still input+output (the reference quirk is not copied).
	rc.AddUsage(llm.Usage{InputTokens: 1, OutputTokens: 2, Cost: 0.125}, time.Second)
	m := rc.Metrics
	if m.InputTokens != 111 {
		t.Errorf("InputTokens = %d, want 111", m.InputTokens)
	}
	if m.OutputTokens != 27 {
		t.Errorf("OutputTokens = %d, want 27", m.OutputTokens)
	}
	if m.TotalTokens != 120+16+3 {
		t.Errorf("TotalTokens = %d, want %d", m.TotalTokens, 120+16+3)
	}
	if m.TotalCost != 0.875 {
		t.Errorf("TotalCost = %v, want 0.875", m.TotalCost)
	}
	if m.LLMRounds != 3 {
		t.Errorf("LLMRounds = %d, want 3", m.LLMRounds)
	}
	if m.LLMTime != 3*time.Second {
		t.Errorf("LLMTime = %v, want %v", m.LLMTime, 3*time.Second)
	}
}

func TestRunUsageAndCost(t *testing.T) {
	m := script(toolCall("echo", `{"text":"a"}`), finalReply("x"))
	_, rc, err := New(m, registry(echoTool())).Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Metrics.TotalTokens != 30 {
		t.Errorf("Metrics.TotalTokens = %d, want 30", rc.Metrics.TotalTokens)
	}
	if rc.Metrics.TotalCost != 0.002 {
		t.Errorf("Metrics.TotalCost = %v, want 0.002", rc.Metrics.TotalCost)
	}
	if n := rc.Steps[0].Usage.Total(); n != 15 {
		t.Errorf("step 1's usage totals %d, want 15", n)
	}
}

// Hooks that fail must not end the run.
func TestFailingHooks(t *testing.T) {
	errHook := errors.New("hook trapped")
	failing := []Option{
		WithHook(abi.HookBuildPrompt, func(context.Context, any) (any, error) { return nil, errHook }),
		WithHook(abi.HookBuildParams, func(context.Context, any) (any, error) { panic("params builder bug") }),
		WithHook(abi.HookOnToolSuccess, func(context.Context, any) (any, error) { return nil, errHook }),
		WithHook(abi.HookFallbackFinal, func(context.Context, any) (any, error) { return nil, context.DeadlineExceeded }),
	}
	m := script(toolCall("echo", `{"text":"a"}`), "garbage")
	var events []Event
	final, rc, err := New(m, registry(echoTool()), append(failing, collectEvents(&events))...).
		Run(context.Background(), "t", RunOptions{MaxSteps: 1, Parameters: map[string]any{"seed": 3}})
	if err != nil {
		t.Fatal(err)
	}
	if final.Output != DefaultFinalOutput || rc.StopReason != StopFallback {
		t.Fatalf("final %+v stop %s", final, rc.StopReason)
	}
	if rc.SystemPrompt != DefaultPrompt(DefaultIdentity, DefaultRules, registry(echoTool()).Specs()) {
		t.Fatalf("a failing prompt builder must leave the default prompt")
	}
	if m.reqs[0].Parameters["seed"] != 3 || len(m.reqs[0].Parameters) != 1 {
		t.Fatalf("a failing params builder must leave the base params, got %v", m.reqs[0].Parameters)
	}
	if rc.Steps[0].Observation != "echo: a" {
		t.Fatalf("a failing success hook must not change the tool result: %+v", rc.Steps[0])
	}
	got := strings.Join(warnings(events), "\n")
	for _, want := range []string{"build_prompt hook failed", "build_params hook failed", "on_tool_success hook failed", "fallback_final hook failed"} {
		if !strings.Contains(got, want) {
			t.Errorf("no warning event %q in:\n%s", want, got)
		}
	}

	// Set by a plugin, each failing hook's warning names it; before the fix
	// only build_params' rejected parameters did.
	m = script(toolCall("echo", `{"text":"a"}`), "garbage")
	events = nil
	hooks := &fakePlugin{name: "hooks", ext: Extension{Options: failing}}
	if _, _, err := New(m, registry(echoTool()), WithExtenders(hooks), collectEvents(&events)).Run(context.Background(), "t", RunOptions{MaxSteps: 1}); err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, ev := range events {
		if ev.Kind == EventWarning && strings.HasSuffix(strings.SplitN(ev.Message, ";", 2)[0], " hook failed") {
			if ev.Plugin != "hooks" || !strings.HasPrefix(ev.Message, ev.Hook+" hook failed") {
				t.Errorf("warning %q: plugin %q, hook %q; want the plugin hooks and the hook", ev.Message, ev.Plugin, ev.Hook)
			}
			named[ev.Hook] = true
		}
	}
	if len(named) != 4 {
		t.Errorf("warnings of the hooks %v, want all four", named)
	}
}

// A hook option given nil sets nothing: no hook that fails on every run,
// and an earlier option's hook stays.
func TestNilHookOptionsSetNothing(t *testing.T) {
	m := script(toolCall("echo", `{"text":"a"}`), "junk")
	var events []Event
	e := New(m, registry(echoTool()), collectEvents(&events),
		WithPromptBuilder(nil), WithParamsBuilder(nil), WithOnToolSuccess(nil), WithFallbackFinal(nil))
	final, rc, err := e.Run(context.Background(), "t", RunOptions{MaxSteps: 1})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if final.Output != DefaultFinalOutput {
		t.Errorf("final output = %v, want %q", final.Output, DefaultFinalOutput)
	}
	if want := DefaultPrompt(DefaultIdentity, DefaultRules, e.Registry().Specs()); rc.SystemPrompt != want {
		t.Errorf("system prompt:\n%s\nwant the default:\n%s", rc.SystemPrompt, want)
	}
	for _, ev := range events {
		if ev.Kind == EventHook || ev.Hook != "" {
			t.Errorf("event of a hook nobody set: %+v", ev)
		}
	}
	if hooks := e.Status().Hooks; len(hooks) != 0 {
		t.Errorf("status hooks %v, want none", hooks)
	}

	set := New(script("junk"), nil, WithFallbackFinal(func() *Final { return &Final{Output: "set"} }), WithFallbackFinal(nil), WithHook(abi.HookFallbackFinal, nil))
	if final, _, err := set.Run(context.Background(), "t", RunOptions{MaxSteps: 1, ParseRetries: -1}); err != nil || final.Output != "set" {
		t.Fatalf("final %+v err %v, want the hook set before the nil", final, err)
	}
}

// Hooks bound by the table (WithHook) are called with their rows' input
// payloads.
func TestHookFuncsReceivePayloads(t *testing.T) {
	m := script(toolCall("echo", `{"text":"a"}`), "junk")
	var promptIn abi.PromptInput
	var success abi.ToolSuccessInput
	var fb abi.FallbackInput
	e := New(m, registry(echoTool()),
		WithHook(abi.HookBuildPrompt, func(_ context.Context, in any) (any, error) {
			promptIn = in.(abi.PromptInput)
			return &abi.PromptOutput{SystemPrompt: "custom: " + promptIn.Task}, nil
		}),
		WithHook(abi.HookBuildParams, func(_ context.Context, in any) (any, error) {
			in.(abi.ParamsInput).Options.Parameters["mutated"] = true // must not leak into the caller's map
			return &abi.ParamsOutput{Parameters: map[string]any{"temperature": 0.0}}, nil
		}),
		WithHook(abi.HookOnToolSuccess, func(_ context.Context, in any) (any, error) {
			success = in.(abi.ToolSuccessInput)
			return nil, nil
		}),
		WithHook(abi.HookFallbackFinal, func(_ context.Context, in any) (any, error) {
			fb = in.(abi.FallbackInput)
			return &abi.Final{Output: "fb"}, nil
		}))
	base := map[string]any{"top_p": 1.0}
	final, rc, err := e.Run(context.Background(), "task X", RunOptions{MaxSteps: 1, Parameters: base})
	if err != nil || final.Output != "fb" {
		t.Fatalf("err %v final %+v", err, final)
	}
	if promptIn.Task != "task X" {
		t.Errorf("prompt input's Task = %q, want %q", promptIn.Task, "task X")
	}
	if len(promptIn.Tools) != 1 || promptIn.Tools[0].Name != "echo" {
		t.Errorf("prompt input's Tools = %+v, want echo alone", promptIn.Tools)
	}
	if !strings.Contains(promptIn.DefaultPrompt, DefaultIdentity) {
		t.Errorf("prompt input's DefaultPrompt = %q, want it to hold the default identity", promptIn.DefaultPrompt)
	}
	if rc.SystemPrompt != "custom: task X" || m.reqs[0].Messages[0].Content != "custom: task X" {
		t.Fatalf("system prompt %q", rc.SystemPrompt)
	}
	if _, leaked := base["mutated"]; leaked {
		t.Fatal("params builder mutated the caller's Parameters")
	}
	if success.Tool != "echo" {
		t.Errorf("success input's Tool = %q, want echo", success.Tool)
	}
	if success.Step != 1 {
		t.Errorf("success input's Step = %d, want 1", success.Step)
	}
	if success.Observation != "echo: a" {
		t.Errorf("success input's Observation = %q, want %q", success.Observation, "echo: a")
	}
	if success.Params["text"] != "a" {
		t.Errorf("success input's text param = %v, want %q", success.Params["text"], "a")
	}
	if fb.Task != "task X" {
		t.Errorf("fallback input's Task = %q, want %q", fb.Task, "task X")
	}
	if fb.Steps != 1 {
		t.Errorf("fallback input's Steps = %d, want 1", fb.Steps)
	}
	if !strings.Contains(fb.Reason, "did not parse") {
		t.Errorf("fallback input's Reason = %q, want it to say %q", fb.Reason, "did not parse")
	}
	if fb.Usage.TotalTokens != 30 {
		t.Errorf("fallback input's Usage.TotalTokens = %d, want 30", fb.Usage.TotalTokens)
	}
}

func TestEventsReportSteps(t *testing.T) {
	m := script(toolCall("echo", `{"text":"a"}`), finalReply("x"))
	var events []Event
	_, _, err := New(m, registry(echoTool()), collectEvents(&events)).Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range events {
		kinds = append(kinds, fmt.Sprintf("%s:%d:%s", ev.Kind, ev.Step, ev.Action))
	}
	if got := strings.Join(kinds, " "); got != "step:1:echo step:2:final final:2:final" {
		t.Fatalf("events %s", got)
	}
	if n := events[0].Usage.Total(); n != 15 {
		t.Errorf("event 1's usage totals %d, want 15", n)
	}
	if n := events[0].Total.TotalTokens; n != 15 {
		t.Errorf("event 1's running total = %d, want 15", n)
	}
	if n := events[1].Total.TotalTokens; n != 30 {
		t.Errorf("event 2's running total = %d, want 30", n)
	}
}

// echoModel calls echo on a turn's input, then answers with what echo
// said. It keeps no state, so concurrent runs can share it.
type echoModel struct{}

func (echoModel) Chat(_ context.Context, req llm.Request) (llm.Result, error) {
	last := req.Messages[len(req.Messages)-1].Content
	if out, ok := strings.CutPrefix(last, "Tool Result (echo):\n"); ok {
		return llm.Result{Text: finalReply(out)}, nil
	}
	return llm.Result{Text: toolCall("echo", fmt.Sprintf(`{"text":%q}`, last))}, nil
}

// Two sessions run at once on one engine: each run's handler hears only
// its own run's events, each event names its session and turn, and the
// engine's handler hears them all.
func TestEventsOfConcurrentRuns(t *testing.T) {
	var arrived atomic.Int32
	both := make(chan struct{})
	tool := echoTool()
	tool.fn = func(p map[string]any) (string, error) { // the first calls wait for each other: the runs overlap
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(5 * time.Second):
			return "", errors.New("the other run never called")
		}
		return "echo: " + p["text"].(string), nil
	}
	var mu sync.Mutex
	all := map[string]int{}
	e := New(echoModel{}, registry(tool), WithEventHandler(func(ev Event) {
		mu.Lock()
		all[ev.SessionID]++
		mu.Unlock()
	}))
	own := map[string][]Event{}
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b"} {
		var events []Event // only this session's goroutine appends
		wg.Go(func() {
			s := e.NewSession(id)
			for turn := range 2 {
				final, _, err := s.RunTurn(context.Background(), fmt.Sprintf("%s%d", id, turn+1), RunOptions{OnEvent: func(ev Event) { events = append(events, ev) }})
				if err != nil || final.Output != fmt.Sprintf("echo: %s%d", id, turn+1) {
					t.Errorf("session %s turn %d: final %+v err %v", id, turn+1, final, err)
				}
			}
			mu.Lock()
			own[id] = events
			mu.Unlock()
		})
	}
	wg.Wait()
	for id, events := range own {
		var got []string
		for _, ev := range events {
			if ev.SessionID != id {
				t.Errorf("session %s's handler got an event of session %q: %+v", id, ev.SessionID, ev)
			}
			got = append(got, fmt.Sprintf("%d:%s:%d", ev.Turn, ev.Kind, ev.Step))
		}
		if want := "1:step:1 1:step:2 1:final:2 2:step:1 2:step:2 2:final:2"; strings.Join(got, " ") != want {
			t.Errorf("session %s's events %s, want %s", id, strings.Join(got, " "), want)
		}
		if all[id] != len(events) {
			t.Errorf("the engine's handler got %d events of session %s, its runs' handlers %d", all[id], id, len(events))
		}
	}
}

// A run's options narrow its tools and set its identity, without a new
// engine: the prompt lists only those tools under that identity (the
// engine's prompt builder gives way), before_run middleware see only them,
// and a call of another registered tool is told it is not available in
// this run. An unknown name fails the run before any model call, naming it.
func TestRunOptionsToolsAndIdentity(t *testing.T) {
	m := script(toolCall("boom", `{}`), toolCall("echo", `{"text":"a"}`), finalReply("x"))
	var offered []string
	seen := &Funcs{ID: "seen", BeforeRun: func(_ context.Context, in abi.BeforeRunInput) (abi.BeforeRunOutput, error) {
		offered = in.Tools
		return abi.BeforeRunOutput{}, nil
	}}
	e := New(m, registry(echoTool(), failTool()), WithMiddleware(seen), WithPromptBuilder(func(*Registry, string) string { return "built" }))
	_, rc, err := e.Run(context.Background(), "t", RunOptions{Identity: "You review code.", Tools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := DefaultPrompt("You review code.", DefaultRules, registry(echoTool()).Specs()); rc.SystemPrompt != want {
		t.Fatalf("system prompt:\n%s\nwant:\n%s", rc.SystemPrompt, want)
	}
	if strings.Join(offered, ",") != "echo" {
		t.Fatalf("before_run was offered %v", offered)
	}
	if got := rc.Steps[0].Observation; got != "Error: tool 'boom' is not available in this run. Available tools: echo" {
		t.Fatalf("observation %q", got)
	}
	if rc.Steps[1].Observation != "echo: a" {
		t.Fatalf("steps %+v", rc.Steps)
	}
	// The engine is as it was for the next run.
	m.replies = []reply{{text: finalReply("x")}}
	if _, rc, err := e.Run(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatalf("the next run: %v", err)
	} else if rc.SystemPrompt != "built" {
		t.Errorf("the next run's system prompt = %q, want the builder's %q", rc.SystemPrompt, "built")
	}
	if got := strings.Join(offered, ","); got != "boom,echo" {
		t.Errorf("the next run's before_run was offered %s, want boom,echo", got)
	}

	m = script(toolCall("echo", `{"text":"a"}`), finalReply("x"))
	_, rc, err = New(m, registry(echoTool())).Run(context.Background(), "t", RunOptions{Tools: []string{}})
	if err != nil {
		t.Fatalf("no tools: %v", err)
	}
	if !strings.Contains(rc.SystemPrompt, "(none: answer from what you know)") {
		t.Errorf("no tools: the prompt does not say there are none:\n%s", rc.SystemPrompt)
	}
	if got, want := rc.Steps[0].Observation, "Error: tool 'echo' is not available in this run. Available tools: none"; got != want {
		t.Errorf("no tools: observation %q, want %q", got, want)
	}

	m = script(finalReply("x"))
	final, rc, err := New(m, registry(echoTool())).Run(context.Background(), "t", RunOptions{Tools: []string{"echo", "nope", "ghost"}})
	if final != nil {
		t.Errorf("unknown tools: final = %+v, want none", final)
	}
	if !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("unknown tools: err = %v, want ErrUnknownTool", err)
	}
	if !strings.Contains(err.Error(), `"nope", "ghost"`) {
		t.Errorf("unknown tools: err = %v, want it to name \"nope\", \"ghost\"", err)
	}
	if rc.StopReason != StopBadOptions {
		t.Errorf("unknown tools: StopReason = %q, want %q", rc.StopReason, StopBadOptions)
	}
	if len(m.reqs) != 0 {
		t.Errorf("unknown tools: %d requests, want none", len(m.reqs))
	}
}

func TestRegistry(t *testing.T) {
	r := registry(&testTool{name: "b"}, &testTool{name: "a"}, &testTool{name: "bad", schema: `{"type": 12}`}, &testTool{name: "notjson", schema: `{`})
	if got := strings.Join(r.Names(), ","); got != "a,b,bad,notjson" {
		t.Fatalf("names %s", got)
	}
	if _, ok := r.Get("a"); !ok {
		t.Fatal("Get a")
	}
	err := r.Check()
	if !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("Check = %v, want ErrInvalidSchema", err)
	}
	for _, name := range []string{`"bad"`, `"notjson"`} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("Check = %v, want it to name %s", err, name)
		}
	}
	if err := r.Validate("a", map[string]any{"anything": 1}); err != nil {
		t.Fatalf("a tool without a schema accepts any object: %v", err)
	}
	var specs []abi.ToolSpec = r.Specs()
	if !json.Valid(specs[0].Parameters) {
		t.Fatalf("spec parameters %s", specs[0].Parameters)
	}
}

// streamingModel delivers its reply in two pieces when asked to stream.
type streamingModel struct{ *model }

func (s streamingModel) Chat(ctx context.Context, req llm.Request) (llm.Result, error) {
	res, err := s.model.Chat(ctx, req)
	if err == nil && req.Stream != nil {
		half := len(res.Text) / 2
		req.Stream(res.Text[:half])
		req.Stream(res.Text[half:])
	}
	return res, err
}

func TestWithStream(t *testing.T) {
	var got strings.Builder
	reply := finalReply("streamed")
	final, _, err := New(streamingModel{script(reply)}, nil, WithStream(func(d string) { got.WriteString(d) })).Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if final.Output != "streamed" {
		t.Errorf("final output = %v, want %q", final.Output, "streamed")
	}
	if got.String() != reply {
		t.Errorf("streamed %q, want the reply, %q", got.String(), reply)
	}
}

// A tool's panic is the tool's, said so in its observation: not a
// middleware's, and not the run's end.
func TestToolPanicIsTheTools(t *testing.T) {
	bad := &testTool{name: "fragile", fn: func(map[string]any) (string, error) { panic("index out of range") }}
	final, rc, err := New(script(toolCall("fragile", `{}`), finalReply("done")), registry(bad)).
		Run(context.Background(), "t", RunOptions{})
	if err != nil || final.Output != "done" {
		t.Fatalf("final %+v, err %v: the run must go on", final, err)
	}
	if obs := rc.Steps[0].Observation; !strings.Contains(obs, "tool fragile panicked: index out of range") || strings.Contains(obs, "middleware") {
		t.Fatalf("observation %q", obs)
	}
}

// Tools is a snapshot: changing what it returned changes neither the
// engine's tools nor what the model is told of them.
func TestToolsIsASnapshot(t *testing.T) {
	p := &fakePlugin{name: "p", ext: Extension{Tools: []Tool{&testTool{name: "ptool", schema: `{"type":"object"}`}}}}
	e := New(script(finalReply("x")), registry(echoTool()), WithExtenders(p))
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	tools := e.Tools()
	if names := toolNames(tools); !slices.Equal(names, []string{"echo", "ptool"}) {
		t.Fatalf("tools %q, want echo, ptool", names)
	}
	want := string(tools[0].Parameters)
	tools[0].Name, tools[0].Description = "hijacked", "changed"
	tools[0].Parameters[0] = 'X'
	again := e.Tools()
	if names := toolNames(again); !slices.Equal(names, []string{"echo", "ptool"}) {
		t.Fatalf("the engine's tools changed with the snapshot: %q, want echo, ptool", names)
	}
	if again[0].Description != "test tool echo" {
		t.Errorf("echo's Description changed with the snapshot: %q", again[0].Description)
	}
	if string(again[0].Parameters) != want {
		t.Errorf("echo's Parameters changed with the snapshot: %s, want %s", again[0].Parameters, want)
	}
	_, rc, err := e.Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, line := range []string{"- echo: test tool echo", "- ptool:"} {
		if !strings.Contains(rc.SystemPrompt, line) {
			t.Errorf("the prompt lacks %q:\n%s", line, rc.SystemPrompt)
		}
	}
}
