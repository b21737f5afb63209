package host_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/llm"
)

// replies replays fixed model replies.
type replies []string

func (r *replies) Chat(context.Context, llm.Request) (llm.Result, error) {
	if len(*r) == 0 {
		return llm.Result{}, errors.New("script exhausted")
	}
	text := (*r)[0]
	*r = (*r)[1:]
	return llm.Result{Text: text}, nil
}

// shell is the tool the guard denies; it counts its calls.
type shell struct{ calls int }

func (*shell) Name() string        { return "shell" }
func (*shell) Description() string { return "runs a command" }
func (*shell) ParameterSchema() string {
	return `{"type":"object","properties":{"cmd":{"type":"string"}}}`
}
func (s *shell) Execute(context.Context, map[string]any) (string, error) {
	s.calls++
	return "ran", nil
}

// The README's embedding recipe (section "WebAssembly plugins", compiled by
// internal/doccheck), followed exactly, enforces the plugin's
// middleware: a before_tool_call guard denies the call, the tool never runs,
// and the hook events, of middleware and of engine hooks (build_prompt),
// carry the plugin's name, not engine.SourceHost.
// (The old recipe, engine.New(client, reg, p.hookOptions()...) and the tools of
// p.engineTools(), dropped the middleware: the shell tool ran.)
func TestEmbeddingRecipeEnforcesMiddleware(t *testing.T) {
	t.Run("Loader.Extender", func(t *testing.T) { testEmbeddingRecipe(t, false) })
	t.Run("Plugin.Extender", func(t *testing.T) { testEmbeddingRecipe(t, true) })
}

// testEmbeddingRecipe runs the recipe with Loader.Extender, or with
// Loader.Load then Plugin.Extender (loaded).
func testEmbeddingRecipe(t *testing.T, loaded bool) {
	ctx := context.Background()
	guardWasm := testenv.Built(t, filepath.Join("..", "guests", "testdata", "mw_flaky.wasm"), "fixtures")
	promptWasm := testenv.Built(t, filepath.Join("..", "guests", "testdata", "minimal.wasm"), "fixtures")
	client := &replies{
		`{"type":"tool_call","tool_call":{"tool_name":"shell","tool_params":{"cmd":"rm -rf /"}}}`,
		`{"type":"final","final":{"output":"done"}}`,
	}
	sh := &shell{}
	reg := engine.NewRegistry()
	reg.Register(sh)
	var mu sync.Mutex
	var hookEvents []engine.Event

	// The recipe, with the fixture's config making it a deny guard.
	l, err := host.NewLoader(host.LoaderOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	guardCfg := host.Config{Name: "guard", Path: guardWasm,
		Hooks:  []string{abi.HookBeforeToolCall},
		Values: map[string]string{"before_tool_call": `{"deny":true,"reason":"shell is not allowed here"}`},
	}
	promptCfg := host.Config{Path: promptWasm} // an engine hook: build_prompt
	guard := l.Extender(guardCfg, engine.MiddlewareConfig{Policy: engine.FailClosed})
	prompt := l.Extender(promptCfg, engine.MiddlewareConfig{})
	if loaded {
		g, err := l.Load(ctx, guardCfg)
		if err != nil {
			t.Fatal(err)
		}
		promptCfg.Name = "minimal" // Loader.Extender names it after its file; Load, after its manifest
		p, err := l.Load(ctx, promptCfg)
		if err != nil {
			t.Fatal(err)
		}
		guard, prompt = g.Extender(engine.MiddlewareConfig{Policy: engine.FailClosed}), p.Extender(engine.MiddlewareConfig{})
	}
	e := engine.New(client, reg, engine.WithExtenders(guard, prompt), engine.WithEventHandler(func(ev engine.Event) {
		if ev.Kind == engine.EventHook {
			mu.Lock()
			hookEvents = append(hookEvents, ev)
			mu.Unlock()
		}
	}))
	defer e.Close(ctx)
	if err := e.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	final, rc, err := e.Run(ctx, "clean up", engine.RunOptions{MaxSteps: 5})

	if err != nil || final.Output != "done" {
		t.Fatalf("final %+v, err %v", final, err)
	}
	if sh.calls != 0 {
		t.Fatalf("the denied tool ran %d times: the plugin's middleware was dropped", sh.calls)
	}
	if obs := rc.Steps[0].Observation; !strings.HasPrefix(obs, "Tool call denied: ") || !strings.Contains(obs, "shell is not allowed here") {
		t.Fatalf("observation %q, want the guard's denial", obs)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]string{abi.HookBeforeToolCall: "guard", abi.HookBuildPrompt: "minimal"}
	seen := map[string]bool{}
	for _, ev := range hookEvents {
		seen[ev.Hook] = true
		if ev.Plugin != want[ev.Hook] {
			t.Errorf("hook event %s labelled %q, want the plugin's name %q", ev.Hook, ev.Plugin, want[ev.Hook])
		}
	}
	for hook := range want {
		if !seen[hook] {
			t.Errorf("no %s hook event: the plugin's hook never ran", hook)
		}
	}
}
