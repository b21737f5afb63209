package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// ErrSchema marks a tool whose parameter schema MCP cannot carry: its root
// is not a JSON object of type "object". Such a tool is not served.
var ErrSchema = errors.New("mcp: tool schema not servable")

// ErrArguments marks a call whose arguments are not a JSON object, or nest
// deeper than abi.MaxDepth. The call is a tool result with isError.
var ErrArguments = errors.New("mcp: invalid tool arguments")

// ErrTooManyCalls marks a call refused because its session already ran
// Options.MaxCallsPerSession calls. The call is a tool result with isError
// naming the limit.
var ErrTooManyCalls = errors.New("mcp: too many calls in flight in the session")

// inputSchema is a tool's parameter schema as MCP's inputSchema: the same
// schema, given "type": "object" when it has no type (morph's registry
// reads a schema without one as any object; MCP requires the type), and
// refused when its root is anything but an object schema (the SDK would
// panic).
func inputSchema(params json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(params)) == 0 {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	var root map[string]any
	if err := json.Unmarshal(params, &root); err != nil || root == nil {
		return nil, fmt.Errorf("%w: its root is not a JSON object", ErrSchema)
	}
	switch t, ok := root["type"]; {
	case !ok:
		root["type"] = "object"
		return json.Marshal(root)
	case t != "object":
		return nil, fmt.Errorf(`%w: its root's type is %s, and MCP takes only "object"`, ErrSchema, compact(t))
	}
	return params, nil
}

// compact is v's JSON, for an error message.
func compact(v any) string {
	b, _ := json.Marshal(v) // v came from json.Unmarshal
	return string(b)
}

// arguments decodes a call's arguments: none (or null) is an empty object,
// as a model's call without params is. Depth is checked before decoding,
// so a deeply nested document costs one pass over its bytes.
func arguments(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return map[string]any{}, nil
	}
	if err := abi.CheckDepth(raw, abi.MaxDepth); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrArguments, err)
	}
	var params map[string]any
	if err := json.Unmarshal(raw, &params); err != nil || params == nil {
		return nil, fmt.Errorf("%w: they must be a JSON object", ErrArguments)
	}
	return params, nil
}

// handler runs the tool called name as a model's call of it runs: with the
// arguments as its params, in the caller's engine session. Everything the
// call can come to (the tool's failure, a denial, invalid params, plan
// mode) is a result, with isError when it failed; only an engine that is
// closed is a protocol error, since no tool can run at all.
func (s *Server) handler(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		// Before the arguments are decoded: a refused call costs nothing.
		ses, ctx, done, err := s.begin(ctx, req.Session, "tool "+name)
		if err != nil {
			return failed(fmt.Sprintf("Error: tool '%s': %v", name, err)), nil
		}
		defer done()
		params, err := arguments(req.Params.Arguments)
		if err != nil {
			return failed(fmt.Sprintf("Error: tool '%s': %v", name, err)), nil
		}
		ctx = engine.WithCallNotifier(ctx, s.notifier(ctx, req.Session, name, req.Params.GetProgressToken()))
		defer s.poll(req.Extra)()
		res, err := s.eng.CallToolResult(ctx, ses.id, name, params, s.opts.Run)
		var tce *engine.ToolCallError
		switch {
		case err == nil:
			return s.result(ctx, name, res), nil
		case errors.As(err, &tce):
			return failed(tce.Message), nil
		case errors.Is(err, engine.ErrClosed):
			return nil, err
		default:
			return failed(fmt.Sprintf("Error: tool '%s': %v", name, err)), nil
		}
	}
}

// begin admits a request of ss that runs a plugin (a tool call; a
// prompt, resource or completion request) under the session's call limit,
// with ctx canceled when the session ends; done must be called once it
// has. Past the limit it is refused (ErrTooManyCalls), counted, and the
// session's first refusal logged.
func (s *Server) begin(ctx context.Context, ss *sdk.ServerSession, what string) (*session, context.Context, func(), error) {
	ses := s.session(ss, true)
	if !ses.enter(s.opts.MaxCallsPerSession) {
		s.mu.Lock()
		s.refused.Calls++
		first := !ses.refusedCall
		ses.refusedCall = true
		s.mu.Unlock()
		err := fmt.Errorf("%w: %d are running, the most a session runs at once (max_calls_per_session); retry once one has ended", ErrTooManyCalls, s.opts.MaxCallsPerSession)
		if first {
			s.log.WarnContext(ctx, "mcp: a request refused", "request", what, "session", ses.id, "error", err)
		}
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ses.ctx, cancel)
	return ses, ctx, func() { stop(); cancel(); ses.leave() }, nil
}

// result is a call's result as MCP content: the text, then the images
// (those the model would get: the engine's WithImages decides, as in a
// run), then the other content, and the structured result. An item whose
// data is not base64 is left out, with a warning: the SDK sends raw bytes,
// and an embedding host's tool may have written anything.
func (s *Server) result(ctx context.Context, tool string, res engine.ToolResult) *sdk.CallToolResult {
	content := []sdk.Content{&sdk.TextContent{Text: res.Output}}
	decode := func(what string, i int, b64 string) ([]byte, bool) {
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			s.log.WarnContext(ctx, "mcp: tool result content left out: its data is not base64", "tool", tool, what, i+1, "error", err)
		}
		return data, err == nil
	}
	for i, img := range res.Images {
		if data, ok := decode("image", i, img.Data); ok {
			content = append(content, &sdk.ImageContent{Data: data, MIMEType: img.MimeType})
		}
	}
	for i, c := range res.Content {
		data, ok := decode("item", i, c.Data)
		switch {
		case !ok:
		case c.Type == "audio":
			content = append(content, &sdk.AudioContent{Data: data, MIMEType: c.MimeType})
		case c.Type == "resource":
			rc := &sdk.ResourceContents{URI: c.URI, MIMEType: c.MimeType, Text: c.Text}
			if c.Text == "" {
				rc.Blob = data
			}
			content = append(content, &sdk.EmbeddedResource{Resource: rc})
		case c.Type == "resource_link":
			content = append(content, &sdk.ResourceLink{URI: c.URI, Name: c.Name, MIMEType: c.MimeType})
		}
	}
	out := &sdk.CallToolResult{Content: content}
	if len(res.Structured) > 0 {
		out.StructuredContent = res.Structured
	}
	return out
}

// failed is a tool result with isError and text.
func failed(text string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}}
}
