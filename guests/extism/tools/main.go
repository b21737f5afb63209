// Command tools is an Extism tool plugin in the convention of existing
// Extism tool plugins (mcp.run servlets, hyper-mcp's plugins): it exports
// `describe`, which lists its tools with a JSON Schema `inputSchema` each,
// and `call`, which runs one. It knows nothing of morph: morph serves its
// tools as they are (host/internal/extism maps the payloads).
//
//   - reverse returns its text reversed;
//   - divide returns a / b, and a tool error (isError) when b is 0.
//
// Build (`make extism-guests`, from the repository's root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags='-s -w' -o extism-tools.wasm ./tools
package main

import (
	"encoding/json"
	"errors"
	"strconv"

	pdk "github.com/extism/go-pdk"

	"github.com/morphhost/morph/guests/extism/internal/reply"
)

func main() {}

// The payloads of the convention, as its plugins declare them.
type (
	listToolsResult struct {
		Tools []toolDescription `json:"tools"`
	}
	toolDescription struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	callToolRequest struct {
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	callToolResult struct {
		Content []content `json:"content"`
		IsError bool      `json:"isError,omitempty"`
	}
	content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
)

//go:wasmexport describe
func describe() int32 {
	return reply.JSON(listToolsResult{Tools: []toolDescription{
		{Name: "reverse", Description: "Reverses a text.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		{Name: "divide", Description: "Divides a by b.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)},
	}})
}

//go:wasmexport call
func call() int32 {
	var req callToolRequest
	if err := pdk.InputJSON(&req); err != nil {
		return reply.Fail(err)
	}
	text := func(s string, isErr bool) int32 {
		return reply.JSON(callToolResult{Content: []content{{Type: "text", Text: s}}, IsError: isErr})
	}
	switch req.Params.Name {
	case "reverse":
		var args struct{ Text string }
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return text(err.Error(), true)
		}
		r := []rune(args.Text)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return text(string(r), false)
	case "divide":
		var args struct{ A, B float64 }
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return text(err.Error(), true)
		}
		if args.B == 0 {
			return text("division by zero", true)
		}
		return text(strconv.FormatFloat(args.A/args.B, 'g', -1, 64), false)
	}
	return reply.Fail(errors.New("unknown tool " + req.Params.Name))
}
