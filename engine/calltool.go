package engine

import (
	"context"
	"fmt"
	"time"
)

// ToolCallError is CallTool's error when the tool did not run or failed:
// not offered, refused in plan mode, denied by a before_tool_call hook,
// invalid parameters, or the tool's own error. Message is what the model
// would have been told, after the after_tool_call hooks.
type ToolCallError struct {
	Tool    string
	Message string
}

// Error names the tool and says why.
func (e *ToolCallError) Error() string { return fmt.Sprintf("tool %s: %s", e.Tool, e.Message) }

// CallTool runs one tool as a model's call of it runs inside a turn, for a
// caller other than the model (a pipeline's tool node): the run's tools
// (opts.Tools) and mode, the before_tool_call middleware, which may deny
// or rewrite the call, schema validation, the after_tool_call middleware,
// which may rewrite the output, and the tool-success hook. So a policy a
// plugin enforces on tools (a deny list, redaction, plan mode) holds
// whoever calls. The output is capped as an observation is. sessionID names
// the call in the hooks' payloads.
func (e *Engine) CallTool(ctx context.Context, sessionID, name string, params map[string]any, opts RunOptions) (string, error) {
	if err := e.begin(ctx); err != nil {
		return "", err
	}
	defer e.end()
	rc := &Context{Task: "tool " + name, SessionID: sessionID, Turn: 1, Metrics: Metrics{StartTime: time.Now()}}
	r := e.newRun(ctx, rc, opts)
	if err := r.checkMode(); err != nil {
		return "", err
	}
	if err := r.restrict(e.reg); err != nil {
		return "", err
	}
	out, _, errText, _ := e.callTool(r, 1, &ToolCall{ToolName: name, ToolParams: params})
	if errText != "" {
		return "", &ToolCallError{Tool: name, Message: out}
	}
	return out, nil
}
