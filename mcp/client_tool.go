package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/safetext"
)

// Kinds of ServerError (errors.Is).
var (
	// ErrStartup: the server did not start: its process, the connection,
	// initialize or the first tools/list failed or took too long.
	ErrStartup = errors.New("mcp: server did not start")
	// ErrServerDown: the connection to the server has ended (it exited,
	// broke a limit, or sent what is not JSON-RPC); the call that met the
	// end fails, and the next restarts the server (ServerConfig.Restart)
	// or fails too.
	ErrServerDown = errors.New("mcp: server not running")
	// ErrCallTimeout: a call had no answer within the entry's timeout; it
	// was cancelled (the server told so).
	ErrCallTimeout = errors.New("mcp: call timed out")
	// ErrOutputTooLarge: a result, or a message, over the entry's
	// max_output_kb.
	ErrOutputTooLarge = errors.New("mcp: server output over the limit")
	// ErrBadMessage: a stdio server wrote a line that is not one JSON-RPC
	// message (not JSON, a message spread over lines, a batch); its
	// connection ends (the cause of an ErrServerDown).
	ErrBadMessage = errors.New("mcp: server sent what is not a JSON-RPC message")
	// ErrTooManyTools: the server listed more tools than max_tools.
	ErrTooManyTools = errors.New("mcp: too many tools")
	// ErrRefused: the server answered a call with a JSON-RPC error (an
	// unknown tool, invalid arguments) rather than a result, or an HTTP
	// server's request failed in a way the SDK deems transient (a 503, a
	// network error); the connection goes on.
	ErrRefused = errors.New("mcp: call refused")
)

// ServerError is a failure of the MCP server named Server; Err says what,
// and is one of the kinds above (errors.Is).
type ServerError struct {
	Server string
	Err    error
}

// Error names the server and says what happened.
func (e *ServerError) Error() string { return fmt.Sprintf("mcp server %q: %v", e.Server, e.Err) }

// Unwrap returns what happened.
func (e *ServerError) Unwrap() error { return e.Err }

// ToolError is a result with isError: the tool ran and failed. It reads
// as the result's text, which is what the model is told.
type ToolError struct {
	Server, Tool string
	Text         string
}

// Error is the result's text.
func (e *ToolError) Error() string { return e.Text }

// maxPages caps the pages of one tools/list: a server could answer pages
// of no tools with a cursor forever.
const maxPages = 100

// list lists the server's tools, following cursors, at most MaxTools
// tools in at most maxPages pages.
func (c *conn) list(ctx context.Context) ([]*sdk.Tool, error) {
	var out []*sdk.Tool
	cursor := ""
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, fmt.Errorf("%w: tools/list went on past %d pages", ErrTooManyTools, maxPages)
		}
		res, err := c.cs.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, c.explain(fmt.Errorf("tools/list: %w", err))
		}
		if out = append(out, res.Tools...); len(out) > c.srv.cfg.MaxTools {
			return nil, fmt.Errorf("%w: it lists more than %d (max_tools)", ErrTooManyTools, c.srv.cfg.MaxTools)
		}
		if res.NextCursor == "" {
			return out, nil
		}
		cursor = res.NextCursor
	}
}

// tools are the listed tools as the engine's, with the warnings of those
// left out: not in the entry's allow list (silently), named twice, or
// failing the engine's checks (name, description, schema). An allowed
// name the server does not list is a warning too.
func (srv *server) tools(listed []*sdk.Tool) ([]engine.Tool, []string) {
	var tools []engine.Tool
	var warnings []string
	seen := map[string]bool{}
	for _, t := range listed {
		if len(srv.cfg.Tools) > 0 && !slices.Contains(srv.cfg.Tools, t.Name) {
			continue
		}
		if seen[t.Name] {
			warnings = append(warnings, fmt.Sprintf("tool %s listed twice: the second left out", safetext.Quote(t.Name, 160)))
			continue
		}
		seen[t.Name] = true
		rt, err := srv.remoteTool(t)
		if err == nil && srv.opts.Check != nil {
			err = srv.opts.Check(rt)
		}
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("tool %s left out: %v", safetext.Quote(t.Name, 160), err))
			continue
		}
		tools = append(tools, rt)
	}
	for _, name := range srv.cfg.Tools {
		if !seen[name] {
			warnings = append(warnings, fmt.Sprintf("tools lists %q, which the server does not offer", name))
		}
	}
	return tools, warnings
}

// remoteTool is t as the engine's tool: named with the entry's prefix, its
// input schema as the parameter schema.
func (srv *server) remoteTool(t *sdk.Tool) (*remoteTool, error) {
	schema := []byte(`{"type":"object"}`)
	if t.InputSchema != nil {
		var err error
		if schema, err = json.Marshal(t.InputSchema); err != nil {
			return nil, fmt.Errorf("its input schema: %w", err)
		}
	}
	name := t.Name
	if srv.cfg.Prefix != "" {
		name = srv.cfg.Prefix + "." + t.Name
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	return &remoteTool{srv: srv, name: name, remote: t.Name, desc: desc, schema: string(schema)}, nil
}

// remoteTool is a tool of an MCP server's, called through the server's
// current connection.
type remoteTool struct {
	srv                *server
	name, remote, desc string
	schema             string
}

// Name is the tool's name in morph (prefixed).
func (t *remoteTool) Name() string { return t.name }

// Description is the server's.
func (t *remoteTool) Description() string { return t.desc }

// ParameterSchema is the server's input schema.
func (t *remoteTool) ParameterSchema() string { return t.schema }

// Execute calls the tool; see ExecuteImages.
func (t *remoteTool) Execute(ctx context.Context, params map[string]any) (string, error) {
	out, _, err := t.ExecuteImages(ctx, params)
	return out, err
}

// ExecuteImages calls the tool on the server, bounded by the entry's
// timeout, and gives its result as text and images: a *ToolError when the
// result has isError, a *ServerError when there is none to give.
func (t *remoteTool) ExecuteImages(ctx context.Context, params map[string]any) (string, []abi.Image, error) {
	srv := t.srv
	c := srv.current()
	if c == nil {
		return "", nil, &ServerError{Server: srv.cfg.Name, Err: fmt.Errorf("%w: it is stopped", ErrServerDown)}
	}
	if c.isDown() {
		var err error
		if c, err = srv.revive(ctx, c); err != nil {
			return "", nil, &ServerError{Server: srv.cfg.Name, Err: err}
		}
	}
	if params == nil {
		params = map[string]any{} // not null, which servers refuse
	}
	callCtx, cancel := context.WithTimeout(ctx, srv.cfg.Timeout)
	defer cancel()
	p := &sdk.CallToolParams{Name: t.remote, Arguments: params}
	defer srv.follow(callCtx, p)()
	res, err := c.cs.CallTool(callCtx, p)
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
		return t.output(res)
	case ctx.Err() != nil: // the caller's end, not the server's
		return "", nil, ctx.Err()
	case callCtx.Err() != nil:
		return "", nil, &ServerError{Server: srv.cfg.Name, Err: fmt.Errorf("%w: tool %s had no answer within %s (timeout); the call was cancelled",
			ErrCallTimeout, safetext.Quote(t.remote, 160), srv.cfg.Timeout)}
	case c.cmd != nil && errors.Is(err, ErrOutputTooLarge) && !c.isDown(): // an answer over the line limit, skipped (stdioClient)
		return "", nil, &ServerError{Server: srv.cfg.Name, Err: fmt.Errorf("tool %s: %w", safetext.Quote(t.remote, 160), err)}
	case !errors.Is(err, sdk.ErrConnectionClosed) && errors.As(err, &rpcErr) && !c.isDown():
		return "", nil, &ServerError{Server: srv.cfg.Name, Err: fmt.Errorf("%w: tool %s: %s", ErrRefused, safetext.Quote(t.remote, 160), rpcErr.Message)}
	}
	c.down()
	err = c.explain(err)
	srv.log.Warn("mcp server's connection ended", "error", err, "restart", srv.cfg.Restart)
	return "", nil, &ServerError{Server: srv.cfg.Name, Err: fmt.Errorf("%w: %w", ErrServerDown, err)}
}

// output is a result as the engine takes it, capped at MaxOutputBytes: its
// text content, one item a line; its images (base64, as the model gets
// them), each named in the text; other content named, embedded text
// resources inlined; structured content as JSON when there is no text (a
// server is to send its text form as text too).
func (t *remoteTool) output(res *sdk.CallToolResult) (string, []abi.Image, error) {
	var lines []string
	var images []abi.Image
	size, hasText := 0, false
	for _, item := range res.Content {
		switch c := item.(type) {
		case *sdk.TextContent:
			lines, size, hasText = append(lines, c.Text), size+len(c.Text), true
		case *sdk.ImageContent:
			img := abi.Image{MimeType: c.MIMEType, Data: base64.StdEncoding.EncodeToString(c.Data)}
			images, size = append(images, img), size+len(img.Data)
			lines = append(lines, fmt.Sprintf("[image %d: %s]", len(images), c.MIMEType))
		case *sdk.AudioContent:
			lines, size = append(lines, fmt.Sprintf("[audio: %s, %d bytes, not shown]", c.MIMEType, len(c.Data))), size+len(c.Data)
		case *sdk.ResourceLink:
			lines = append(lines, fmt.Sprintf("[resource link: %s %s]", c.URI, c.Name))
		case *sdk.EmbeddedResource:
			if r := c.Resource; r != nil && r.Text != "" {
				lines, size, hasText = append(lines, r.Text), size+len(r.Text), true
			} else if r != nil {
				lines, size = append(lines, fmt.Sprintf("[resource: %s %s, %d bytes, not shown]", r.URI, r.MIMEType, len(r.Blob))), size+len(r.Blob)
			}
		default:
			lines = append(lines, fmt.Sprintf("[%T content, not shown]", item))
		}
	}
	if !hasText && res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return "", nil, &ServerError{Server: t.srv.cfg.Name, Err: fmt.Errorf("tool %s: its structured content: %w", safetext.Quote(t.remote, 160), err)}
		}
		lines, size = append(lines, string(b)), size+len(b)
	}
	if limit := t.srv.cfg.MaxOutputBytes; size > limit {
		return "", nil, &ServerError{Server: t.srv.cfg.Name, Err: fmt.Errorf("%w: tool %s answered %d bytes, over the limit of %d (max_output_kb)",
			ErrOutputTooLarge, safetext.Quote(t.remote, 160), size, limit)}
	}
	text := strings.Join(lines, "\n")
	if res.IsError {
		return "", nil, &ToolError{Server: t.srv.cfg.Name, Tool: t.remote, Text: text}
	}
	return text, images, nil
}
