package config_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/pipeline"
)

// OpenPipeline's runner has what [pipeline] sets and the built-in stage
// handlers, and its backend refuses a node's base_url the table does not
// list, naming the key that would allow it.
func TestOpenPipeline(t *testing.T) {
	toml := "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n" +
		"[pipeline]\nallow_shell = true\nmax_tokens = 500\nendpoints = [\"http://127.0.0.1:9/v1\"]\n"
	c, err := config.Load(filepath.Join(write(t, map[string]string{"replies.json": replies, "morph.toml": toml}), "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := c.OpenPipeline(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	r := p.Runner
	if !r.AllowShell {
		t.Error("AllowShell is off; [pipeline] allow_shell = true")
	}
	if r.Limits.MaxTokens != 500 {
		t.Errorf("Limits.MaxTokens = %d, want 500", r.Limits.MaxTokens)
	}
	if got, want := r.Handlers.Types(), pipeline.DefaultHandlerRegistry().Types(); !slices.Equal(got, want) {
		t.Errorf("handler types %v, want the built-in ones %v", got, want)
	}
	backend, ok := r.Backend.(*pipeline.EngineBackend)
	if !ok {
		t.Fatalf("backend %T, want *pipeline.EngineBackend", r.Backend)
	}
	if _, err := backend.ForEndpoint(ctx, "", "http://elsewhere.invalid/v1"); err == nil || !strings.Contains(err.Error(), "[pipeline] endpoints") {
		t.Errorf("an unlisted base_url: %v; want a refusal naming [pipeline] endpoints", err)
	}
	// allow_shell puts the middleware that runs stages' tool_hooks on the
	// engine, and on an endpoint's.
	hasHooks := func(mws []engine.MiddlewareInfo) bool {
		return slices.ContainsFunc(mws, func(m engine.MiddlewareInfo) bool { return m.Funcs.ID == pipeline.ToolHooksMiddleware })
	}
	if !hasHooks(backend.Engine.Middleware()) {
		t.Errorf("allow_shell: the engine lacks %s", pipeline.ToolHooksMiddleware)
	}
	if other, err := backend.ForEndpoint(ctx, "", "http://127.0.0.1:9/v1"); err != nil || !hasHooks(other.Middleware()) {
		t.Errorf("allow_shell: the endpoint's engine lacks %s (%v)", pipeline.ToolHooksMiddleware, err)
	}
	if len((config.Pipeline{}).EngineOptions()) != 0 {
		t.Error("without allow_shell, the pipeline engine gets options")
	}
}
