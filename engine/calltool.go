package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/morphhost/morph/abi"
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
	res, err := e.CallToolResult(ctx, sessionID, name, params, opts)
	return res.Output, err
}

// ToolResult is what a tool call gives a caller that shows more than text
// (an MCP client): the observation, the images the model would get with
// it, and the result's other content (ResultTool).
type ToolResult struct {
	Output  string        // the observation, capped as one
	Images  []abi.Image   // as the model would get them: none unless WithImages, none after a rewrite
	Content []abi.Content // items beyond text and images: none after a rewrite
	// Structured is the result as one JSON value, when the tool gave one:
	// none after a rewrite.
	Structured json.RawMessage
}

// CallToolResult is CallTool with the rest of the result: the images a
// model that takes images (WithImages) would get with the observation,
// and the content and structured result of a ResultTool; none of them
// when after_tool_call middleware rewrote the output, which a redaction
// cannot see past.
func (e *Engine) CallToolResult(ctx context.Context, sessionID, name string, params map[string]any, opts RunOptions) (ToolResult, error) {
	if err := e.begin(ctx); err != nil {
		return ToolResult{}, err
	}
	defer e.end()
	rc := &Context{Task: "tool " + name, SessionID: sessionID, Turn: 1, Metrics: Metrics{StartTime: time.Now()}}
	r := e.newRun(ctx, rc, opts)
	if err := r.checkMode(); err != nil {
		return ToolResult{}, err
	}
	if err := r.restrict(e.reg); err != nil {
		return ToolResult{}, err
	}
	res, errText, _ := e.callTool(r, 1, &ToolCall{ToolName: name, ToolParams: params})
	if errText != "" {
		return ToolResult{}, &ToolCallError{Tool: name, Message: res.Output}
	}
	return ToolResult{Output: res.Output, Images: res.Images, Content: res.Content, Structured: res.Structured}, nil
}
