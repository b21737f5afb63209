package host

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// funcs is p's middleware as the engine dispatches it.
func funcs(t *testing.T, p *Plugin) *engine.Funcs {
	t.Helper()
	mw := p.middleware()
	f, ok := mw.(*engine.Funcs)
	if !ok || f == nil {
		t.Fatalf("Middleware() = %#v, want an *engine.Funcs", mw)
	}
	if f.Name() != p.Name() {
		t.Fatalf("middleware name %q, plugin %q", f.Name(), p.Name())
	}
	return f.Typed()
}

// checkHooks checks which of f's middleware hooks are set: each of set and
// none of unset. It stops the test on a difference, as the test goes on to
// call the hooks it expects.
func checkHooks(t *testing.T, f *engine.Funcs, set, unset []string) {
	t.Helper()
	has := map[string]bool{
		abi.HookOnTurnStart: f.TurnStart != nil, abi.HookOnAction: f.Action != nil,
		abi.HookOnObservation: f.Observation != nil, abi.HookOnFinal: f.Final != nil,
		abi.HookBeforeRun: f.BeforeRun != nil, abi.HookAfterRun: f.AfterRun != nil,
		abi.HookBeforeToolCall: f.BeforeToolCall != nil, abi.HookAfterToolCall: f.AfterToolCall != nil,
	}
	ok := true
	for _, h := range set {
		if !has[h] {
			t.Errorf("middleware %s does not set %s", f.ID, h)
			ok = false
		}
	}
	for _, h := range unset {
		if has[h] {
			t.Errorf("middleware %s sets %s, want it unset", f.ID, h)
			ok = false
		}
	}
	if !ok {
		t.FailNow()
	}
}

// checkRedacted checks after_tool_call's answer, named what: no error, and
// the output rewritten to want.
func checkRedacted(t *testing.T, what string, got abi.AfterToolCallOutput, err error, want string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got.Output == nil {
		t.Errorf("%s: Output unchanged, want %q", what, want)
	} else if *got.Output != want {
		t.Errorf("%s: Output = %q, want %q", what, *got.Output, want)
	}
}

// checkBeforeToolCall checks before_tool_call's answer, named what: no
// error, Deny and Reason as given, and no rewritten Input.
func checkBeforeToolCall(t *testing.T, what string, got abi.BeforeToolCallOutput, err error, deny bool, reason string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got.Deny != deny {
		t.Errorf("%s: Deny = %v, want %v", what, got.Deny, deny)
	}
	if got.Reason != reason {
		t.Errorf("%s: Reason = %q, want %q", what, got.Reason, reason)
	}
	if got.Input != nil {
		t.Errorf("%s: Input = %v, want none (unchanged)", what, got.Input)
	}
}

// linesWith returns the log lines that contain every one of parts.
func linesWith(log string, parts ...string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// The example plugin's three middlewares, called as the engine calls them.
func TestGoHooksMiddleware(t *testing.T) {
	forEachGoHooksBuild(t, testGoHooksMiddleware)
}

func testGoHooksMiddleware(t *testing.T, g goHooks) {
	ctx := context.Background()
	p := load(t, g.l, Config{Name: "go-hooks-mw", Path: g.path,
		Values: map[string]string{"deny_tools": "word_count", "max_json_bytes": "64"}})
	f := funcs(t, p)
	if f.History {
		t.Error("middleware History = true, want false")
	}
	checkHooks(t, f, []string{abi.HookOnTurnStart, abi.HookOnAction, abi.HookOnObservation, abi.HookOnFinal, abi.HookBeforeToolCall, abi.HookAfterToolCall},
		[]string{abi.HookBeforeRun, abi.HookAfterRun})
	if len(p.hookOptions()) != 4 {
		t.Fatalf("%d engine options, want the 4 engine hooks", len(p.hookOptions()))
	}

	// The audit log: observing hooks answer nothing, and log one line each.
	usage := abi.Usage{InputTokens: 20, OutputTokens: 10}
	for name, err := range map[string]error{
		"on_turn_start":  f.TurnStart(ctx, abi.TurnStart{SessionID: "s1", Turn: 1, Input: "count the words, then mail me@example.com"}),
		"on_action":      f.Action(ctx, abi.Action{SessionID: "s1", Turn: 1, Step: 1, Tool: "word_count", Input: map[string]any{"text": "a b"}}),
		"on_observation": f.Observation(ctx, abi.Observation{SessionID: "s1", Turn: 1, Step: 1, Tool: "word_count", Observation: "2"}),
		"on_final":       f.Final(ctx, abi.TurnEnd{SessionID: "s1", Turn: 1, Step: 2, Status: abi.StatusFinal, Final: `{"output":2}`, TurnUsage: usage}),
	} {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	out := g.logs.String()
	for _, want := range []string{
		`audit: turn 1 start session s1 input \"count the words, then mail [redacted]\"`,
		"audit: turn 1 action word_count step 1 params [text]",
		"audit: turn 1 observation word_count step 1 ok, 1 bytes",
		"audit: turn 1 final final after 2 steps, 30 tokens",
	} {
		if n := len(linesWith(out, want, "plugin=go-hooks-mw")); n != 1 {
			t.Fatalf("%d log lines with %q, want 1; log:\n%s", n, want, out)
		}
	}

	// Redaction: the output is rewritten; a clean one is left unchanged (nil).
	red, err := f.AfterToolCall(ctx, abi.AfterToolCallInput{SessionID: "s1", Turn: 1, Step: 1, Tool: "json_query",
		Output: "mail me at a.b@example.com, key sk-abcdefghijklmnop1234"})
	checkRedacted(t, "after_tool_call", red, err, "mail me at [redacted], key [redacted]")
	red, err = f.AfterToolCall(ctx, abi.AfterToolCallInput{Tool: "word_count", Output: `{"words":2}`})
	if err != nil || red.Output != nil {
		t.Fatalf("after_tool_call on a clean output = %+v, %v", red, err)
	}

	// The guard: a denied tool, a document over max_json_bytes, and calls
	// that pass unchanged (nil Input, no denial).
	deny, err := f.BeforeToolCall(ctx, abi.BeforeToolCallInput{Turn: 1, Step: 1, Tool: "word_count", Input: map[string]any{"text": "a"}})
	checkBeforeToolCall(t, "before_tool_call word_count", deny, err, true, "tool word_count is denied by policy (go-hooks deny_tools)")
	deny, err = f.BeforeToolCall(ctx, abi.BeforeToolCallInput{Tool: "json_query", Input: map[string]any{"json": `[` + strings.Repeat(`1,`, 40) + `1]`, "path": "[0]"}})
	if err != nil {
		t.Fatalf("before_tool_call on a large document: %v", err)
	}
	if !deny.Deny {
		t.Errorf("before_tool_call on a large document = %+v, want it denied", deny)
	}
	if want := "json_query document is 83 bytes, over the limit of 64 (go-hooks max_json_bytes)"; deny.Reason != want {
		t.Errorf("before_tool_call on a large document: Reason = %q, want %q", deny.Reason, want)
	}
	for _, in := range []abi.BeforeToolCallInput{
		{Tool: "json_query", Input: map[string]any{"json": `{"a":1}`, "path": "a"}},
		{Tool: "calc", Input: map[string]any{"expression": "1+1"}},
	} {
		pass, err := f.BeforeToolCall(ctx, in)
		checkBeforeToolCall(t, "before_tool_call "+in.Tool, pass, err, false, "") // the zero output
	}
	checkOneInstance(t, p, 0)
}

// Config.Hooks enables middleware hooks one by one, like engine hooks.
func TestGoHooksMiddlewareEnabledHooks(t *testing.T) {
	forEachGoHooksBuild(t, testGoHooksMiddlewareEnabledHooks)
}

func testGoHooksMiddlewareEnabledHooks(t *testing.T, g goHooks) {
	p := load(t, g.l, Config{Name: "go-hooks-redact", Path: g.path, Hooks: []string{abi.HookAfterToolCall}})
	f := funcs(t, p)
	checkHooks(t, f, []string{abi.HookAfterToolCall}, []string{abi.HookOnTurnStart, abi.HookOnAction, abi.HookOnObservation, abi.HookOnFinal,
		abi.HookBeforeRun, abi.HookAfterRun, abi.HookBeforeToolCall})
	if got, want := p.Hooks(), []string{abi.HookAfterToolCall}; !slices.Equal(got, want) {
		t.Errorf("Hooks = %q, want %q", got, want)
	}
	if n := len(p.hookOptions()); n != 0 {
		t.Errorf("%d engine options, want none", n)
	}
	red, err := f.AfterToolCall(context.Background(), abi.AfterToolCallInput{Tool: "t", Output: "ops@corp.io"})
	checkRedacted(t, "after_tool_call", red, err, "[redacted]")
	// Only engine hooks enabled: no middleware at all.
	p2 := load(t, g.l, Config{Path: g.path, Hooks: []string{abi.HookBuildPrompt}})
	if mw := p2.middleware(); mw != nil {
		t.Fatalf("Middleware() = %#v, want nil", mw)
	}
}

// The example's OnDestroy runs on close, once per idle instance, with the
// state the instance kept.
func TestGoHooksDestroy(t *testing.T) {
	forEachGoHooksBuild(t, testGoHooksDestroy)
}

func testGoHooksDestroy(t *testing.T, g goHooks) {
	ctx := context.Background()
	const line = "go-hooks: instance closed after 1 tool successes"
	// The log is shared by the whole test process: count from here.
	before := len(linesWith(g.logs.String(), line, "plugin=go-hooks-destroy"))
	p := load(t, g.l, Config{Name: "go-hooks-destroy", Path: g.path})
	if _, err := invoke[json.RawMessage](ctx, p, abi.ExportOnToolSuccess, abi.ToolSuccessInput{Tool: "word_count"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := linesWith(g.logs.String(), line, "plugin=go-hooks-destroy"); len(got)-before != 1 {
		t.Fatalf("%d destroy lines, want 1:\n%s", len(got)-before, g.logs.String())
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := linesWith(g.logs.String(), line, "plugin=go-hooks-destroy"); len(got)-before != 1 {
		t.Fatalf("a second Close destroyed again: %d lines", len(got)-before)
	}
}

// newLoggedLoader is a loader whose plugins log to the returned buffer.
func newLoggedLoader(t *testing.T) (*Loader, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	l, err := NewLoader(LoaderOptions{CacheDir: "off", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, logs
}

// Close calls morph_destroy exactly once on each idle instance, not on a
// busy one, and a second Close does nothing.
func TestCloseDestroysIdleInstances(t *testing.T) {
	l, logs := newLoggedLoader(t)
	ctx := context.Background()
	p := load(t, l, Config{Path: fixture(t, "mw_destroy")})
	f := funcs(t, p)
	if f.ID != "mw-destroy" {
		t.Errorf("middleware ID = %q, want mw-destroy", f.ID)
	}
	checkHooks(t, f, []string{abi.HookOnTurnStart}, []string{abi.HookOnAction, abi.HookBeforeToolCall, abi.HookAfterToolCall})
	if err := f.TurnStart(ctx, abi.TurnStart{SessionID: "s", Turn: 1, Input: "hi"}); err != nil {
		t.Fatal(err)
	}
	// Three instances in the pool, and a fourth one busy at Close.
	var insts []*instance
	for range 4 {
		inst, _, err := p.get(ctx, p.shards.local())
		if err != nil {
			t.Fatal(err)
		}
		insts = append(insts, inst)
	}
	for _, inst := range insts[:3] {
		p.put(inst)
	}
	before := p.Stats()
	if before.Instantiated != 4 {
		t.Fatalf("stats %+v, want 4 instances", before)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	p.put(insts[3]) // the busy one comes back after Close: closed, not destroyed
	const line = "mw_destroy: instance destroyed"
	if got := linesWith(logs.String(), line, "plugin=mw-destroy"); len(got) != 3 {
		t.Fatalf("%d destroy lines, want one per idle instance (3):\n%s", len(got), logs.String())
	}
	if st := p.Stats(); st.Calls-before.Calls != 3 || st.Faults != 0 {
		t.Fatalf("stats before %+v, after %+v", before, st)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := linesWith(logs.String(), line); len(got) != 3 {
		t.Fatalf("a second Close destroyed again: %d lines", len(got))
	}
	if err := f.TurnStart(ctx, abi.TurnStart{Turn: 2}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a hook after Close: %v, want ErrClosed", err)
	}
}

// A faulty middleware plugin: each failure is the host's typed error, and a
// trapping destroy is logged without failing Close.
func TestMiddlewareFaults(t *testing.T) {
	l, logs := newLoggedLoader(t)
	ctx := context.Background()
	p := load(t, l, Config{Path: fixture(t, "mw_trap"), Limits: Limits{Timeout: time.Second}})
	f := funcs(t, p)
	checkHooks(t, f, []string{abi.HookOnAction, abi.HookBeforeToolCall, abi.HookAfterToolCall}, []string{abi.HookOnTurnStart, abi.HookBeforeRun})
	err := f.Action(ctx, abi.Action{Turn: 1, Step: 1, Tool: "word_count"})
	if pe := checkPluginErr(t, "on_action", err, ErrTrap, "mw-trap", "unreachable"); pe.Export != abi.ExportOnAction {
		t.Errorf("on_action: the error's Export = %q, want %q", pe.Export, abi.ExportOnAction)
	}
	out, err := f.BeforeToolCall(ctx, abi.BeforeToolCallInput{Tool: "word_count"})
	checkErr(t, "before_tool_call", err, ErrGuest, "policy store unavailable")
	if out.Deny {
		t.Errorf("before_tool_call = %+v, want the zero output (no denial)", out)
	}
	if out.Input != nil {
		t.Errorf("before_tool_call = %+v, want the zero output (no Input)", out)
	}
	red, err := f.AfterToolCall(ctx, abi.AfterToolCallInput{Tool: "word_count", Output: "x"})
	if err != nil || red.Output != nil {
		t.Fatalf("after_tool_call = %+v, %v, want unchanged", red, err)
	}
	st := p.Stats()
	checkCount(t, "Faults", st.Faults, 2)
	checkCount(t, "Discarded", st.Discarded, 1)
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close with a trapping destroy: %v", err)
	}
	if got := linesWith(logs.String(), "plugin destroy failed", "plugin=mw-trap", abi.ExportDestroy, "plugin trapped"); len(got) != 1 {
		t.Fatalf("want one warning for the trapping destroy:\n%s", logs.String())
	}
}

// A manifest that lists a middleware hook must export it; a config may
// enable only what the plugin implements.
func TestMiddlewareLoadChecks(t *testing.T) {
	l := newLoader(t)
	_, err := l.Load(context.Background(), Config{Path: fixture(t, "mw_missing")})
	if !errors.Is(err, ErrABIMismatch) || !strings.Contains(err.Error(), "manifest declares hook before_run but the module does not export morph_before_run") {
		t.Fatalf("err = %v", err)
	}
	_, err = l.Load(context.Background(), Config{Path: fixture(t, "mw_destroy"), Hooks: []string{abi.HookOnAction}})
	if !errors.Is(err, ErrABIMismatch) || !strings.Contains(err.Error(), `hook "on_action" is enabled in the config but the plugin implements only [on_turn_start]`) {
		t.Fatalf("err = %v", err)
	}
	// No middleware hook: no middleware.
	if mw := load(t, l, Config{Path: fixture(t, "minimal")}).middleware(); mw != nil {
		t.Fatalf("Middleware() = %#v, want nil", mw)
	}
}

// A middleware hook's deadline is the engine's MiddlewareConfig.Timeout
// when that is shorter than the plugin's own timeout: the engine arms no
// timer for a plugin's hook (engine.BoundedCall), so the host must keep it.
func TestEngineDeadlineBoundsHook(t *testing.T) {
	const engineTimeout, pluginTimeout = 50 * time.Millisecond, time.Minute
	l := newLoader(t)
	var hooks []engine.Event
	e := engine.New(finalOnly{}, nil,
		engine.WithExtenders(l.Extender(Config{Path: fixture(t, "mw_spin"), Limits: Limits{Timeout: pluginTimeout}},
			engine.MiddlewareConfig{Timeout: engineTimeout})),
		engine.WithEventHandler(func(ev engine.Event) {
			if ev.Kind == engine.EventHook {
				hooks = append(hooks, ev)
			}
		}))
	defer e.Close(context.Background())
	if _, _, err := e.Run(context.Background(), "q", engine.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(hooks) != 1 {
		t.Fatalf("%d hook events, want 1 (on_turn_start): %+v", len(hooks), hooks)
	}
	ev := hooks[0]
	if ev.Outcome != engine.OutcomeTimeout {
		t.Errorf("outcome %q, want %q", ev.Outcome, engine.OutcomeTimeout)
	}
	if !errors.Is(ev.Err, ErrTimeout) {
		t.Errorf("error %v; want the host's ErrTimeout", ev.Err)
	}
	if ev.Duration >= pluginTimeout/2 { // generous: the engine's 50 ms, not the plugin's minute
		t.Errorf("the hook ran %s: the engine's %s deadline did not stop it", ev.Duration, engineTimeout)
	}
}
