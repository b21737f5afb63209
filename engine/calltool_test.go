package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/builtin"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm/scripted"
)

// TestCallToolHonoursMiddleware: a tool called from outside a turn (a
// pipeline's tool node) meets the same before_tool_call and after_tool_call
// middleware, and the same offered tools, as a model's call.
func TestCallToolHonoursMiddleware(t *testing.T) {
	reg := engine.NewRegistry()
	calc, _ := builtin.Lookup(builtin.CalcName)
	reg.Register(calc)
	mw := &engine.Funcs{ID: "guard",
		BeforeToolCall: func(_ context.Context, in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
			if in.Input["expression"] == "6 * 9" {
				return abi.BeforeToolCallOutput{Deny: true, Reason: "no sixes"}, nil
			}
			return abi.BeforeToolCallOutput{}, nil
		},
		AfterToolCall: func(_ context.Context, in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
			out := "[redacted] " + in.Output
			return abi.AfterToolCallOutput{Output: &out}, nil
		},
	}
	e := engine.New(scripted.New(nil), reg, engine.WithMiddleware(mw))
	ctx := context.Background()
	out, err := e.CallTool(ctx, "s", "calc", map[string]any{"expression": "6 * 7"}, engine.RunOptions{})
	if err != nil {
		t.Fatalf("allowed call: %v", err)
	}
	if !strings.HasPrefix(out, "[redacted] ") {
		t.Errorf("allowed call: %q, want the middleware's %q first", out, "[redacted] ")
	}
	if !strings.Contains(out, "42") {
		t.Errorf("allowed call: %q, want the tool's 42", out)
	}
	_, err = e.CallTool(ctx, "s", "calc", map[string]any{"expression": "6 * 9"}, engine.RunOptions{})
	var tce *engine.ToolCallError
	if !errors.As(err, &tce) || !strings.Contains(tce.Message, "no sixes") {
		t.Fatalf("denied call: %v", err)
	}
	if _, err := e.CallTool(ctx, "s", "calc", map[string]any{"expression": "1"}, engine.RunOptions{Tools: []string{}}); !errors.As(err, &tce) || !strings.Contains(tce.Message, "not available") {
		t.Fatalf("a tool the run does not offer: %v", err)
	}
	if _, err := e.CallTool(ctx, "s", "calc", map[string]any{"expr": "1"}, engine.RunOptions{}); !errors.As(err, &tce) {
		t.Fatalf("invalid parameters: %v", err)
	}
}
