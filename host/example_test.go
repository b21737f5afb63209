package host_test

import (
	"context"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/llm"
)

// The README's recipe for embedding a WebAssembly plugin (section
// "WebAssembly plugins"): one Extender gives the engine everything the
// plugin implements, its hooks, tools and middleware, under its name.
// TestEmbeddingRecipeEnforcesMiddleware runs it with a deny guard.
func ExampleLoader_Extender() {
	ctx := context.Background()
	var client llm.Client // e.g. openai.New(...)
	reg := engine.NewRegistry()

	l, err := host.NewLoader(host.LoaderOptions{})
	if err != nil {
		return
	}
	defer l.Close(ctx)
	guard := l.Extender(host.Config{Path: "guard.wasm"}, engine.MiddlewareConfig{Policy: engine.FailClosed})
	e := engine.New(client, reg, engine.WithExtenders(guard))
	defer e.Close(ctx)
	if err := e.Initialize(ctx); err != nil { // loads the plugin; an *engine.InitError names it
		return
	}
	final, rc, err := e.Run(ctx, "task", engine.RunOptions{})
	_, _, _ = final, rc, err
}
