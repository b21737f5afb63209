package extism

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// The tool conventions of MCP plugins built on Extism, which speak the
// Model Context Protocol's tools/list and tools/call payloads, not morph's:
//
//   - v1 (mcp.run servlets, hyper-mcp's v1 plugins; e.g. tuananh/hyper-mcp
//     examples/plugins/v1/crypto-price/pdk.gen.go): `describe` answers a
//     ListToolsResult, `call` takes {"params": CallToolRequestParam}.
//   - v2 (hyper-mcp's templates/plugins, the interface its README tells new
//     plugins to use): `list_tools` takes {"context": ...} and answers a
//     ListToolsResult, `call_tool` takes {"request": CallToolRequestParam,
//     "context": ...}. Its prompts, resources and completion exports
//     (mcpV2Methods) serve an MCP client of morph mcp serve (mcpRequest).
//
// hyper-mcp prefers v1 when a module has both; so does morph.
const (
	extismExportDescribe = "describe"
	extismExportCall     = "call"
	mcpV2List            = "list_tools"
	mcpV2Call            = "call_tool"
)

// mcpV2Methods are v2's exports for MCP's methods besides tools, by
// method: the list exports take {"context": ...}, the others
// {"request": params, "context": ...}; each answers the method's result.
var mcpV2Methods = map[string]string{
	"prompts/list":             "list_prompts",
	"prompts/get":              "get_prompt",
	"resources/list":           "list_resources",
	"resources/templates/list": "list_resource_templates",
	"resources/read":           "read_resource",
	"completion/complete":      "complete",
}

// mcpConvention is the MCP convention of a module: its two exports, and
// for v2 the exports of mcpV2Methods it has, by their pseudo-export
// (guest.MCPExport).
type mcpConvention struct {
	list, call string
	v2         bool
	methods    map[string]string
}

// findMCP is the MCP convention of a module that exports these functions,
// or nil.
func findMCP(exported map[string]wasmbin.Signature) *mcpConvention {
	has := func(name string) bool { _, ok := exported[name]; return ok }
	switch {
	case has(extismExportDescribe) && has(extismExportCall):
		return &mcpConvention{list: extismExportDescribe, call: extismExportCall}
	case has(mcpV2List) && has(mcpV2Call):
		c := &mcpConvention{list: mcpV2List, call: mcpV2Call, v2: true, methods: map[string]string{}}
		for method, export := range mcpV2Methods {
			if has(export) {
				c.methods[guest.MCPExport(method)] = export
			}
		}
		return c
	}
	return nil
}

// mcpRequest calls the v2 export of an MCP method besides tools with
// params, and answers its output as it is: the host checks it.
func (g *instance) mcpRequest(ctx context.Context, export string, params []byte, maxOut int) (view []byte, err error) {
	req := map[string]any{"context": mcpContextOf(ctx)}
	if !strings.HasPrefix(export, "list_") {
		if len(params) == 0 {
			params = []byte("{}")
		}
		req["request"] = json.RawMessage(params)
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, guest.Fail(guest.ErrBadOutput, export+" input", err)
	}
	return g.invoke(ctx, export, raw, maxOut)
}

// mcpContext is the request context v2 exports take (hyper-mcp's
// PluginRequestContext): a constant one, since morph's agent makes no MCP
// request, with the caller's progress token when it has one (an MCP
// client's call through morph mcp serve, engine.CallNotifierOf).
var mcpContext = json.RawMessage(`{"id":1,"_meta":{}}`)

// mcpContextOf is the request context of a call under ctx.
func mcpContextOf(ctx context.Context) json.RawMessage {
	n := engine.CallNotifierOf(ctx)
	if n == nil || n.ProgressToken() == nil {
		return mcpContext
	}
	b, err := json.Marshal(map[string]any{"id": 1, "_meta": map[string]any{"progressToken": n.ProgressToken()}})
	if err != nil { // a token is a string or a number
		return mcpContext
	}
	return b
}

type (
	mcpToolList struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	mcpCallParams struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	// mcpContent is an item of a tools/call result's content. hyper-mcp's Go
	// template writes text items without their "type" (its TextContent's
	// MarshallJSON is misspelled), so an item with text is text whatever
	// its type says.
	mcpContent struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Data     string `json:"data"`
		MimeType string `json:"mimeType"`
		URI      string `json:"uri"`  // a resource_link's
		Name     string `json:"name"` // a resource_link's
		Resource *struct {
			URI      string `json:"uri"`
			MimeType string `json:"mimeType"`
			Text     string `json:"text"`
			Blob     string `json:"blob"`
		} `json:"resource"`
	}
	mcpCallResult struct {
		Content           []mcpContent    `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
)

// output is the result as morph's ToolCallOutput. For the model: its text
// content, one item a line; its images as images (base64, as MCP sends
// them); an embedded resource's text inlined; content of other kinds
// named, not inlined; structured content when there is no other. For an
// MCP client (Content, Structured): audio, embedded resources and resource
// links as they are, and the structured content.
func (r mcpCallResult) output() abi.ToolCallOutput {
	out := abi.ToolCallOutput{Structured: r.StructuredContent}
	if string(out.Structured) == "null" {
		out.Structured = nil
	}
	var lines []string
	for _, c := range r.Content {
		switch {
		case c.Text != "":
			lines = append(lines, c.Text)
		case c.Type == "image" && c.Data != "":
			out.Images = append(out.Images, abi.Image{MimeType: c.MimeType, Data: c.Data})
			lines = append(lines, fmt.Sprintf("[image %d: %s]", len(out.Images), c.MimeType))
		case c.Resource != nil:
			res := c.Resource
			out.Content = append(out.Content, abi.Content{Type: "resource", URI: res.URI, MimeType: res.MimeType, Text: res.Text, Data: res.Blob})
			if res.Text != "" {
				lines = append(lines, res.Text)
			} else {
				lines = append(lines, strings.TrimSpace(fmt.Sprintf("[resource %s %s]", res.URI, res.MimeType)))
			}
		default:
			switch c.Type {
			case "audio":
				out.Content = append(out.Content, abi.Content{Type: c.Type, MimeType: c.MimeType, Data: c.Data})
			case "resource_link":
				out.Content = append(out.Content, abi.Content{Type: c.Type, URI: c.URI, Name: c.Name, MimeType: c.MimeType})
			}
			lines = append(lines, strings.TrimSpace(fmt.Sprintf("[%s content %s]", c.Type, c.MimeType)))
		}
	}
	if len(lines) == 0 && len(r.StructuredContent) > 0 {
		lines = append(lines, string(r.StructuredContent))
	}
	out.Output = strings.Join(lines, "\n")
	return out
}

// describe answers morph_describe for a module that is not morph's: a
// manifest with the hooks its configuration maps and the tools of its MCP
// convention and of its configuration.
func (g *instance) describe(ctx context.Context, maxOut int) (view []byte, err error) {
	m := abi.Manifest{Name: g.m.name, ABIVersion: abi.Version, Hooks: []string{}}
	for _, h := range abi.Hooks {
		if _, ok := g.m.hooks[h.Export]; ok {
			m.Hooks = append(m.Hooks, h.Name)
		}
	}
	if mcp := g.m.mcp; mcp != nil {
		var input []byte
		if mcp.v2 {
			input, _ = json.Marshal(map[string]any{"context": mcpContext})
		}
		if view, err = g.invoke(ctx, mcp.list, input, maxOut); err != nil {
			return nil, err
		}
		var list mcpToolList
		if err := guest.DecodeJSON(view, g.m.env.Limits.MaxJSONDepth, &list); err != nil {
			return nil, guest.Fail(guest.ErrBadOutput, mcp.list+": "+guest.Truncate(view, 200), err)
		}
		for _, t := range list.Tools {
			if t.Name == "" {
				return nil, guest.Fail(guest.ErrBadOutput, mcp.list+" lists a tool without a name", nil)
			}
			params := t.InputSchema
			if len(params) == 0 || string(params) == "null" {
				params = json.RawMessage(`{"type":"object"}`)
			}
			m.Tools = append(m.Tools, abi.ToolSpec{Name: t.Name, Description: t.Description, Parameters: params})
		}
	}
	for _, t := range g.m.env.Tools {
		m.Tools = append(m.Tools, t.Spec)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, guest.Fail(guest.ErrBadOutput, abi.ExportDescribe, err)
	}
	return out, nil
}

// callTool runs morph_call_tool: a configured export tool, or an MCP call.
// A result with isError is the tool's failure (guest.ErrGuest, which the
// model sees as the observation).
func (g *instance) callTool(ctx context.Context, input []byte, maxOut int) (view []byte, err error) {
	var in abi.ToolCallInput
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, guest.Fail(guest.ErrBadOutput, "tool call input", err)
	}
	if t, ok := g.m.tools[in.Tool]; ok {
		return g.callExport(ctx, t, in.Params, maxOut)
	}
	mcp := g.m.mcp
	if mcp == nil {
		return nil, guest.Fail(guest.ErrGuest, fmt.Sprintf("no tool %q", in.Tool), nil)
	}
	params := mcpCallParams{Name: in.Tool, Arguments: in.Params}
	if params.Arguments == nil {
		params.Arguments = map[string]any{}
	}
	req := map[string]any{"method": "tools/call", "params": params}
	if mcp.v2 {
		req = map[string]any{"request": params, "context": mcpContextOf(ctx)}
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, guest.Fail(guest.ErrBadOutput, "tool call input", err)
	}
	if view, err = g.invoke(ctx, mcp.call, raw, maxOut); err != nil {
		return nil, err
	}
	var res mcpCallResult
	if err := guest.DecodeJSON(view, g.m.env.Limits.MaxJSONDepth, &res); err != nil {
		return nil, guest.Fail(guest.ErrBadOutput, mcp.call+": "+guest.Truncate(view, 200), err)
	}
	out := res.output()
	if res.IsError {
		return nil, guest.Fail(guest.ErrGuest, out.Output, nil)
	}
	return marshalOutput(out)
}

// callExport runs a plain export as the tool t: its input is the arguments'
// JSON, or the bytes of one string argument; its output, the tool's result
// when it is UTF-8 text.
func (g *instance) callExport(ctx context.Context, t guest.ExportTool, params map[string]any, maxOut int) (view []byte, err error) {
	var input []byte
	if t.Field != "" {
		s, ok := params[t.Field].(string)
		if !ok {
			return nil, guest.Fail(guest.ErrGuest, fmt.Sprintf("argument %q must be a string", t.Field), nil)
		}
		input = []byte(s)
	} else if input, err = json.Marshal(params); err != nil {
		return nil, guest.Fail(guest.ErrBadOutput, "tool call input", err)
	}
	if view, err = g.invoke(ctx, t.Export, input, maxOut); err != nil {
		return nil, err
	}
	if !utf8.Valid(view) {
		return nil, guest.Fail(guest.ErrBadOutput, fmt.Sprintf("export %s answered %d bytes that are not UTF-8 text", t.Export, len(view)), nil)
	}
	return marshalOutput(abi.ToolCallOutput{Output: string(view)})
}

func marshalOutput(out abi.ToolCallOutput) (view []byte, err error) {
	b, err := json.Marshal(out)
	if err != nil {
		return nil, guest.Fail(guest.ErrBadOutput, "tool output", err)
	}
	return b, nil
}
