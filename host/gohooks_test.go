package host

import (
	"context"
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

// The example plugin examples/go-hooks, written with the Go PDK (guests/go/pdk),
// through the real host and a real engine run, in both of its builds: by
// standard Go and by TinyGo 0.34, each a WASI reactor from the same sources.
// Every go-hooks test runs once per build (forEachGoHooksBuild); what only
// the TinyGo build shows is in tinygo_test.go.

// goHooksBuild is one build of the example plugin, with the loader every test
// of that build shares: a standard Go guest takes about a second to compile,
// and over ten under -race, so the tests share the loader's in-memory
// compilation cache. It lives as long as the test process. Each build has its
// own loader and log, so that the log lines a test counts come from one build.
// The cache is testenv.CompileCache: under make test, conform's tests find
// go-hooks.wasm compiled.
type goHooksBuild struct {
	name   string // the subtest's name
	file   string // the module, in examples/go-hooks
	target string // the make target that builds it
	tinyGo bool   // built by TinyGo: skipped when MORPH_SKIP_TINYGO=1; a panic traps (tinygo_test.go)

	once sync.Once
	l    *Loader
	logs *syncBuffer
	err  error
}

var (
	goHooksStd    = &goHooksBuild{name: "go", file: "go-hooks.wasm", target: "examples"}
	goHooksTinyGo = &goHooksBuild{name: "tinygo", file: "go-hooks-tinygo.wasm", target: "tinygo-examples", tinyGo: true}

	// goHooksBuilds are the builds every go-hooks test runs on.
	goHooksBuilds = []*goHooksBuild{goHooksStd, goHooksTinyGo}
)

// wasm returns the path of the build. It skips the TinyGo build only when
// MORPH_SKIP_TINYGO=1; a missing file fails the test.
func (b *goHooksBuild) wasm(t testing.TB) string {
	t.Helper()
	if b.tinyGo {
		testenv.TinyGo(t, "the TinyGo build of go-hooks ("+b.file+")")
	}
	return testenv.Built(t, filepath.Join("..", "examples", "go-hooks", b.file), b.target)
}

// loader returns the build's shared loader and the log its plugins write to.
func (b *goHooksBuild) loader(t testing.TB) (*Loader, *syncBuffer) {
	t.Helper()
	b.once.Do(func() {
		b.logs = &syncBuffer{}
		b.l, b.err = NewLoader(LoaderOptions{CacheDir: testenv.CompileCache(),
			Logger: slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.l, b.logs
}

// goHooks is one build of the example as a test uses it: the module's path,
// and the build's shared loader and log.
type goHooks struct {
	build *goHooksBuild
	path  string
	l     *Loader
	logs  *syncBuffer
}

// forEachGoHooksBuild runs fn in one subtest per build, named after it.
func forEachGoHooksBuild(t *testing.T, fn func(t *testing.T, g goHooks)) {
	t.Helper()
	for _, b := range goHooksBuilds {
		t.Run(b.name, func(t *testing.T) {
			g := goHooks{build: b, path: b.wasm(t)}
			g.l, g.logs = b.loader(t)
			fn(t, g)
		})
	}
}

// goHooksWasm is the path of the standard Go build, which the tests that do
// not run over both builds load.
func goHooksWasm(t testing.TB) string { return goHooksStd.wasm(t) }

// goHooksLoader is the standard Go build's shared loader and log.
func goHooksLoader(t *testing.T) (*Loader, *syncBuffer) { return goHooksStd.loader(t) }

// syncBuffer is a log sink the test reads while others write to it.
type syncBuffer = testenv.Buffer

// The manifest, the tools' schemas, and hook selection.
func TestGoHooksManifest(t *testing.T) {
	forEachGoHooksBuild(t, testGoHooksManifest)
}

func testGoHooksManifest(t *testing.T, g goHooks) {
	p := load(t, g.l, Config{Path: g.path})
	m := p.Manifest()
	wantHooks := []string{abi.HookBuildPrompt, abi.HookBuildParams, abi.HookOnToolSuccess, abi.HookFallbackFinal,
		abi.HookOnTurnStart, abi.HookOnAction, abi.HookOnObservation, abi.HookOnFinal, abi.HookBeforeToolCall, abi.HookAfterToolCall}
	if p.Name() != "go-hooks" {
		t.Errorf("Name = %q, want go-hooks", p.Name())
	}
	if m.Version != "0.1.0" {
		t.Errorf("manifest Version = %q, want 0.1.0", m.Version)
	}
	if m.ABIVersion != abi.Version {
		t.Errorf("manifest ABIVersion = %d, want %d", m.ABIVersion, abi.Version)
	}
	if !reflect.DeepEqual(m.Hooks, wantHooks) {
		t.Errorf("manifest Hooks = %q, want %q", m.Hooks, wantHooks)
	}
	if !reflect.DeepEqual(m.Capabilities, []string{"log", "config"}) {
		t.Fatalf("capabilities %v", m.Capabilities)
	}
	if got := p.Hooks(); len(got) != len(wantHooks) || len(p.hookOptions()) != 4 {
		t.Fatalf("enabled hooks %v, %d options", got, len(p.hookOptions()))
	}
	var names []string
	reg := engine.NewRegistry()
	for _, tool := range p.engineTools() {
		names = append(names, tool.Name())
		reg.Register(tool)
		if tool.Description() == "" {
			t.Errorf("tool %s has no description", tool.Name())
		}
		for _, want := range []string{`"additionalProperties":false`, `"required"`} {
			if !strings.Contains(tool.ParameterSchema(), want) {
				t.Errorf("tool %s: schema %s, want it to say %s", tool.Name(), tool.ParameterSchema(), want)
			}
		}
	}
	if !reflect.DeepEqual(names, []string{"word_count", "json_query"}) {
		t.Fatalf("tools %v", names)
	}
	if err := reg.Check(); err != nil {
		t.Fatalf("the declared schemas do not compile: %v", err)
	}
	if err := reg.Validate("word_count", map[string]any{"text": "a", "extra": 1}); !errors.Is(err, engine.ErrInvalidParams) {
		t.Fatalf("an extra field passed word_count's schema: %v", err)
	}
	if err := reg.Validate("json_query", map[string]any{"json": "{}"}); !errors.Is(err, engine.ErrInvalidParams) {
		t.Fatalf("a missing path passed json_query's schema: %v", err)
	}
	// Only the configured hooks are enabled.
	p2 := load(t, g.l, Config{Path: g.path, Hooks: []string{abi.HookFallbackFinal}})
	if len(p2.hookOptions()) != 1 {
		t.Fatalf("%d options for one enabled hook", len(p2.hookOptions()))
	}
}

// goHooksModel first calls word_count, then answers text that is no protocol
// object until the engine gives up, so the forced conclusion fails and the
// fallback final hook runs.
type goHooksModel struct {
	mu   sync.Mutex
	reqs []llm.Request
}

const goHooksText = "the quick brown fox\njumps"

func (m *goHooksModel) Chat(_ context.Context, req llm.Request) (llm.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	if len(m.reqs) == 1 {
		return llm.Result{Text: `{"type":"tool_call","tool_call":{"thought":"count first","tool_name":"word_count","tool_params":{"text":"` +
			strings.ReplaceAll(goHooksText, "\n", `\n`) + `"}}}`}, nil
	}
	return llm.Result{Text: "Hmm, let me think about that some more."}, nil
}

// The four engine hooks and a guest tool in a real engine run with a fake
// model.
func TestGoHooksEngineRun(t *testing.T) {
	forEachGoHooksBuild(t, testGoHooksEngineRun)
}

func testGoHooksEngineRun(t *testing.T, g goHooks) {
	const style = "Answer like a ship's captain."
	p := load(t, g.l, Config{Path: g.path, Values: map[string]string{"style": style}})
	reg := engine.NewRegistry()
	for _, tool := range p.engineTools() {
		reg.Register(tool)
	}
	var warnings []string
	opts := append(p.hookOptions(), engine.WithEventHandler(func(ev engine.Event) {
		if ev.Kind == engine.EventWarning {
			warnings = append(warnings, ev.Message)
		}
	}))
	model := &goHooksModel{}
	final, rc, err := engine.New(model, reg, opts...).Run(context.Background(), "How many words?",
		engine.RunOptions{Parameters: map[string]any{"top_p": 0.9}})
	if err != nil || final == nil {
		t.Fatalf("run: final %+v, err %v", final, err)
	}

	// build_prompt: the default prompt plus the plugin's section, with the
	// style read through config_get.
	sys := model.reqs[0].Messages[0]
	if sys.Role != llm.RoleSystem {
		t.Errorf("the first message's Role = %q, want %q", sys.Role, llm.RoleSystem)
	}
	if !strings.HasPrefix(sys.Content, engine.DefaultIdentity) {
		t.Errorf("system prompt does not start with the default identity:\n%s", sys.Content)
	}
	if !strings.Contains(sys.Content, "- word_count: ") {
		t.Errorf("system prompt does not list word_count:\n%s", sys.Content)
	}
	if end := "\n## House style (from go-hooks plugin)\n- " + style + "\n"; !strings.HasSuffix(sys.Content, end) {
		t.Errorf("system prompt does not end with the plugin's section %q:\n%s", end, sys.Content)
	}
	if rc.SystemPrompt != sys.Content {
		t.Errorf("the run's SystemPrompt %q, want the one sent, %q", rc.SystemPrompt, sys.Content)
	}
	// build_params: its keys over the run's base parameters, in every request.
	want := map[string]any{"temperature": 0.2, "max_tokens": float64(512), "top_p": 0.9}
	for i, req := range model.reqs {
		if !reflect.DeepEqual(req.Parameters, want) {
			t.Fatalf("request %d parameters %v, want %v", i, req.Parameters, want)
		}
	}
	// The tool ran in the guest and its result is the observation.
	if len(rc.Steps) == 0 {
		t.Fatal("no steps")
	}
	if step := rc.Steps[0]; step.Action != "word_count" {
		t.Errorf("first step's Action = %q, want word_count", step.Action)
	}
	if step := rc.Steps[0]; step.Error != "" {
		t.Errorf("first step's Error = %q, want none", step.Error)
	}
	if step, want := rc.Steps[0], `{"words":5,"lines":2,"chars":25}`; step.Observation != want {
		t.Errorf("first step's Observation = %q, want %q", step.Observation, want)
	}
	if !strings.Contains(model.reqs[1].Messages[len(model.reqs[1].Messages)-1].Content, `{"words":5,"lines":2,"chars":25}`) {
		t.Fatal("the model did not see the tool result")
	}
	// on_tool_success: logged through the host's log function, under the plugin's name.
	if out := g.logs.String(); !strings.Contains(out, "tool word_count succeeded (1 so far)") || !strings.Contains(out, "plugin=go-hooks") {
		t.Fatalf("plugin log:\n%s", out)
	}
	// fallback_final: the plugin's final, with the count kept in guest memory.
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
	if want := map[string]any{"word_count": float64(1)}; !reflect.DeepEqual(out["by_tool"], want) {
		t.Errorf("final output's by_tool = %#v, want %#v", out["by_tool"], want)
	}
	if out["steps"] != float64(len(rc.Steps)) {
		t.Errorf("final output's steps = %#v, want %d", out["steps"], len(rc.Steps))
	}
	if reason, _ := out["reason"].(string); !strings.Contains(reason, "the forced conclusion did not parse") {
		t.Errorf("final output's reason = %#v, want it to say the forced conclusion did not parse", out["reason"])
	}
	if !strings.Contains(string(rc.RawFinalAnswer), `"tool_successes":1`) {
		t.Fatalf("raw final %s", rc.RawFinalAnswer)
	}
	for _, w := range warnings {
		if strings.Contains(w, "hook failed") {
			t.Fatalf("a plugin hook failed: %q", warnings)
		}
	}
	checkOneInstance(t, p, 0)
}

// Both tools, and guest-reported errors that leave the instance in service.
func TestGoHooksTools(t *testing.T) {
	forEachGoHooksBuild(t, testGoHooksTools)
}

func testGoHooksTools(t *testing.T, g goHooks) {
	p := load(t, g.l, Config{Path: g.path})
	tools := map[string]engine.Tool{}
	for _, tool := range p.engineTools() {
		tools[tool.Name()] = tool
	}
	ctx := context.Background()
	out, err := tools["word_count"].Execute(ctx, map[string]any{"text": "héllo wörld\n"})
	if err != nil || out != `{"words":2,"lines":1,"chars":12}` {
		t.Fatalf("word_count = %q, %v", out, err)
	}
	out, err = tools["json_query"].Execute(ctx, map[string]any{"json": `{"items":[{"name":"a"},{"name":"b<c"}]}`, "path": "items[-1].name"})
	if err != nil || out != `"b<c"` {
		t.Fatalf("json_query = %q, %v", out, err)
	}
	// Guest-reported errors: the tool rejects the input, the instance stays.
	for params, want := range map[[2]string]string{
		{`{"items":`, "items"}:        "invalid JSON document",
		{`{"items":[1]}`, "items[3]"}: "at $.items: index 3 out of range (length 1)",
	} {
		_, err = tools["json_query"].Execute(ctx, map[string]any{"json": params[0], "path": params[1]})
		// The text (what the model reads) is the plugin's message; the
		// detail, the plugin's name included, is in the *Error under it.
		checkPluginErr(t, "json_query "+strings.Join(params[:], " "), err, ErrGuest, "go-hooks", want)
	}
	expectGuestErrors(t, p, 2, guestErrCase{abi.ExportBuildPrompt, `{"task":`, "invalid input"})
}

// guestErrCase is a raw call a guest must refuse with a guest-reported error.
type guestErrCase struct{ export, input, want string }

// expectGuestErrors makes the calls every PDK must refuse (an unknown tool,
// plus extra), then checks that all the plugin's faults so far, earlier
// ones included, were guest-reported errors that left its one instance in
// service.
func expectGuestErrors(t *testing.T, p *Plugin, earlier int, extra ...guestErrCase) {
	t.Helper()
	calls := append([]guestErrCase{{abi.ExportCallTool, `{"tool":"nope","params":{}}`, `unknown tool "nope"`}}, extra...)
	for _, c := range calls {
		_, err := p.Call(context.Background(), c.export, []byte(c.input))
		checkErr(t, c.export+" "+c.input, err, ErrGuest, c.want)
	}
	checkOneInstance(t, p, uint64(earlier+len(calls))) // guest errors leave the instance in service
}

// Config values through config_get, a long one included, and unknown input
// fields.
func TestGoHooksConfigAndInput(t *testing.T) {
	forEachGoHooksBuild(t, testGoHooksConfigAndInput)
}

func testGoHooksConfigAndInput(t *testing.T, g goHooks) {
	ctx := context.Background()
	// A value longer than the PDK's first buffer: config_get is called again
	// with a buffer that fits.
	long := strings.Repeat("Say it plainly. ", 64)
	p := load(t, g.l, Config{Path: g.path, Values: map[string]string{"style": long, "temperature": "0.7", "max_tokens": "64"}})
	// Unknown input fields are accepted (ABI v1 only adds fields).
	raw, err := p.Call(ctx, abi.ExportBuildPrompt, []byte(`{"task":"t","default_prompt":"D","tools":[],"added_later":{"x":[1,2]}}`))
	if err != nil || string(raw) != `{"system_prompt":"D\n## House style (from go-hooks plugin)\n- `+long+`\n"}` {
		t.Fatalf("build_prompt = %.200s, %v", raw, err)
	}
	params, err := invoke[abi.ParamsOutput](ctx, p, abi.ExportBuildParams, abi.ParamsInput{Task: "t"})
	if err != nil || !reflect.DeepEqual(params.Parameters, map[string]any{"temperature": 0.7, "max_tokens": float64(64)}) {
		t.Fatalf("build_params = %v, %v", params.Parameters, err)
	}
	// An unusable value: the default, and a warning in the plugin's log.
	p2 := load(t, g.l, Config{Path: g.path, Values: map[string]string{"max_tokens": "lots"}})
	params, err = invoke[abi.ParamsOutput](ctx, p2, abi.ExportBuildParams, abi.ParamsInput{Task: "t"})
	if err != nil {
		t.Fatalf("build_params with a bad value: %v", err)
	}
	if got := params.Parameters["max_tokens"]; got != float64(512) {
		t.Errorf("build_params with a bad value: max_tokens = %v, want the default, 512", got)
	}
	if got := params.Parameters["temperature"]; got != 0.2 {
		t.Errorf("build_params with a bad value: temperature = %v, want 0.2", got)
	}
	if out := g.logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, `config max_tokens=\"lots\" is not a positive integer; using 512`) {
		t.Fatalf("plugin log:\n%s", out)
	}
	// No config at all: the default style.
	p3 := load(t, g.l, Config{Path: g.path})
	prompt, err := invoke[abi.PromptOutput](ctx, p3, abi.ExportBuildPrompt, abi.PromptInput{DefaultPrompt: "D"})
	if err != nil || !strings.HasPrefix(prompt.SystemPrompt, "D\n## House style (from go-hooks plugin)\n- Keep the final answer short") {
		t.Fatalf("build_prompt without config = %q, %v", prompt.SystemPrompt, err)
	}
}
