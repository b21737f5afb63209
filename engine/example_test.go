package engine_test

// The README's code, section by section ("Embedding"; "Sessions, middleware
// and the event stream"), compiled with the tests so that it cannot rot:
// change one, change the other. (The host's recipe for WebAssembly plugins
// is host's ExampleLoader_Extender; the Go PDK's guard is in guests/go/pdk.)

import (
	"context"
	"log/slog"
	"os"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm/openai"
)

// myTool is the README's host tool.
type myTool struct{}

func (myTool) Name() string        { return "lookup" }
func (myTool) Description() string { return "looks a key up" }
func (myTool) ParameterSchema() string {
	return `{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`
}
func (myTool) Execute(ctx context.Context, params map[string]any) (string, error) {
	return "value", nil
}

// README, "Embedding".
func Example_embedding() {
	ctx := context.Background()
	client, _ := openai.New(openai.Config{BaseURL: "http://localhost:8000/v1", Model: "m", APIKey: os.Getenv("KEY")})
	reg := engine.NewRegistry()
	reg.Register(myTool{}) // Name, Description, ParameterSchema (JSON Schema), Execute
	e := engine.New(client, reg,
		engine.WithPromptBuilder(func(reg *engine.Registry, task string) string { return "..." }),
		engine.WithParamsBuilder(func(o engine.RunOptions) map[string]any { return map[string]any{"temperature": 0.1} }),
		engine.WithOnToolSuccess(func(rc *engine.Context, tool string) { /* ... */ }),
		engine.WithFallbackFinal(func() *engine.Final { return &engine.Final{Output: "no answer"} }),
	)
	defer e.Close(ctx)
	final, rc, err := e.Run(ctx, "task", engine.RunOptions{MaxSteps: 10})
	// rc.RawFinalAnswer: the final payload's bytes; rc.Metrics: rounds, tokens, cost, tool calls, parse retries.
	_, _, _ = final, rc, err
}

// README, "Embedding": everything from a config file.
func Example_config() {
	ctx := context.Background()
	logger := slog.Default()
	cfg, err := config.Load("morph.toml")
	if err != nil {
		return
	}
	rt, err := cfg.Open(ctx, logger) // the client, built-in tools, [[plugins]] and discovered plugins; initialized
	if err != nil {
		return
	}
	defer rt.Close(ctx) // the engine (each plugin's destroy) and the compilation cache
	final, rc, err := rt.Engine.Run(ctx, "task", cfg.RunOptions())
	_, _, _ = final, rc, err
}

// README, "Sessions, middleware and the event stream".
type audit struct{}

func (audit) Name() string { return "audit" }
func (audit) OnFinal(ctx context.Context, ev abi.TurnEnd) error {
	slog.Info("turn done", "session", ev.SessionID, "turn", ev.Turn, "status", ev.Status, "tokens", ev.TurnUsage.TotalTokens)
	return nil
}

type guard struct{}

func (guard) Name() string { return "guard" }
func (guard) BeforeToolCall(ctx context.Context, in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
	if in.Tool == "shell" {
		return abi.BeforeToolCallOutput{Deny: true, Reason: "shell is not allowed here"}, nil
	}
	return abi.BeforeToolCallOutput{}, nil
}

func Example_sessions() {
	ctx := context.Background()
	client, _ := openai.New(openai.Config{BaseURL: "http://localhost:8000/v1", Model: "m"})
	reg := engine.NewRegistry()
	e := engine.New(client, reg, engine.WithMiddleware(audit{}),
		engine.WithMiddleware(guard{}, engine.MiddlewareConfig{Policy: engine.FailClosed}))
	s := e.NewSession("user-42")
	defer s.Close(ctx) // the plugins that keep something per session let go of it
	final, rc, err := s.RunTurn(ctx, "first question", engine.RunOptions{})
	_, _, _ = final, rc, err
}
