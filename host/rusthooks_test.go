package host

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/llm"
)

// The example plugin examples/rust-hooks, written with the Rust PDK
// (guests/rust) and built by Debian's rustc for wasm32-unknown-unknown,
// through the real host and a real engine run.

// rustHooksWasm returns the path of the Rust example plugin built by `make rust`.
func rustHooksWasm(t testing.TB) string {
	t.Helper()
	return testenv.Built(t, filepath.Join("..", "examples", "rust-hooks", "target", "wasm32-unknown-unknown", "release", "rust_hooks.wasm"), "rust")
}

// rustHooksLoader is a loader whose plugins log at debug level to the
// returned buffer; one per test, for its log, all on testenv.CompileCache,
// so that the module compiles once (2-3 s under -race).
func rustHooksLoader(t *testing.T) (*Loader, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	l, err := NewLoader(LoaderOptions{CacheDir: testenv.CompileCache(),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, logs
}

// allHooks is every hook of ABI v1, in the order the Rust PDK's manifest lists them.
var allHooks = append(abi.HookNames(abi.EngineHook), abi.HookNames(abi.Middleware)...)

func TestRustHooksManifest(t *testing.T) {
	l, _ := rustHooksLoader(t)
	ctx := context.Background()
	p := load(t, l, Config{Path: rustHooksWasm(t)})
	m := p.Manifest()
	if p.Name() != "rust-hooks" {
		t.Errorf("Name = %q, want rust-hooks", p.Name())
	}
	if m.Version != "0.1.0" {
		t.Errorf("manifest Version = %q, want 0.1.0", m.Version)
	}
	if m.ABIVersion != abi.Version {
		t.Errorf("manifest ABIVersion = %d, want %d", m.ABIVersion, abi.Version)
	}
	if !reflect.DeepEqual(m.Hooks, allHooks) {
		t.Errorf("manifest Hooks = %q, want %q", m.Hooks, allHooks)
	}
	if want := []string{"log", "config"}; !reflect.DeepEqual(m.Capabilities, want) {
		t.Errorf("manifest Capabilities = %q, want %q", m.Capabilities, want)
	}
	if m.History {
		t.Error("manifest History = true, want false")
	}
	if m.Requires != nil {
		t.Errorf("manifest Requires = %+v, want none", m.Requires)
	}
	if len(p.Hooks()) != len(allHooks) || len(p.hookOptions()) != 4 {
		t.Fatalf("enabled hooks %v, %d engine options", p.Hooks(), len(p.hookOptions()))
	}
	// Every middleware hook of the ABI's table is wired (Middleware's switch),
	// and, the plugin being in session isolation, its sessions' end (which is
	// no hook of the ABI's).
	f := funcs(t, p)
	if f.SessionEnd == nil || p.Isolation() != IsolationSession {
		t.Fatalf("middleware %+v in isolation %q: want SessionEnd set", f, p.Isolation())
	}
	fv, set := reflect.ValueOf(f).Elem(), 0
	for i := range fv.NumField() {
		if fv.Type().Field(i).Name != "SessionEnd" && fv.Field(i).Kind() == reflect.Func && !fv.Field(i).IsNil() {
			set++
		}
	}
	if set != len(abi.HookNames(abi.Middleware)) || f.History {
		t.Fatalf("middleware %+v: %d hooks wired, want the table's %d", f, set, len(abi.HookNames(abi.Middleware)))
	}
	var names []string
	reg := engine.NewRegistry()
	for _, tool := range p.engineTools() {
		names = append(names, tool.Name())
		reg.Register(tool)
	}
	if !reflect.DeepEqual(names, []string{"reverse", "char_stats"}) {
		t.Fatalf("tools %v", names)
	}
	if err := reg.Check(); err != nil {
		t.Fatalf("the declared schemas do not compile: %v", err)
	}
	if err := reg.Validate("reverse", map[string]any{"text": "a", "extra": 1}); !errors.Is(err, engine.ErrInvalidParams) {
		t.Fatalf("an extra field passed reverse's schema: %v", err)
	}

	// The module itself: the marker, only morph:host/v1 imports (no WASI),
	// and exactly the exports the manifest needs, plus morph_destroy.
	rep, err := l.Inspect(ctx, Config{Path: rustHooksWasm(t)})
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("inspect: %v %v", err, rep.Problems)
	}
	if !reflect.DeepEqual(rep.Markers, []string{abi.MarkerV1}) {
		t.Fatalf("markers %v", rep.Markers)
	}
	for _, imp := range rep.Imports {
		if imp.Module != abi.HostModule {
			t.Fatalf("imports %s.%s", imp.Module, imp.Name)
		}
	}
	exports := map[string]bool{}
	for _, e := range rep.Exports {
		exports[e.Name] = true
	}
	want := []string{abi.MarkerV1, abi.ExportAlloc, abi.ExportDescribe, abi.ExportCallTool, abi.ExportDestroy}
	for _, h := range allHooks {
		want = append(want, "morph_"+h)
	}
	for _, name := range want {
		if !exports[name] {
			t.Errorf("missing export %s", name)
		}
	}
	if len(rep.Exports) != len(want) {
		t.Errorf("%d exports, want %d: %+v", len(rep.Exports), len(want), rep.Exports)
	}
}

func TestRustHooksEngineHooksAndTools(t *testing.T) {
	l, _ := rustHooksLoader(t)
	ctx := context.Background()
	// A value longer than the PDK's first 256-byte buffer: config_get is
	// called again with a buffer that fits.
	long := strings.Repeat("Say which tool gave each number. ", 20)
	p := load(t, l, Config{Path: rustHooksWasm(t), Values: map[string]string{"rule": long}})

	// Unknown input fields are accepted (ABI v1 only adds fields).
	raw, err := p.Call(ctx, abi.ExportBuildPrompt, []byte(`{"task":"t","default_prompt":"D","tools":null,"added_later":{"x":[1,2]}}`))
	if err != nil || string(raw) != `{"system_prompt":"D\n## Rust house rules (from rust-hooks plugin)\n- `+long+`\n"}` {
		t.Fatalf("build_prompt = %.200s, %v", raw, err)
	}
	params, err := invoke[abi.ParamsOutput](ctx, p, abi.ExportBuildParams, abi.ParamsInput{Task: "t", Options: abi.RunOptions{MaxSteps: 3}})
	if err != nil || !reflect.DeepEqual(params.Parameters, map[string]any{"temperature": 0.3, "max_tokens": float64(400)}) {
		t.Fatalf("build_params = %v, %v", params.Parameters, err)
	}
	// No config: the default rule. Empty input: the zero payload.
	p2 := load(t, l, Config{Path: rustHooksWasm(t)})
	prompt, err := invoke[abi.PromptOutput](ctx, p2, abi.ExportBuildPrompt, abi.PromptInput{DefaultPrompt: "D"})
	if err != nil || prompt.SystemPrompt != "D\n## Rust house rules (from rust-hooks plugin)\n- Give every number with its unit, and say which tool produced it.\n" {
		t.Fatalf("build_prompt without config = %q, %v", prompt.SystemPrompt, err)
	}
	if raw, err := p2.Call(ctx, abi.ExportBuildPrompt, nil); err != nil || !strings.HasPrefix(string(raw), `{"system_prompt":"\n## Rust house rules`) {
		t.Fatalf("build_prompt of empty input = %s, %v", raw, err)
	}

	tools := map[string]engine.Tool{}
	for _, tool := range p.engineTools() {
		tools[tool.Name()] = tool
	}
	out, err := tools["reverse"].Execute(ctx, map[string]any{"text": "héllo, wörld"})
	if err != nil || out != "dlröw ,olléh" {
		t.Fatalf("reverse = %q, %v", out, err)
	}
	out, err = tools["char_stats"].Execute(ctx, map[string]any{"text": "Hé 42!\n"})
	if err != nil || out != `{"chars":7,"bytes":8,"letters":2,"uppercase":1,"lowercase":1,"digits":2,"whitespace":2,"other":1}` {
		t.Fatalf("char_stats = %q, %v", out, err)
	}
	// Guest-reported errors: the instance stays in service.
	_, err = tools["reverse"].Execute(ctx, map[string]any{"text": strings.Repeat("x", 10001)})
	checkErr(t, "reverse of a long text", err, ErrGuest, "the text has 10001 characters; reverse takes at most 10000")
	expectGuestErrors(t, p, 1,
		guestErrCase{abi.ExportCallTool, `{"tool":"reverse","params":{"txt":"x"}}`, "reverse: invalid params: missing field `text`"},
		guestErrCase{abi.ExportBuildPrompt, `{"task":`, "build_prompt: invalid input"})
}

func TestRustHooksMiddleware(t *testing.T) {
	l, logs := rustHooksLoader(t)
	ctx := context.Background()
	p := load(t, l, Config{Name: "rust-mw", Path: rustHooksWasm(t), Values: map[string]string{"deny_tools": "calc, rm"}})
	f := funcs(t, p)

	// The audit log: observing hooks answer nothing and log one line each.
	usage := abi.Usage{InputTokens: 20, OutputTokens: 10, Cost: 0.5}
	for name, err := range map[string]error{
		"on_turn_start":  f.TurnStart(ctx, abi.TurnStart{SessionID: "s1", Turn: 1, Input: "use sk-abcdefghijklmnop1234 please"}),
		"on_action":      f.Action(ctx, abi.Action{SessionID: "s1", Turn: 1, Step: 1, Tool: "reverse", Input: map[string]any{"text": "a b"}}),
		"on_observation": f.Observation(ctx, abi.Observation{SessionID: "s1", Turn: 1, Step: 1, Tool: "reverse", Observation: "b a"}),
		"on_final":       f.Final(ctx, abi.TurnEnd{SessionID: "s1", Turn: 1, Step: 2, Status: abi.StatusFinal, Final: `{"output":2}`, TurnUsage: usage}),
		"after_run": f.AfterRun(ctx, abi.AfterRunInput{SessionID: "s1", Turn: 1, Status: abi.StatusFinal, Steps: 2, Usage: usage,
			Final: &abi.Final{Thought: "t", Output: map[string]any{"n": 2}}}),
	} {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, want := range []string{
		`rust-audit: turn 1 start session s1 input \"use [redacted] please\"`,
		"rust-audit: turn 1 action reverse step 1 params [text]",
		"rust-audit: turn 1 observation reverse step 1 ok, 3 bytes",
		"rust-audit: turn 1 final final after 2 steps, 30 tokens",
		`rust-audit: turn 1 after_run final in 2 steps, 30 tokens, $0.500000, output {\"n\":2}`,
	} {
		if n := len(linesWith(logs.String(), want, "plugin=rust-mw", "level=INFO")); n != 1 {
			t.Fatalf("%d log lines with %q, want 1; log:\n%s", n, want, logs.String())
		}
	}

	// before_run narrows nothing and, without prompt_marker, changes nothing.
	br, err := f.BeforeRun(ctx, abi.BeforeRunInput{SessionID: "s1", Turn: 1, SystemPrompt: "P", Tools: []string{"calc", "reverse"}})
	checkBeforeRun(t, "before_run", br, err, "") // the zero output
	if n := len(linesWith(logs.String(), "rust-audit: turn 1 before_run, 2 tools offered (calc, reverse), model default")); n != 1 {
		t.Fatalf("before_run log:\n%s", logs.String())
	}
	pm := load(t, l, Config{Name: "rust-marker", Path: rustHooksWasm(t), Values: map[string]string{"prompt_marker": "(audited)"}})
	br, err = funcs(t, pm).BeforeRun(ctx, abi.BeforeRunInput{Turn: 1, SystemPrompt: "P", Tools: []string{"calc"}})
	checkBeforeRun(t, "before_run with a marker", br, err, "P\n(audited)\n")

	// The guard: the denied tools, and calls that pass unchanged.
	for _, tool := range []string{"calc", "rm"} {
		deny, err := f.BeforeToolCall(ctx, abi.BeforeToolCallInput{Turn: 1, Step: 3, Tool: tool, Input: map[string]any{"expression": "1"}})
		checkBeforeToolCall(t, "before_tool_call "+tool, deny, err, true, "tool "+tool+" is denied by policy (rust-hooks deny_tools)")
	}
	pass, err := f.BeforeToolCall(ctx, abi.BeforeToolCallInput{Tool: "reverse", Input: map[string]any{"text": "a"}})
	checkBeforeToolCall(t, "before_tool_call reverse", pass, err, false, "") // the zero output

	// Redaction: the output is rewritten, failed ones included; a clean one
	// is left unchanged (nil).
	red, err := f.AfterToolCall(ctx, abi.AfterToolCallInput{Turn: 1, Step: 2, Tool: "reverse",
		Output: "error: key sk-proj-abcdefghijklmnop_123 and sk-abcdefghijklmnop1234.", IsError: true})
	checkRedacted(t, "after_tool_call", red, err, "error: key [redacted] and [redacted].")
	red, err = f.AfterToolCall(ctx, abi.AfterToolCallInput{Tool: "reverse", Output: "task-abcdefghijklmnopqrst"})
	if err != nil || red.Output != nil {
		t.Fatalf("after_tool_call on a clean output = %+v, %v", red, err)
	}
	checkOneInstance(t, p, 0)
}

// checkBeforeRun checks before_run's answer, named what: no error, the
// system prompt prompt (empty: unchanged) and the tools unchanged.
func checkBeforeRun(t *testing.T, what string, got abi.BeforeRunOutput, err error, prompt string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got.SystemPrompt != prompt {
		t.Errorf("%s: SystemPrompt = %q, want %q", what, got.SystemPrompt, prompt)
	}
	if got.Tools != nil {
		t.Errorf("%s: Tools = %q, want none (unchanged)", what, got.Tools)
	}
}

// rustHooksModel first calls reverse, then answers text that is no protocol
// object until the engine gives up, so the forced conclusion fails and the
// fallback final hook runs.
type rustHooksModel struct {
	mu   sync.Mutex
	reqs []llm.Request
}

func (m *rustHooksModel) Chat(_ context.Context, req llm.Request) (llm.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	if len(m.reqs) == 1 {
		return llm.Result{Text: `{"type":"tool_call","tool_call":{"thought":"decode","tool_name":"reverse","tool_params":{"text":"!olleh"}}}`}, nil
	}
	return llm.Result{Text: "Let me think about that some more."}, nil
}

// A run that cannot conclude: the plugin builds the prompt and parameters,
// serves the tool, counts its success and gives the fallback final; every
// hook call succeeds, on one instance.
func TestRustHooksEngineRun(t *testing.T) {
	l, logs := rustHooksLoader(t)
	p := load(t, l, Config{Path: rustHooksWasm(t)})
	reg := engine.NewRegistry()
	for _, tool := range p.engineTools() {
		reg.Register(tool)
	}
	var mu sync.Mutex
	called := map[string]int{}
	var warnings []string
	opts := append(p.hookOptions(), engine.WithMiddleware(p.middleware()), engine.WithEventHandler(func(ev engine.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch ev.Kind {
		case engine.EventHook:
			if ev.Outcome != engine.OutcomeOK {
				warnings = append(warnings, ev.Hook+": "+ev.Outcome)
			}
			called[ev.Hook]++
		case engine.EventWarning:
			warnings = append(warnings, ev.Message)
		}
	}))
	model := &rustHooksModel{}
	final, rc, err := engine.New(model, reg, opts...).Run(context.Background(), "Decode the note.", engine.RunOptions{MaxSteps: 2})
	if err != nil || final == nil {
		t.Fatalf("run: final %+v, err %v", final, err)
	}
	sys := model.reqs[0].Messages[0]
	if !strings.Contains(sys.Content, "- reverse: ") || !strings.HasSuffix(sys.Content, "\n## Rust house rules (from rust-hooks plugin)\n- Give every number with its unit, and say which tool produced it.\n") {
		t.Fatalf("system prompt:\n%s", sys.Content)
	}
	for i, req := range model.reqs {
		if !reflect.DeepEqual(req.Parameters, map[string]any{"temperature": 0.3, "max_tokens": float64(400)}) {
			t.Fatalf("request %d parameters %v", i, req.Parameters)
		}
	}
	if len(rc.Steps) == 0 {
		t.Fatal("no steps")
	}
	if step := rc.Steps[0]; step.Action != "reverse" {
		t.Errorf("first step's Action = %q, want reverse", step.Action)
	}
	if step := rc.Steps[0]; step.Observation != "hello!" {
		t.Errorf("first step's Observation = %q, want hello!", step.Observation)
	}
	if rc.StopReason != engine.StopFallback {
		t.Fatalf("stop reason %q, warnings %q", rc.StopReason, warnings)
	}
	out, ok := final.Output.(map[string]any)
	if !ok {
		t.Fatalf("final output %#v, want a JSON object", final.Output)
	}
	if out["status"] != "incomplete" {
		t.Errorf("final output's status = %#v, want incomplete", out["status"])
	}
	if out["tool_successes"] != float64(1) {
		t.Errorf("final output's tool_successes = %#v, want 1", out["tool_successes"])
	}
	if want := map[string]any{"reverse": float64(1)}; !reflect.DeepEqual(out["by_tool"], want) {
		t.Errorf("final output's by_tool = %#v, want %#v", out["by_tool"], want)
	}
	for _, h := range allHooks {
		if called[h] == 0 && h != abi.HookBeforeToolCall && h != abi.HookAfterToolCall {
			t.Errorf("hook %s was not called: %v", h, called)
		}
	}
	if called[abi.HookBeforeToolCall] != 1 || called[abi.HookAfterToolCall] != 1 {
		t.Errorf("tool-call hooks %v", called)
	}
	for _, w := range warnings {
		if strings.Contains(w, "hook") {
			t.Errorf("a plugin hook failed: %q", warnings)
		}
	}
	if n := len(linesWith(logs.String(), "rust-audit: turn 1 final fallback after")); n != 1 {
		t.Errorf("on_final log:\n%s", logs.String())
	}
	checkOneInstance(t, p, 0)
}

// morph_destroy runs on close, once per idle instance, with the state the
// instance kept.
func TestRustHooksDestroy(t *testing.T) {
	l, logs := rustHooksLoader(t)
	ctx := context.Background()
	p := load(t, l, Config{Name: "rust-destroy", Path: rustHooksWasm(t)})
	for range 2 {
		if _, err := invoke[json.RawMessage](ctx, p, abi.ExportOnToolSuccess, abi.ToolSuccessInput{Tool: "reverse"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := linesWith(logs.String(), "rust-hooks: instance closed after 2 tool successes", "plugin=rust-destroy", "level=DEBUG"); len(got) != 1 {
		t.Fatalf("%d destroy lines, want 1:\n%s", len(got), logs.String())
	}
}
