package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/llm"
)

// fakePlugin counts its opens and closes.
type fakePlugin struct {
	name    string
	ext     Extension
	openErr error
	opens   atomic.Int32
	closes  atomic.Int32
}

func (p *fakePlugin) Name() string { return p.name }
func (p *fakePlugin) Open(context.Context) (*Extension, error) {
	p.opens.Add(1)
	if p.openErr != nil {
		return nil, p.openErr
	}
	ext := p.ext
	ext.Close = func(context.Context) error { p.closes.Add(1); return nil }
	return &ext, nil
}

// closer is native middleware with an io.Closer.
type closer struct{ closed atomic.Int32 }

func (c *closer) Name() string { return "closer" }
func (c *closer) Close() error { c.closed.Add(1); return nil }

func TestInitializeConcurrentAndIdempotent(t *testing.T) {
	p := &fakePlugin{name: "p", ext: Extension{Version: "1", Tools: []Tool{&testTool{name: "ptool"}}}}
	e := New(script(), nil, WithExtenders(p))
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- e.Initialize(context.Background())
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if p.opens.Load() != 1 || e.State() != StateInitialized {
		t.Fatalf("opened %d times, state %s", p.opens.Load(), e.State())
	}
	if src, _ := e.Registry().Source("ptool"); src != PluginSource("p") {
		t.Fatalf("tool source %q", src)
	}
}

// Run before Initialize initializes exactly as Initialize would, and an
// initialization failure comes back from Run as a typed error.
func TestRunInitializesImplicitly(t *testing.T) {
	p := &fakePlugin{name: "p", ext: Extension{Options: []Option{WithFallbackFinal(func() *Final { return &Final{Output: "plugin fallback"} })}}}
	e := New(script("junk"), nil, WithExtenders(p))
	final, _, err := e.Run(context.Background(), "t", RunOptions{MaxSteps: 1, ParseRetries: -1})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if final.Output != "plugin fallback" {
		t.Errorf("final output = %v, want the plugin's %q", final.Output, "plugin fallback")
	}
	if e.State() != StateInitialized {
		t.Errorf("State = %s, want %s", e.State(), StateInitialized)
	}
	if n := p.opens.Load(); n != 1 {
		t.Errorf("the plugin opened %d times, want once", n)
	}

	bad := &fakePlugin{name: "broken", openErr: errors.New("file not found")}
	good := &fakePlugin{name: "good"}
	m := script(finalReply("x"))
	e = New(m, nil, WithExtenders(good, bad))
	for range 2 { // the same error every time, and no model call
		final, rc, err := e.Run(context.Background(), "t", RunOptions{})
		var ie *InitError
		if final != nil {
			t.Errorf("final = %+v, want none", final)
		}
		if !errors.Is(err, ErrInit) {
			t.Fatalf("err = %v, want ErrInit", err)
		}
		if !errors.As(err, &ie) {
			t.Errorf("err = %v (%T), want an *InitError", err, err)
		}
		if want := `plugin "broken": file not found`; !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to say %q", err, want)
		}
		if rc.StopReason != StopInit {
			t.Errorf("StopReason = %q, want %q", rc.StopReason, StopInit)
		}
	}
	if len(m.reqs) != 0 {
		t.Errorf("%d requests, want none", len(m.reqs))
	}
	if n := good.closes.Load(); n != 1 {
		t.Errorf("good closed %d times, want once", n)
	}
	if n := bad.opens.Load(); n != 1 {
		t.Errorf("bad opened %d times, want once", n)
	}
}

// gatedModel answers each request with a final when the test lets it.
type gatedModel struct{ entered, release chan struct{} }

func (g gatedModel) Chat(context.Context, llm.Request) (llm.Result, error) {
	g.entered <- struct{}{}
	<-g.release
	return llm.Result{Text: finalReply("x")}, nil
}

// An engine is running while runs are in progress, and initialized again
// when the last one ends.
func TestStateFollowsRuns(t *testing.T) {
	g := gatedModel{entered: make(chan struct{}), release: make(chan struct{})}
	e := New(g, nil)
	state := func() string { return e.Status().State }
	if err := e.Initialize(context.Background()); err != nil || state() != "initialized" {
		t.Fatalf("err %v state %s", err, state())
	}
	errs := make(chan error)
	for range 2 {
		go func() {
			_, _, err := e.Run(context.Background(), "t", RunOptions{})
			errs <- err
		}()
		<-g.entered
	}
	for i, want := range []string{"running", "initialized"} {
		g.release <- struct{}{}
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if state() != want {
			t.Fatalf("after %d of 2 runs ended: state %s, want %s", i+1, state(), want)
		}
	}
	if e.State() != StateInitialized {
		t.Fatalf("State() = %s", e.State())
	}
	e.Close(context.Background())
	if state() != "closed" {
		t.Fatalf("state %s after Close", state())
	}
}

func TestCloseDestroysOnceAndRefusesRuns(t *testing.T) {
	p1, p2 := &fakePlugin{name: "a"}, &fakePlugin{name: "b"}
	c := &closer{}
	e := New(script(finalReply("x")), nil, WithExtenders(p1, p2), WithMiddleware(c))
	if _, _, err := e.Run(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for name, n := range map[string]int32{"plugin a": p1.closes.Load(), "plugin b": p2.closes.Load(), "the middleware": c.closed.Load()} {
		if n != 1 {
			t.Errorf("%s closed %d times, want once", name, n)
		}
	}
	if e.State() != StateClosed {
		t.Errorf("State = %s, want %s", e.State(), StateClosed)
	}
	if _, _, err := e.Run(context.Background(), "t", RunOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("run after close: %v", err)
	}
	if err := e.Initialize(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("initialize after close: %v", err)
	}
}

func TestDependencyOrder(t *testing.T) {
	var log []string
	mk := func(name string, requires ...string) *fakePlugin {
		return &fakePlugin{name: name, ext: Extension{Requires: requires, Middleware: &recorder{name: name, log: &log}}}
	}
	e := New(script(finalReply("x")), nil, WithExtenders(mk("app", "auth", "log"), mk("auth", "log"), mk("log"), mk("extra")))
	if _, _, err := e.Run(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, p := range e.Status().Plugins {
		order = append(order, p.Name)
	}
	if got := strings.Join(order, ","); got != "log,auth,app,extra" {
		t.Fatalf("load order %s", got)
	}
	if !strings.HasPrefix(strings.Join(log, " "), "log:turn_start auth:turn_start app:turn_start extra:turn_start") {
		t.Fatalf("middleware order %v", log)
	}
	for _, c := range []struct {
		plugins []Extender
		want    string
	}{
		{[]Extender{mk("a", "ghost")}, `plugin "a": requires "ghost", which is not loaded`},
		{[]Extender{mk("a", "b"), mk("b", "c"), mk("c", "a")}, "cycle: a -> b -> c -> a"},
	} {
		err := New(script(), nil, WithExtenders(c.plugins...)).Initialize(context.Background())
		if !errors.Is(err, ErrInit) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want %q", err, c.want)
		}
	}
}

func TestToolPrecedence(t *testing.T) {
	reg := registry(&testTool{name: "shared", fn: func(map[string]any) (string, error) { return "host", nil }})
	p1 := &fakePlugin{name: "p1", ext: Extension{Tools: []Tool{&testTool{name: "shared"}, &testTool{name: "both"}, &testTool{name: "calc"}}}}
	p2 := &fakePlugin{name: "p2", ext: Extension{Tools: []Tool{&testTool{name: "both"}}}}
	e := New(script(), reg, WithExtenders(p1, p2), WithBuiltinTools(&testTool{name: "calc"}, &testTool{name: "clock"}))
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"shared": SourceHost, "both": PluginSource("p2"), "calc": PluginSource("p1"), "clock": SourceBuiltin}
	st := e.Status()
	for _, ts := range st.Tools {
		if want[ts.Name] != ts.Source {
			t.Errorf("tool %s from %s, want %s", ts.Name, ts.Source, want[ts.Name])
		}
	}
	if len(st.Tools) != 4 {
		t.Errorf("%d tools in the status, want 4: %+v", len(st.Tools), st.Tools)
	}
	if st.State != "initialized" {
		t.Errorf("status State = %q, want initialized", st.State)
	}
	if got := strings.Join(st.Plugins[1].Tools, ","); got != "both" {
		t.Errorf("p2's tools %s, want both", got)
	}
	// Each replacement is a warning naming both sides, kept for the CLI.
	want2 := []string{
		`the tool "shared" of plugin "p1" is not used: the host's tool of that name is`,
		`the tool "calc" of plugin "p1" replaces the built-in tool "calc"`,
		`the tool "both" of plugin "p2" replaces plugin "p1"'s`,
	}
	if got := strings.Join(st.Warnings, "\n"); got != strings.Join(want2, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", got, strings.Join(want2, "\n"))
	}
}

// Engine hooks follow the tools' precedence: the host's hook is used over
// a plugin's, a later plugin's over an earlier one's, each time with a
// warning naming both sides; hook events name the one used, and so does
// EngineHooks' Owners.
func TestHookPrecedence(t *testing.T) {
	prompt := func(text string) Option {
		return WithPromptBuilder(func(*Registry, string) string { return text })
	}
	fallback := func(out string) Option {
		return WithFallbackFinal(func() *Final { return &Final{Output: out} })
	}
	p1 := &fakePlugin{name: "p1", ext: Extension{Options: []Option{prompt("p1's prompt"), fallback("p1")}}}
	p2 := &fakePlugin{name: "p2", ext: Extension{Options: []Option{fallback("p2")}}}
	var owners []string
	e := New(script("junk"), nil, WithExtenders(p1, p2), prompt("the host's prompt"), WithEventHandler(func(ev Event) {
		if ev.Kind == EventHook {
			owners = append(owners, ev.Hook+"/"+ev.Plugin)
		}
	}))
	final, rc, err := e.Run(context.Background(), "t", RunOptions{MaxSteps: 1, ParseRetries: -1})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rc.SystemPrompt != "the host's prompt" {
		t.Errorf("system prompt %q, want the host's", rc.SystemPrompt)
	}
	if final.Output != "p2" {
		t.Errorf("final output = %v, want p2's", final.Output)
	}
	if got := strings.Join(owners, " "); got != "build_prompt/host fallback_final/p2" {
		t.Fatalf("hook events %s", got)
	}
	want := []string{
		`the build_prompt hook of plugin "p1" is not used: the host's is`,
		`the fallback_final hook of plugin "p2" replaces plugin "p1"'s`,
	}
	if got := e.Status().Warnings; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings %q, want %q", got, want)
	}
	if got := e.EngineHooks().Owners; len(got) != 1 || got[abi.HookFallbackFinal] != "p2" {
		t.Fatalf("owners %v, want fallback_final's p2 only (the host's build_prompt has none)", got)
	}
}

// A bad tool schema is blamed on its plugin and tool, as the plugin loads:
// here the second of two plugins.
func TestBadToolSchemaNamesItsPlugin(t *testing.T) {
	good := &fakePlugin{name: "good", ext: Extension{Tools: []Tool{&testTool{name: "fine", schema: `{"type":"object"}`}}}}
	bad := &fakePlugin{name: "bad", ext: Extension{Tools: []Tool{&testTool{name: "leaky", schema: `{"$ref":"file:///etc/passwd"}`}}}}
	err := New(script(), nil, WithExtenders(good, bad)).Initialize(context.Background())
	var ie *InitError
	var pe *PluginError
	if !errors.As(err, &ie) {
		t.Fatalf("err = %v (%T), want an *InitError", err, err)
	}
	if len(ie.Errs) != 1 {
		t.Fatalf("the InitError holds %d errors, want one: %v", len(ie.Errs), err)
	}
	if !errors.As(ie.Errs[0], &pe) {
		t.Fatalf("the InitError's error %v (%T), want a *PluginError", ie.Errs[0], ie.Errs[0])
	}
	if pe.Plugin != "bad" {
		t.Errorf("the error's Plugin = %q, want bad", pe.Plugin)
	}
	for _, kind := range []error{ErrInvalidSchema, ErrInit} {
		if !errors.Is(pe, kind) {
			t.Errorf("the plugin's error %v, want one of kind %v", pe, kind)
		}
	}
	if msg := err.Error(); !strings.Contains(msg, `plugin "bad": invalid tool parameter schema of tool "leaky"`) || !strings.Contains(msg, "file:///etc/passwd") {
		t.Fatalf("message %q", msg)
	}
	if good.closes.Load() != 1 || bad.closes.Load() != 1 {
		t.Fatalf("closes good %d bad %d, want the plugins released", good.closes.Load(), bad.closes.Load())
	}
}

// namedErr names its plugin in its own text, as host.Error does.
type namedErr struct{ name string }

func (e namedErr) Error() string      { return "plugin " + strconv.Quote(e.name) + ": load failed" }
func (e namedErr) PluginName() string { return e.name }

// A plugin's error that names the plugin is not prefixed with its name a
// second time; one that names another plugin, or none, is.
func TestPluginErrorNamesThePluginOnce(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{namedErr{"min"}, `plugin "min": load failed`},
		{fmt.Errorf("opening: %w", namedErr{"min"}), `opening: plugin "min": load failed`},
		{namedErr{"other"}, `plugin "min": plugin "other": load failed`},
		{errors.New("no such file"), `plugin "min": no such file`},
	} {
		if got := (&PluginError{Plugin: "min", Err: c.err}).Error(); got != c.want {
			t.Errorf("%v: got %q, want %q", c.err, got, c.want)
		}
	}
}

func TestStatusCountsHooksAndFaults(t *testing.T) {
	flaky := &Funcs{ID: "flaky", Action: func(context.Context, abi.Action) error { return errors.New("x") }}
	p := &fakePlugin{name: "flaky", ext: Extension{Version: "2.0", Middleware: flaky, Options: []Option{WithFallbackFinal(func() *Final { return nil })}}}
	e := New(script(toolCall("echo", `{"text":"a"}`), finalReply("x")), registry(echoTool()), WithExtenders(p))
	if _, _, err := e.Run(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	st := e.Status()
	ps := st.Plugins[0]
	if ps.Calls != 1 {
		t.Errorf("the plugin's Calls = %d, want 1", ps.Calls)
	}
	if ps.Faults != 1 {
		t.Errorf("the plugin's Faults = %d, want 1", ps.Faults)
	}
	if ps.State != "active" {
		t.Errorf("the plugin's State = %q, want active", ps.State)
	}
	if got := strings.Join(ps.Hooks, ","); got != "fallback_final,on_action" {
		t.Errorf("the plugin's Hooks %s, want fallback_final,on_action", got)
	}
	if st.Hooks["on_action"] != 1 || st.Hooks["fallback_final"] != 1 {
		t.Fatalf("hook counts %v", st.Hooks)
	}
	if s := st.Summary(); s != "1 plugin (flaky 2.0), 1 tool, hooks: fallback_final, on_action" {
		t.Fatalf("summary %q", s)
	}
}

func TestDuplicatePluginNamesFirstWins(t *testing.T) {
	first, second := &fakePlugin{name: "dup", ext: Extension{Version: "1"}}, &fakePlugin{name: "dup", ext: Extension{Version: "2"}}
	e := New(script(), nil, WithExtenders(first, second))
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := e.Status()
	if n := second.opens.Load(); n != 0 {
		t.Errorf("the second dup opened %d times, want never", n)
	}
	if len(st.Plugins) != 1 {
		t.Errorf("%d plugins in the status, want 1: %+v", len(st.Plugins), st.Plugins)
	} else if st.Plugins[0].Version != "1" {
		t.Errorf("the plugin's Version = %q, want the first's, 1", st.Plugins[0].Version)
	}
	if len(st.Skipped) != 1 {
		t.Errorf("%d skipped in the status, want 1: %+v", len(st.Skipped), st.Skipped)
	} else if st.Skipped[0].Name != "dup" {
		t.Errorf("the skipped plugin's Name = %q, want dup", st.Skipped[0].Name)
	}
}

// Every engine hook call is timed and reported under the plugin that set it.
func TestEngineHookEvents(t *testing.T) {
	p := &fakePlugin{name: "fb", ext: Extension{Options: []Option{WithFallbackFinal(func() *Final { panic("bug") })}}}
	var hooks []string
	e := New(script("junk"), nil, WithExtenders(p), WithParamsBuilder(func(RunOptions) map[string]any { return nil }),
		WithEventHandler(func(ev Event) {
			if ev.Kind == EventHook {
				hooks = append(hooks, ev.Hook+"/"+ev.Plugin+"/"+ev.Outcome)
			}
		}))
	final, _, err := e.Run(context.Background(), "t", RunOptions{MaxSteps: 1, ParseRetries: -1})
	if err != nil || final.Output != DefaultFinalOutput {
		t.Fatalf("final %+v err %v", final, err)
	}
	if got := strings.Join(hooks, " "); got != "build_params/host/ok fallback_final/fb/panic" {
		t.Fatalf("hook events %s", got)
	}
}

// describedTool is a tool with a description of its own.
type describedTool struct {
	testTool
	desc string
}

func (t *describedTool) Description() string { return t.desc }

// A plugin's tool whose name a model could not type back, or that could
// forge the lines of a tool list, or whose description would go to the
// model with every request at any length, fails its plugin's load, naming
// the plugin and the tool.
// checkPluginError checks that err, of what, is a *PluginError of plugin
// that says want.
func checkPluginError(t *testing.T, what string, err error, plugin, want string) {
	t.Helper()
	var pe *PluginError
	if !errors.As(err, &pe) {
		t.Errorf("%s: err = %.300v (%T), want a *PluginError", what, err, err)
	} else if pe.Plugin != plugin {
		t.Errorf("%s: the error's Plugin = %q, want %q", what, pe.Plugin, plugin)
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: err = %.300v, want it to say %q", what, err, want)
	}
}

func TestToolNamesAndDescriptionsChecked(t *testing.T) {
	for _, c := range []struct {
		name, desc string
		want       string
	}{
		{"look\x1b[1mup\nFORGED", "d", `tool name "look\x1b[1mup\nFORGED"`},
		{"two words", "d", `tool name "two words"`},
		{"", "d", `tool name ""`},
		{strings.Repeat("x", 129), "d", "want 1 to 128"},
		{"big", strings.Repeat("d", DefaultMaxDescriptionBytes+1), "over the limit of 16384"},
	} {
		p := &fakePlugin{name: "p", ext: Extension{Tools: []Tool{&describedTool{testTool{name: c.name, schema: `{"type":"object"}`}, c.desc}}}}
		err := New(script(), nil, WithExtenders(p)).Initialize(context.Background())
		what := fmt.Sprintf("tool %.40q", c.name)
		checkPluginError(t, what, err, "p", c.want)
		if !errors.Is(err, ErrInvalidTool) {
			t.Errorf("%s: err = %.300v, want ErrInvalidTool", what, err)
		}
	}
	ok := &fakePlugin{name: "p", ext: Extension{Tools: []Tool{&testTool{name: "fetch_v2.search-all", schema: `{"type":"object"}`}}}}
	if err := New(script(), nil, WithExtenders(ok)).Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Status may be called while Initialize loads plugins (a CLI showing
// progress): it never reads the hooks and middleware Initialize is setting
// (-race tells).
func TestStatusDuringInitialize(t *testing.T) {
	p := &fakePlugin{name: "p", ext: Extension{
		Middleware: &Funcs{ID: "p", Action: func(context.Context, abi.Action) error { return nil }},
		Options:    []Option{WithFallbackFinal(func() *Final { return &Final{Output: "x"} })}}}
	e := New(script(), nil, WithExtenders(p))
	started, stop, stopped := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for first := true; ; first = false {
			e.Status()
			if first {
				close(started)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	<-started
	err := e.Initialize(context.Background())
	close(stop)
	<-stopped
	if err != nil {
		t.Fatal(err)
	}
	st := e.Status()
	for _, hook := range []string{"fallback_final", "on_action"} {
		if st.Hooks[hook] != 1 {
			t.Errorf("status: %d %s hooks, want 1", st.Hooks[hook], hook)
		}
	}
	if len(st.Plugins) != 1 {
		t.Errorf("status: %d plugins, want 1", len(st.Plugins))
	}
}

// slowPlugin takes its time to open.
type slowPlugin struct {
	*fakePlugin
	delay time.Duration
}

func (p slowPlugin) Open(ctx context.Context) (*Extension, error) {
	time.Sleep(p.delay)
	return p.fakePlugin.Open(ctx)
}

// A failed initialization is reported plugin by plugin: each plugin to
// blame with all its problems and its load time; the engine is failed.
func TestStatusNamesFailedPlugins(t *testing.T) {
	bad := slowPlugin{&fakePlugin{name: "bad", openErr: errors.New("file not found")}, 5 * time.Millisecond}
	messy := &fakePlugin{name: "messy", ext: Extension{Requires: []string{"ghost"}, Services: map[string]any{"s": nil},
		ConfigKeys: []ConfigKey{{Name: "k", Type: "text"}}}}
	e := New(script(), nil, WithExtenders(&fakePlugin{name: "good"}, bad, messy, &fakePlugin{name: "good"}))
	if err := e.Initialize(context.Background()); !errors.Is(err, ErrInit) {
		t.Fatalf("err = %v", err)
	}
	st := e.Status()
	if st.State != "failed" {
		t.Errorf("status State = %q, want failed", st.State)
	}
	if e.State() != StateFailed {
		t.Errorf("State = %s, want %s", e.State(), StateFailed)
	}
	if len(st.Plugins) != 0 {
		t.Errorf("%d plugins in the status, want none", len(st.Plugins))
	}
	if len(st.Skipped) != 1 {
		t.Errorf("%d skipped in the status, want 1", len(st.Skipped))
	}
	if len(st.Failed) != 2 {
		t.Fatalf("%d failed in the status, want 2: %+v", len(st.Failed), st.Failed)
	}
	f := st.Failed[0]
	if f.Name != "bad" {
		t.Errorf("failed[0].Name = %q, want bad", f.Name)
	}
	if got := strings.Join(f.Reasons, "|"); got != "file not found" {
		t.Errorf("failed[0].Reasons = %s, want file not found", got)
	}
	if f.LoadTime < bad.delay {
		t.Errorf("failed[0].LoadTime = %v, want at least the plugin's delay, %v", f.LoadTime, bad.delay)
	}
	want := `config key "k": unknown type "text"|service "s" is nil|requires "ghost", which is not loaded`
	if f := st.Failed[1]; f.Name != "messy" || strings.Join(f.Reasons, "|") != want {
		t.Errorf("failed[1] %+v, want reasons %s", f, want)
	}
	if err := e.Initialize(context.Background()); !errors.Is(err, ErrInit) || e.State() != StateFailed {
		t.Fatalf("second Initialize: %v, state %s", err, e.State())
	}
	e.Close(context.Background())
	if e.State() != StateClosed {
		t.Fatalf("state %s after Close", e.State())
	}
}

// The report of a plugin that loaded: how long its Open took and what it
// added.
func TestStatusReportsWhatAPluginAdded(t *testing.T) {
	p := slowPlugin{&fakePlugin{name: "p", ext: Extension{Version: "1", Tools: []Tool{&testTool{name: "ptool"}},
		Services: map[string]any{"store": 1}, ConfigKeys: []ConfigKey{{Name: "depth", Type: ConfigInt}},
		Options: []Option{WithFallbackFinal(func() *Final { return nil })}}}, 5 * time.Millisecond}
	e := New(script(), nil, WithExtenders(p))
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	ps := e.Status().Plugins[0]
	if ps.LoadTime < p.delay || fmt.Sprint(ps.Hooks, ps.Tools, ps.Services, ps.ConfigKeys) != "[fallback_final] [ptool] [store] [depth]" {
		t.Fatalf("plugin status %+v", ps)
	}
}

// finalCloser is native middleware whose on_final reads what its Close
// writes, without a lock of its own: the engine must not run them at once.
type finalCloser struct {
	closed bool
	seen   []bool
}

func (c *finalCloser) Name() string { return "final-closer" }
func (c *finalCloser) Close() error { c.closed = true; return nil }
func (c *finalCloser) OnFinal(context.Context, abi.TurnEnd) error {
	c.seen = append(c.seen, c.closed)
	return nil
}

// A turn refused by an engine whose initialization failed tells its
// middleware of its end; a Close at the same time releases them before or
// after, never during (under -race, a concurrent pair is reported).
func TestRefusedTurnAndCloseDoNotOverlap(t *testing.T) {
	for range 20 {
		mw := &finalCloser{}
		e := New(script(), nil, WithMiddleware(mw), WithExtenders(&fakePlugin{name: "broken", openErr: errors.New("file not found")}))
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); e.Run(context.Background(), "t", RunOptions{}) }()
		go func() { defer wg.Done(); e.Close(context.Background()) }()
		wg.Wait()
		if len(mw.seen) != 1 {
			t.Fatalf("on_final called %d times, want once", len(mw.seen))
		}
	}
}

// countingDetails are details that change: each Refresh answers the next
// count.
type countingDetails struct{ n atomic.Int32 }

func (d *countingDetails) Refresh() any { return d.n.Add(1) }

// Status reports what a DetailsRefresher answers each time it is read, and
// other details as they are.
func TestStatusRefreshesDetails(t *testing.T) {
	live := &fakePlugin{name: "live", ext: Extension{Details: &countingDetails{}}}
	fixed := &fakePlugin{name: "fixed", ext: Extension{Details: "as opened"}}
	e := New(script("junk"), nil, WithExtenders(live, fixed))
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	for want := int32(1); want <= 2; want++ {
		st := e.Status()
		if st.Plugins[0].Details != want || st.Plugins[1].Details != "as opened" {
			t.Fatalf("status %d: details %v, %v", want, st.Plugins[0].Details, st.Plugins[1].Details)
		}
	}
}
