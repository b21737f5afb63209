package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/llm"
)

// recorder is a middleware implementing every hook; it logs "name:hook" and
// keeps the payloads.
type recorder struct {
	name    string
	log     *[]string
	mu      sync.Mutex
	history bool
	starts  []abi.TurnStart
	actions []abi.Action
	obs     []abi.Observation
	finals  []abi.TurnEnd
	afters  []abi.AfterRunInput
}

func (r *recorder) Name() string       { return r.name }
func (r *recorder) WantsHistory() bool { return r.history }
func (r *recorder) note(hook string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, r.name+":"+hook)
}
func (r *recorder) OnTurnStart(_ context.Context, ev abi.TurnStart) error {
	r.note("turn_start")
	r.starts = append(r.starts, ev)
	return nil
}
func (r *recorder) OnAction(_ context.Context, ev abi.Action) error {
	r.note("action")
	ev.Input["text"] = "mutated by middleware" // must not reach the tool
	r.actions = append(r.actions, ev)
	return nil
}
func (r *recorder) OnObservation(_ context.Context, ev abi.Observation) error {
	r.note("observation")
	r.obs = append(r.obs, ev)
	return nil
}
func (r *recorder) OnFinal(_ context.Context, ev abi.TurnEnd) error {
	r.note("final")
	r.finals = append(r.finals, ev)
	return nil
}
func (r *recorder) BeforeRun(context.Context, abi.BeforeRunInput) (abi.BeforeRunOutput, error) {
	r.note("before_run")
	return abi.BeforeRunOutput{}, nil
}
func (r *recorder) AfterRun(_ context.Context, in abi.AfterRunInput) error {
	r.note("after_run")
	r.afters = append(r.afters, in)
	return nil
}
func (r *recorder) BeforeToolCall(context.Context, abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
	r.note("before_tool_call")
	return abi.BeforeToolCallOutput{}, nil
}
func (r *recorder) AfterToolCall(context.Context, abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
	r.note("after_tool_call")
	return abi.AfterToolCallOutput{}, nil
}

func TestMiddlewareEventOrderAndPayloads(t *testing.T) {
	var log []string
	h, a, b := &recorder{name: "h", log: &log}, &recorder{name: "a", log: &log, history: true}, &recorder{name: "b", log: &log}
	m := script(toolCall("echo", `{"text":"hi"}`), finalReply("done"))
	tool := echoTool()
	e := New(m, registry(tool), WithMiddleware(h), WithMiddleware(a), WithMiddleware(b))
	final, rc, err := e.Run(context.Background(), "task", RunOptions{})
	if err != nil || final.Output != "done" {
		t.Fatalf("err %v final %+v", err, final)
	}
	var want []string
	for _, hook := range []string{"turn_start", "before_run", "action", "before_tool_call", "after_tool_call", "observation", "final", "after_run"} {
		for _, n := range []string{"h", "a", "b"} {
			want = append(want, n+":"+hook)
		}
	}
	if got := strings.Join(log, " "); got != strings.Join(want, " ") {
		t.Fatalf("order:\n got %s\nwant %s", got, strings.Join(want, " "))
	}
	if rc.Steps[0].Observation != "echo: hi" {
		t.Fatalf("a middleware's change to its payload reached the tool: %q", rc.Steps[0].Observation)
	}
	act, obs, fin := b.actions[0], b.obs[0], b.finals[0]
	checkFields(t, "action", eq("SessionID", act.SessionID, rc.SessionID), eq("Turn", act.Turn, 1), eq("Step", act.Step, 1),
		eq("Tool", act.Tool, "echo"), eq("Thought", act.Thought, "use echo"))
	if act.History != nil {
		t.Errorf("action: History = %+v, want none for b, which did not ask", act.History)
	}
	checkFields(t, "observation", eq("Observation", obs.Observation, "echo: hi"), eq("IsError", obs.IsError, false), eq("Step", obs.Step, 1))
	checkFields(t, "final", eq("Status", fin.Status, abi.StatusFinal), eq("Step", fin.Step, 2),
		eq("TurnUsage.TotalTokens", fin.TurnUsage.TotalTokens, 30), eq("StepUsage.TotalTokens", fin.StepUsage.TotalTokens, 15))
	if !strings.Contains(fin.Final, `"done"`) {
		t.Errorf("final: Final = %s, want the output \"done\" in it", fin.Final)
	}
	after := b.afters[0]
	if after.Final == nil {
		t.Errorf("after_run %+v: no Final", after)
	} else if after.Final.Output != "done" {
		t.Errorf("after_run: Final.Output = %v, want %q", after.Final.Output, "done")
	}
	if after.Steps != 2 {
		t.Errorf("after_run: Steps = %d, want 2", after.Steps)
	}
	// Only the middleware that asked gets the history.
	if h := a.actions[0].History; len(h) != 2 {
		t.Errorf("a's action History has %d messages, want 2: %+v", len(h), h)
	} else if h[0].Content != "task" {
		t.Errorf("a's action History starts with %q, want the task", h[0].Content)
	}
	if h := a.obs[0].History; len(h) != 3 {
		t.Errorf("a's observation History has %d messages, want 3: %+v", len(h), h)
	}
}

// Hook events name the step their payload names: the hooks of a tool call
// its step, the turn's first hooks 0, its last the steps taken; so do a
// quarantine and the engine hooks' events.
func TestHookEventsCarryTheStep(t *testing.T) {
	var log []string
	rec := &recorder{name: "rec", log: &log}
	flaky := &Funcs{ID: "flaky", BeforeToolCall: func(context.Context, abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
		return abi.BeforeToolCallOutput{}, errors.New("down")
	}}
	got := map[string]int{}
	onEvent := WithEventHandler(func(ev Event) {
		if ev.Kind == EventHook || ev.Kind == EventQuarantine {
			got[string(ev.Kind)+" "+ev.Plugin+"/"+ev.Hook] = ev.Step
		}
	})
	plan := `{"type":"plan","plan":{"steps":["a"]}}`
	m := script(plan, toolCall("echo", `{"text":"hi"}`), finalReply("done"))
	e := New(m, registry(echoTool()), WithMiddleware(rec), WithMiddleware(flaky, MiddlewareConfig{QuarantineAfter: 1}),
		WithOnToolSuccess(func(*Context, string) {}), WithPromptBuilder(func(*Registry, string) string { return "p" }), onEvent)
	if _, _, err := e.Run(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"hook rec/on_turn_start": 0, "hook rec/before_run": 0, "hook host/build_prompt": 0,
		"hook rec/on_action": 2, "hook rec/before_tool_call": 2, "hook flaky/before_tool_call": 2, "quarantine flaky/before_tool_call": 2,
		"hook rec/after_tool_call": 2, "hook host/on_tool_success": 2, "hook rec/on_observation": 2,
		"hook rec/on_final": 3, "hook rec/after_run": 3}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("steps of the hook events:\n got %v\nwant %v", got, want)
	}
	clear(got)
	m = script(plan, "junk")
	e = New(m, nil, WithFallbackFinal(func() *Final { return &Final{Output: "fb"} }), onEvent)
	if _, _, err := e.Run(context.Background(), "t", RunOptions{MaxSteps: 1}); err != nil || got["hook host/fallback_final"] != 1 {
		t.Fatalf("err %v, events %v: want fallback_final at step 1", err, got)
	}
}

// The after_run payload is a copy: a middleware that changes its final,
// plan included, does not change the caller's.
func TestAfterRunCannotChangeTheFinal(t *testing.T) {
	vandal := &Funcs{ID: "vandal", AfterRun: func(_ context.Context, in abi.AfterRunInput) error {
		in.Final.Output.(map[string]any)["n"] = 0
		in.Final.Plan.Summary = "vandalized"
		in.Final.Plan.Steps[0].Step = "vandalized"
		in.Final.Plan.Risks[0] = "vandalized"
		in.Final.Plan.Questions[0] = "vandalized"
		return nil
	}}
	m := script(`{"type":"plan","plan":{"summary":"s","steps":["count"],"risks":["r"],"questions":["q"]}}`,
		`{"type":"final","final":{"output":{"n":3}}}`)
	final, rc, err := New(m, nil, WithMiddleware(vandal)).Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := final.Plan
	checkFields(t, "after a middleware changed its copy", eq("the final's n", final.Output.(map[string]any)["n"], 3.0),
		eq("Plan.Summary", p.Summary, "s"), eq("Plan.Steps[0].Step", p.Steps[0].Step, "count"), eq("Plan.Risks[0]", p.Risks[0], "r"),
		eq("Plan.Questions[0]", p.Questions[0], "q"), eq("the run's Plan.Summary", rc.Plan.Summary, "s"))
}

// Exactly one on_final, and one after_run, per turn on every path that ends it.
func TestOnFinalOncePerTurnOnEveryPath(t *testing.T) {
	ctxCanceled, cancel := context.WithCancel(context.Background())
	cancel()
	failing := &Funcs{ID: "guard", BeforeRun: func(context.Context, abi.BeforeRunInput) (abi.BeforeRunOutput, error) {
		return abi.BeforeRunOutput{}, errors.New("policy store down")
	}}
	broken := &fakePlugin{name: "broken", openErr: errors.New("file not found")}
	cases := []struct {
		name   string
		ctx    context.Context
		model  *model
		opts   []Option
		run    RunOptions
		status string
		closed bool // the engine is closed before the run
	}{
		{"final", context.Background(), script(finalReply("x")), nil, RunOptions{}, abi.StatusFinal, false},
		{"forced", context.Background(), script(`{"type":"plan","plan":{"steps":[]}}`, finalReply("x")), nil, RunOptions{MaxSteps: 1}, abi.StatusForced, false},
		{"fallback", context.Background(), script(`{"type":"plan","plan":{"steps":[]}}`, "junk"), nil, RunOptions{MaxSteps: 1}, abi.StatusFallback, false},
		{"model error", context.Background(), &model{replies: []reply{{err: errors.New("503")}}}, nil, RunOptions{}, abi.StatusError, false},
		{"canceled", ctxCanceled, script(finalReply("x")), nil, RunOptions{}, abi.StatusCanceled, false},
		{"fail-closed before_run", context.Background(), script(finalReply("x")), []Option{WithMiddleware(failing, MiddlewareConfig{Policy: FailClosed})}, RunOptions{}, abi.StatusError, false},
		{"init error", context.Background(), script(finalReply("x")), []Option{WithExtenders(broken)}, RunOptions{}, abi.StatusError, false},
		{"closed", context.Background(), script(finalReply("x")), nil, RunOptions{}, abi.StatusError, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var log []string
			rec := &recorder{name: "r", log: &log}
			e := New(c.model, nil, append(c.opts, WithMiddleware(rec))...)
			if c.closed {
				e.Close(context.Background())
			}
			_, _, err := e.Run(c.ctx, "t", c.run)
			if len(rec.finals) != 1 || len(rec.afters) != 1 {
				t.Fatalf("%d on_final and %d after_run calls, want 1 each (err %v)", len(rec.finals), len(rec.afters), err)
			}
			if rec.finals[0].Status != c.status || rec.afters[0].Status != c.status {
				t.Fatalf("status %q, want %q", rec.finals[0].Status, c.status)
			}
			if (c.status == abi.StatusError || c.status == abi.StatusCanceled) != (rec.finals[0].Error != "") {
				t.Fatalf("error text %q for status %s", rec.finals[0].Error, c.status)
			}
		})
	}
}

// Failing, panicking and timing-out middleware never interrupt the session.
func TestMiddlewareIsolation(t *testing.T) {
	blockForever := make(chan struct{})
	defer close(blockForever)
	bad := []*Funcs{
		{ID: "erring", Action: func(context.Context, abi.Action) error { return errors.New("disk full") }},
		{ID: "panicking", Observation: func(context.Context, abi.Observation) error { panic("nil map") }},
		{ID: "hanging", BeforeToolCall: func(context.Context, abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
			<-blockForever // ignores its context: the engine must abandon it
			return abi.BeforeToolCallOutput{}, nil
		}},
		{ID: "slow-final", Final: func(ctx context.Context, _ abi.TurnEnd) error { <-ctx.Done(); return ctx.Err() }},
	}
	var opts []Option
	for _, f := range bad {
		opts = append(opts, WithMiddleware(f, MiddlewareConfig{Timeout: 50 * time.Millisecond}))
	}
	var events []Event
	opts = append(opts, collectEvents(&events))
	tool := echoTool()
	e := New(script(toolCall("echo", `{"text":"a"}`), finalReply("ok")), registry(tool), opts...)
	final, rc, err := e.Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkFields(t, "the run", eq("final output", final.Output, "ok"), eq("tool calls", tool.calls.Load(), 1),
		eq("step 1's Observation", rc.Steps[0].Observation, "echo: a"))
	outcomes := map[string]string{}
	for _, ev := range events {
		if ev.Kind == EventHook {
			outcomes[ev.Plugin] = ev.Outcome
			if ev.Err != nil && !strings.Contains(ev.Err.Error(), ev.Plugin) {
				t.Errorf("hook error does not name the middleware: %v", ev.Err)
			}
		}
	}
	want := map[string]string{"erring": OutcomeError, "panicking": OutcomePanic, "hanging": OutcomeTimeout, "slow-final": OutcomeTimeout}
	for name, o := range want {
		if outcomes[name] != o {
			t.Errorf("%s: outcome %q, want %q", name, outcomes[name], o)
		}
	}
	for _, s := range e.MiddlewareStats() {
		checkFields(t, s.Name+"'s stats", eq("Calls", s.Calls, 1), eq("Faults", s.Faults, 1))
		if s.P50 <= 0 {
			t.Errorf("%s's stats: P50 = %v, want more than 0", s.Name, s.P50)
		}
	}
}

func TestFailurePolicies(t *testing.T) {
	broken := func(policy Policy) *Funcs {
		return &Funcs{ID: "guard", BeforeToolCall: func(context.Context, abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
			return abi.BeforeToolCallOutput{}, errors.New("rules unavailable")
		}}
	}
	t.Run("fail_open skips the guard", func(t *testing.T) {
		tool := echoTool()
		_, rc, _ := New(script(toolCall("echo", `{"text":"a"}`), finalReply("x")), registry(tool), WithMiddleware(broken(FailOpen))).Run(context.Background(), "t", RunOptions{})
		checkFields(t, "fail_open", eq("tool calls", tool.calls.Load(), 1), eq("step 1's Observation", rc.Steps[0].Observation, "echo: a"))
	})
	t.Run("fail_closed denies the call", func(t *testing.T) {
		tool := echoTool()
		_, rc, _ := New(script(toolCall("echo", `{"text":"a"}`), finalReply("x")), registry(tool),
			WithMiddleware(broken(FailClosed), MiddlewareConfig{Policy: FailClosed})).Run(context.Background(), "t", RunOptions{})
		if n := tool.calls.Load(); n != 0 {
			t.Errorf("the tool ran %d times, want none", n)
		}
		obs := rc.Steps[0].Observation
		if !strings.HasPrefix(obs, "Tool call denied: ") {
			t.Errorf("observation %q, want a denial", obs)
		}
		for _, part := range []string{`"guard"`, "rules unavailable"} {
			if !strings.Contains(obs, part) {
				t.Errorf("observation %q, want it to say %s", obs, part)
			}
		}
	})
	t.Run("fail_closed before_run aborts the turn", func(t *testing.T) {
		f := &Funcs{ID: "gate", BeforeRun: func(context.Context, abi.BeforeRunInput) (abi.BeforeRunOutput, error) {
			panic("bug")
		}}
		m := script(finalReply("x"))
		final, rc, err := New(m, nil, WithMiddleware(f, MiddlewareConfig{Policy: FailClosed})).Run(context.Background(), "t", RunOptions{})
		var me *MiddlewareError
		if final != nil {
			t.Errorf("final = %+v, want none", final)
		}
		if !errors.As(err, &me) {
			t.Fatalf("err = %v (%T), want a *MiddlewareError", err, err)
		}
		checkFields(t, "the turn's end", eq("the error's Middleware", me.Middleware, "gate"), eq("the error's Hook", me.Hook, abi.HookBeforeRun),
			eq("StopReason", rc.StopReason, StopMiddleware), eq("requests", len(m.reqs), 0))
	})
}

func TestQuarantine(t *testing.T) {
	calls := 0
	flaky := &Funcs{ID: "flaky", Action: func(context.Context, abi.Action) error {
		calls++
		return errors.New("boom")
	}}
	var events []Event
	now := time.Unix(1000, 0)
	steps := []string{}
	for range 6 {
		steps = append(steps, toolCall("echo", fmt.Sprintf(`{"text":"%d"}`, len(steps))))
	}
	e := New(script(append(steps, finalReply("x"))...), registry(echoTool()),
		WithMiddleware(flaky, MiddlewareConfig{QuarantineAfter: 2, QuarantineFor: time.Minute}), collectEvents(&events))
	e.now = func() time.Time { return now }
	sess := e.NewSession("s")
	// Advance the clock by a minute after the fourth action: the quarantine ends.
	e.onEvent = func(ev Event) {
		events = append(events, ev)
		if ev.Kind == EventStep && ev.Step == 4 {
			now = now.Add(time.Minute)
		}
	}
	if _, _, err := sess.RunTurn(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range events {
		switch ev.Kind {
		case EventQuarantine, EventRelease:
			kinds = append(kinds, string(ev.Kind))
		case EventHook:
			kinds = append(kinds, ev.Outcome)
		}
	}
	// Two faults, quarantined, skipped twice, released, two faults, quarantined again (for two minutes).
	want := "error error quarantine quarantined quarantined release error error quarantine"
	if got := strings.Join(kinds, " "); got != want || calls != 4 {
		t.Fatalf("events %s (calls %d), want %s", got, calls, want)
	}
	s := e.MiddlewareStats()[0]
	checkFields(t, "stats", eq("Quarantines", s.Quarantines, 2), eq("Quarantined", s.Quarantined, true), eq("Faults", s.Faults, 4))
	now = now.Add(90 * time.Second)
	if !e.MiddlewareStats()[0].Quarantined {
		t.Fatal("the second quarantine should last twice as long")
	}
}

func TestBeforeRunNarrowsAndReplaces(t *testing.T) {
	var seen abi.BeforeRunInput
	narrow := &Funcs{ID: "narrow", BeforeRun: func(_ context.Context, in abi.BeforeRunInput) (abi.BeforeRunOutput, error) {
		seen = in
		return abi.BeforeRunOutput{Tools: []string{"echo", "nonexistent"}}, nil
	}}
	m := script(toolCall("boom", `{}`), finalReply("x"))
	_, rc, err := New(m, registry(echoTool(), failTool()), WithMiddleware(narrow)).Run(context.Background(), "t", RunOptions{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	checkFields(t, "before_run input", eq("Tools", strings.Join(seen.Tools, ","), "boom,echo"), eq("Model", seen.Model, "m"))
	if !strings.Contains(seen.SystemPrompt, "- boom:") {
		t.Errorf("before_run input: SystemPrompt %q, want it to offer boom", seen.SystemPrompt)
	}
	if strings.Contains(rc.SystemPrompt, "- boom:") || !strings.Contains(rc.SystemPrompt, "- echo:") {
		t.Fatalf("the prompt still offers the removed tool:\n%s", rc.SystemPrompt)
	}
	if rc.Steps[0].Observation != "Error: tool 'boom' is not available in this run. Available tools: echo" {
		t.Fatalf("observation %q", rc.Steps[0].Observation)
	}
	replace := &Funcs{ID: "replace", BeforeRun: func(_ context.Context, in abi.BeforeRunInput) (abi.BeforeRunOutput, error) {
		return abi.BeforeRunOutput{SystemPrompt: "REPLACED " + in.SystemPrompt[:5]}, nil
	}}
	m = script(finalReply("x"))
	_, rc, _ = New(m, nil, WithMiddleware(replace)).Run(context.Background(), "t", RunOptions{})
	if rc.SystemPrompt != "REPLACED You a" || m.reqs[0].Messages[0].Content != rc.SystemPrompt {
		t.Fatalf("system prompt %q", rc.SystemPrompt)
	}
}

func TestToolCallChains(t *testing.T) {
	var secondSaw map[string]any
	rewrite := &Funcs{ID: "rewrite", BeforeToolCall: func(_ context.Context, in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
		return abi.BeforeToolCallOutput{Input: map[string]any{"text": strings.ToUpper(in.Input["text"].(string))}}, nil
	}}
	observe := &Funcs{ID: "observe", BeforeToolCall: func(_ context.Context, in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
		secondSaw = in.Input
		if in.Input["text"] == "SECRET" {
			return abi.BeforeToolCallOutput{Deny: true, Reason: "secrets stay put"}, nil
		}
		return abi.BeforeToolCallOutput{}, nil
	}}
	redact := &Funcs{ID: "redact", AfterToolCall: func(_ context.Context, in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
		out := strings.ReplaceAll(in.Output, "HELLO", "[redacted]")
		return abi.AfterToolCallOutput{Output: &out}, nil
	}}
	suffix := &Funcs{ID: "suffix", AfterToolCall: func(_ context.Context, in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
		out := in.Output + " (checked)"
		return abi.AfterToolCallOutput{Output: &out}, nil
	}}
	tool := echoTool()
	m := script(toolCall("echo", `{"text":"hello"}`), toolCall("echo", `{"text":"secret"}`), finalReply("x"))
	var successes []string
	_, rc, err := New(m, registry(tool), WithMiddleware(rewrite), WithMiddleware(observe), WithMiddleware(redact), WithMiddleware(suffix),
		WithOnToolSuccess(func(_ *Context, name string) { successes = append(successes, name) })).Run(context.Background(), "t", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Steps[0].Observation != "echo: [redacted] (checked)" || secondSaw["text"] != "SECRET" {
		t.Fatalf("observation %q, second guard saw %v", rc.Steps[0].Observation, secondSaw)
	}
	checkFields(t, "denied call", eq("step 2's Observation", rc.Steps[1].Observation, "Tool call denied: secrets stay put"),
		eq("tool calls", tool.calls.Load(), 1), eq("successes", len(successes), 1))
}

func TestSessionKeepsHistory(t *testing.T) {
	var log []string
	rec := &recorder{name: "r", log: &log, history: true}
	m := script(finalReply("first answer"), finalReply("second answer"))
	sess := New(m, nil, WithMiddleware(rec)).NewSession("sess-1")
	_, rc1, err1 := sess.RunTurn(context.Background(), "first question", RunOptions{})
	_, rc2, err2 := sess.RunTurn(context.Background(), "second question", RunOptions{})
	if err1 != nil {
		t.Fatalf("turn 1: %v", err1)
	}
	if err2 != nil {
		t.Fatalf("turn 2: %v", err2)
	}
	checkFields(t, "the turns", eq("turn 1's SessionID", rc1.SessionID, "sess-1"), eq("turn 2's Turn", rc2.Turn, 2))
	msgs := m.reqs[1].Messages
	if len(msgs) != 4 {
		t.Fatalf("the second turn's %d messages, want 4: %+v", len(msgs), msgs)
	}
	checkFields(t, "the second turn's messages", eq("[1].Content", msgs[1].Content, "first question"), eq("[2].Role", msgs[2].Role, llm.RoleAssistant),
		eq("[3].Content", msgs[3].Content, "second question"))
	if !strings.Contains(msgs[2].Content, "first answer") {
		t.Errorf("the second turn's messages: [2].Content = %q, want the first answer", msgs[2].Content)
	}
	start := rec.starts[1]
	if len(start.History) != 2 {
		t.Errorf("turn 2's start: History has %d messages, want 2: %+v", len(start.History), start.History)
	} else if start.History[0].Content != "first question" {
		t.Errorf("turn 2's start: History[0].Content = %q, want the first question", start.History[0].Content)
	}
	checkFields(t, "turn 2's start", eq("Turn", start.Turn, 2), eq("SessionID", start.SessionID, "sess-1"))
	if len(sess.History()) != 4 {
		t.Fatalf("session history %+v", sess.History())
	}
}

// A fail-closed guard in quarantine keeps denying: skipping it would open what it guards.
func TestQuarantinedFailClosedGuardDenies(t *testing.T) {
	guard := &Funcs{ID: "guard", BeforeToolCall: func(context.Context, abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
		return abi.BeforeToolCallOutput{}, errors.New("down")
	}}
	tool := echoTool()
	m := script(toolCall("echo", `{"text":"1"}`), toolCall("echo", `{"text":"2"}`), finalReply("x"))
	_, rc, err := New(m, registry(tool), WithMiddleware(guard, MiddlewareConfig{Policy: FailClosed, QuarantineAfter: 1})).Run(context.Background(), "t", RunOptions{})
	if err != nil || tool.calls.Load() != 0 {
		t.Fatalf("err %v, tool calls %d", err, tool.calls.Load())
	}
	if obs := rc.Steps[1].Observation; !strings.Contains(obs, "in quarantine") {
		t.Fatalf("second call's observation %q", obs)
	}
}

func TestResumeSession(t *testing.T) {
	m := script(finalReply("x"))
	prior := []llm.Message{{Role: llm.RoleUser, Content: "earlier"}, {Role: llm.RoleAssistant, Content: `{"output":"answer"}`}}
	sess := New(m, nil).ResumeSession("kept", prior)
	if _, rc, err := sess.RunTurn(context.Background(), "now", RunOptions{}); err != nil || rc.SessionID != "kept" {
		t.Fatalf("err %v rc %+v", err, rc)
	}
	msgs := m.reqs[0].Messages
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want 4: %+v", len(msgs), msgs)
	}
	checkFields(t, "messages", eq("[1].Content", msgs[1].Content, "earlier"), eq("[3].Content", msgs[3].Content, "now"))
	if n := sess.Turns(); n != 1 {
		t.Errorf("turns %d, want 1", n)
	}
	at := New(script(finalReply("x")), nil).ResumeSessionAt("kept", prior, 7)
	_, rc, err := at.RunTurn(context.Background(), "now", RunOptions{})
	if err != nil {
		t.Fatalf("ResumeSessionAt's turn: %v", err)
	}
	checkFields(t, "ResumeSessionAt's turn", eq("Turn", rc.Turn, 8), eq("Turns()", at.Turns(), 8))
}

// Calls already running when a quarantine begins report late: their faults
// are counted but neither re-quarantine the middleware (no doubling without
// a release between) nor, with a late success, cut the quarantine short.
func TestQuarantineIgnoresLateReports(t *testing.T) {
	const sessions = 6
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var quarantines []Event
	slow := &Funcs{ID: "slow", Action: func(context.Context, abi.Action) error {
		entered <- struct{}{}
		<-release
		return errors.New("boom")
	}}
	var replies []string
	for range sessions {
		replies = append(replies, toolCall("echo", `{"text":"x"}`))
	}
	for range sessions {
		replies = append(replies, finalReply("x"))
	}
	now := time.Unix(1000, 0)
	e := New(script(replies...), registry(echoTool()),
		WithMiddleware(slow, MiddlewareConfig{QuarantineAfter: 2, QuarantineFor: time.Minute}),
		WithEventHandler(func(ev Event) {
			if ev.Kind == EventQuarantine {
				mu.Lock()
				quarantines = append(quarantines, ev)
				mu.Unlock()
			}
		}))
	e.now = func() time.Time { return now }
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			if _, _, err := e.NewSession(fmt.Sprint(i)).RunTurn(context.Background(), "t", RunOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	for range sessions {
		<-entered // every call is running before any fails
	}
	close(release)
	wg.Wait()
	s := e.MiddlewareStats()[0]
	checkFields(t, "concurrent faults", eq("Quarantines", s.Quarantines, 1), eq("Faults", s.Faults, sessions))
	if len(quarantines) != 1 {
		t.Fatalf("%d quarantine events, want one: %+v", len(quarantines), quarantines)
	}
	if !strings.Contains(quarantines[0].Message, "for 1m0s") {
		t.Fatalf("quarantine %q: the period should not have doubled", quarantines[0].Message)
	}
	now = now.Add(59 * time.Second)
	if !e.MiddlewareStats()[0].Quarantined {
		t.Fatal("the quarantine ended early")
	}
}

// Every middleware hook of the ABI's table is one the engine calls, with a
// field of Funcs of its own: a Funcs given every one as a JSON hook
// implements them all and nothing else, and its typed copy has as many
// hook fields set.
func TestFuncsCoverTheHookTable(t *testing.T) {
	want := abi.HookNames(abi.Middleware)
	f := &Funcs{}
	for _, name := range want {
		if err := f.SetJSON(name, func(context.Context, []byte, any) error { return nil }); err != nil {
			t.Errorf("SetJSON(%s): %v", name, err)
		}
	}
	got := f.Hooks()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the engine calls %v, the ABI's table has %v", got, want)
	}
	typed, set := reflect.ValueOf(f.Typed()).Elem(), 0
	for i := range typed.NumField() {
		if fv := typed.Field(i); fv.Kind() == reflect.Func && !fv.IsNil() {
			set++
		}
	}
	if set != len(want) {
		t.Errorf("Typed() sets %d hook fields, want one for each of the %d hooks", set, len(want))
	}
}

// A quarantine carried from one engine to another with Quarantines and
// RestoreQuarantines holds on the second: its middleware is not called
// until the quarantine ends by the second engine's clock. A state of a
// middleware the engine does not run is ignored.
func TestRestoreQuarantines(t *testing.T) {
	now := time.Unix(1000, 0)
	calls := 0
	build := func() (*Engine, *[]Event) {
		var events []Event
		flaky := &Funcs{ID: "flaky", Action: func(context.Context, abi.Action) error { calls++; return errors.New("boom") }}
		e := New(script(toolCall("echo", `{"text":"a"}`), finalReply("x")), registry(echoTool()),
			WithMiddleware(flaky, MiddlewareConfig{QuarantineAfter: 1, QuarantineFor: time.Minute}), collectEvents(&events))
		e.now = func() time.Time { return now }
		return e, &events
	}
	first, _ := build()
	if _, _, err := first.Run(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	states := first.Quarantines()
	if calls != 1 {
		t.Errorf("the middleware was called %d times, want once", calls)
	}
	if len(states) != 1 {
		t.Fatalf("Quarantines() = %+v, want one", states)
	}
	checkFields(t, "the quarantine", eq("Middleware", states[0].Middleware, "flaky"), eq("Level", states[0].Level, 1))
	if want := now.Add(time.Minute); !states[0].Until.Equal(want) {
		t.Errorf("the quarantine: Until = %v, want %v", states[0].Until, want)
	}
	outcomes := func(events []Event) (out []string) {
		for _, ev := range events {
			if ev.Kind == EventHook {
				out = append(out, ev.Outcome)
			}
		}
		return out
	}
	second, events := build()
	second.RestoreQuarantines(append(states, Quarantine{Middleware: "gone", Consecutive: 3}))
	if _, _, err := second.Run(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("after restoring: the middleware was called %d times in all, want once", calls)
	}
	if got := outcomes(*events); !slices.Equal(got, []string{OutcomeQuarantined}) {
		t.Errorf("after restoring: outcomes %q, want %q", got, OutcomeQuarantined)
	}
	now = now.Add(time.Minute) // the quarantine ends by the second engine's clock
	third, events := build()
	third.RestoreQuarantines(second.Quarantines())
	if _, _, err := third.Run(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("after the quarantine: the middleware was called %d times in all, want twice", calls)
	}
	if got := outcomes(*events); !slices.Equal(got, []string{OutcomeError}) {
		t.Errorf("after the quarantine: outcomes %q, want %q", got, OutcomeError)
	}
}

// A Bounded middleware's hook gets its deadline through BoundedCall, and
// no timer of the engine's: its context is the run's. A JSON hook's
// payload is encoded once per event for the middleware that share it (one
// encoding without the history, one with it, for an event that carries
// the history; one for all for an event that does not), and again after a
// mutating hook changed the payload. A native middleware gets a context
// that ends at its deadline, and no BoundedCall.
func TestBoundedCallSharesPayloadAndDeadline(t *testing.T) {
	const timeout = time.Hour
	type seen struct {
		id, hook string
		payload  string
		at       *byte // the payload's first byte: equal for a shared encoding
		deadline time.Time
		ctxHas   bool // ctx.Deadline's ok
	}
	var calls []seen
	record := func(ctx context.Context, id, hook string, payload []byte) {
		s := seen{id: id, hook: hook, payload: string(payload)}
		if len(payload) > 0 {
			s.at = &payload[0]
		}
		_, s.ctxHas = ctx.Deadline()
		if c := BoundedCallOf(ctx); c != nil {
			s.deadline = c.Deadline()
		}
		calls = append(calls, s)
	}
	bounded := func(id string, history bool, rewrite string) *Funcs {
		f := &Funcs{ID: id, Bounded: true, History: history}
		for _, hook := range []string{abi.HookOnTurnStart, abi.HookBeforeToolCall, abi.HookOnFinal} {
			if err := f.SetJSON(hook, func(ctx context.Context, payload []byte, answer any) error {
				record(ctx, id, hook, payload)
				if out, ok := answer.(*abi.BeforeToolCallOutput); ok && rewrite != "" {
					out.Input = map[string]any{"text": rewrite}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		return f
	}
	native := &Funcs{ID: "native", TurnStart: func(ctx context.Context, _ abi.TurnStart) error {
		record(ctx, "native", abi.HookOnTurnStart, nil)
		return nil
	}}
	cfg := MiddlewareConfig{Timeout: timeout}
	e := New(script(toolCall("echo", `{"text":"hi"}`), finalReply("done")), registry(echoTool()),
		WithMiddleware(bounded("a", false, ""), cfg), WithMiddleware(native, cfg), WithMiddleware(bounded("b", false, "HI"), cfg),
		WithMiddleware(bounded("c", true, ""), cfg), WithMiddleware(bounded("d", false, ""), cfg))
	before := time.Now()
	if _, _, err := e.Run(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	// sharesWith[i] is the call whose encoding call i must share (itself
	// for a fresh one); -1 for the native middleware's.
	type want struct {
		id, hook   string
		sharesWith int
		text       string // in the payload
	}
	wants := []want{
		// on_turn_start: a's encoding, shared by b and d; c (history) its own.
		{"a", abi.HookOnTurnStart, 0, `"input":"t"`}, {"native", abi.HookOnTurnStart, -1, ""},
		{"b", abi.HookOnTurnStart, 0, `"input":"t"`}, {"c", abi.HookOnTurnStart, 3, `"input":"t"`}, {"d", abi.HookOnTurnStart, 0, `"input":"t"`},
		// before_tool_call: a's, shared by b, which rewrites the input; so
		// c's is a new encoding of the new payload, shared by d.
		{"a", abi.HookBeforeToolCall, 5, `"text":"hi"`}, {"b", abi.HookBeforeToolCall, 5, `"text":"hi"`},
		{"c", abi.HookBeforeToolCall, 7, `"text":"HI"`}, {"d", abi.HookBeforeToolCall, 7, `"text":"HI"`},
		// on_final carries no history: one encoding for all four.
		{"a", abi.HookOnFinal, 9, `"status":"final"`}, {"b", abi.HookOnFinal, 9, `"status":"final"`},
		{"c", abi.HookOnFinal, 9, `"status":"final"`}, {"d", abi.HookOnFinal, 9, `"status":"final"`},
	}
	if len(calls) != len(wants) {
		t.Fatalf("%d calls, want %d: %+v", len(calls), len(wants), calls)
	}
	for i, w := range wants {
		c := calls[i]
		if c.id != w.id || c.hook != w.hook {
			t.Fatalf("call %d is %s %s, want %s %s", i, c.id, c.hook, w.id, w.hook)
		}
		if !strings.Contains(c.payload, w.text) {
			t.Errorf("call %d (%s %s): payload %s, want it to contain %s", i, c.id, c.hook, c.payload, w.text)
		}
		if c.id == "native" {
			if !c.ctxHas {
				t.Errorf("call %d: the native middleware's context has no deadline", i)
			}
			continue
		}
		if shared := calls[w.sharesWith].at; c.at != shared {
			t.Errorf("call %d (%s %s): its payload is not call %d's encoding", i, c.id, c.hook, w.sharesWith)
		}
		for j := range i {
			if j != w.sharesWith && wants[j].sharesWith == j && calls[j].at == c.at {
				t.Errorf("call %d (%s %s) shares call %d's encoding; want a fresh one", i, c.id, c.hook, j)
			}
		}
		if c.ctxHas {
			t.Errorf("call %d: %s's context has a deadline; want the run's, which has none", i, c.id)
		}
		if c.deadline.Before(before.Add(timeout)) || c.deadline.After(after.Add(timeout)) {
			t.Errorf("call %d: %s's deadline %v, want its start and %s, within [%v, %v]", i, c.id, c.deadline, timeout, before.Add(timeout), after.Add(timeout))
		}
	}
}
