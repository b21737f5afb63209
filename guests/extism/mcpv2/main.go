// Command mcpv2 is an MCP plugin in hyper-mcp's v2 interface
// (tuananh/hyper-mcp templates/plugins/go): it exports list_tools and
// call_tool, which take a request context as hyper-mcp sends it, and imports
// the host functions of that interface from extism:host/user. It knows
// nothing of morph. Its tools:
//
//   - echo returns its text as a text item without "type", as the
//     template's TextContent encodes it (its MarshallJSON is misspelled);
//   - chart returns a 1x1 PNG image item and a caption;
//   - unlock adds the tool secret, and says so with notify_tool_list_changed;
//   - secret (once unlocked) answers "42";
//   - crash panics: the instance traps, and the host replaces it with one
//     that starts locked again.
//
// It also has plain exports for morph.toml's [[plugins.tools]] and
// [plugins.hook_exports]: shout (text in, text out), prompt (a build_prompt
// hook under another name), bad_utf8 (answers bytes that are not UTF-8), and
// lookup, which calls the host function extism:host/user.lookup an
// embedding host must provide. Its prompts are at the end.
//
// Build (`make extism-guests`, from the repository's root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags='-s -w' -o extism-mcpv2.wasm ./mcpv2
package main

import (
	"encoding/json"
	"errors"
	"strings"

	pdk "github.com/extism/go-pdk"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/guests/extism/internal/reply"
)

func main() {}

//go:wasmimport extism:host/user notify_tool_list_changed
func notifyToolListChanged()

//go:wasmimport extism:host/user notify_logging_message
func notifyLoggingMessage(uint64)

//go:wasmimport extism:host/user lookup
func lookup(uint64) uint64

// unlocked: unlock was called on this instance.
var unlocked bool

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// requestContext is what hyper-mcp sends with each request; list_tools and
// call_tool fail without it, as the template's generated code does.
type requestContext struct {
	ID   *json.RawMessage `json:"id"`
	Meta map[string]any   `json:"_meta"`
}

//go:wasmexport list_tools
func listTools() int32 {
	var in struct {
		Context *requestContext `json:"context"`
	}
	if err := pdk.InputJSON(&in); err != nil || in.Context == nil || in.Context.ID == nil {
		return reply.Fail(errors.New("list_tools: want {\"context\": {\"id\": ..., \"_meta\": ...}}"))
	}
	text := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)
	none := json.RawMessage(`{"type":"object"}`)
	tools := []tool{
		{Name: "echo", Description: "Returns its text.", InputSchema: text},
		{Name: "chart", Description: "Draws a chart (an image).", InputSchema: none},
		{Name: "unlock", Description: "Unlocks the tool secret.", InputSchema: none},
		{Name: "crash", Description: "Crashes the plugin.", InputSchema: none},
	}
	if unlocked {
		tools = append(tools, tool{Name: "secret", Description: "Tells the secret.", InputSchema: none})
	}
	return reply.JSON(map[string]any{"tools": tools})
}

// pixel is a 1x1 PNG, base64.
const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

//go:wasmexport call_tool
func callTool() int32 {
	var in struct {
		Request struct {
			Name      string            `json:"name"`
			Arguments map[string]string `json:"arguments"`
		} `json:"request"`
		Context *requestContext `json:"context"`
	}
	if err := pdk.InputJSON(&in); err != nil || in.Context == nil {
		return reply.Fail(errors.New("call_tool: want {\"request\": ..., \"context\": ...}"))
	}
	text := func(s string) map[string]any { return map[string]any{"text": s} } // no "type", as the template
	switch in.Request.Name {
	case "echo":
		return reply.JSON(map[string]any{"content": []any{text(in.Request.Arguments["text"])}})
	case "chart":
		return reply.JSON(map[string]any{"content": []any{
			text("a chart of one pixel"),
			map[string]any{"type": "image", "mimeType": "image/png", "data": pixel},
		}})
	case "unlock":
		unlocked = true
		mem := pdk.AllocateString(`{"level":"info","data":"secret unlocked"}`)
		notifyLoggingMessage(mem.Offset())
		notifyToolListChanged()
		return reply.JSON(map[string]any{"content": []any{text("unlocked")}})
	case "crash":
		panic("crash")
	case "secret":
		if !unlocked {
			return reply.JSON(map[string]any{"content": []any{text("locked")}, "isError": true})
		}
		return reply.JSON(map[string]any{"content": []any{text("42")}})
	}
	return reply.JSON(map[string]any{"content": []any{text("no tool " + in.Request.Name)}, "isError": true})
}

//go:wasmexport shout
func shout() int32 {
	pdk.OutputString(strings.ToUpper(pdk.InputString()) + "!")
	return 0
}

//go:wasmexport prompt
func prompt() int32 {
	var in abi.PromptInput
	if err := pdk.InputJSON(&in); err != nil {
		return reply.Fail(err)
	}
	return reply.JSON(abi.PromptOutput{SystemPrompt: in.DefaultPrompt + "\n\nAnswer like a pirate."})
}

//go:wasmexport bad_utf8
func badUTF8() int32 {
	pdk.Output([]byte{0xff, 0xfe, 'a'})
	return 0
}

//go:wasmexport lookup
func lookupExport() int32 {
	mem := pdk.AllocateBytes(pdk.Input())
	out := pdk.FindMemory(lookup(mem.Offset()))
	pdk.Output(out.ReadBytes())
	return 0
}

// Its prompts (list_prompts and get_prompt, with no resources exports)
// answer what a hostile plugin may: hello a message, deep JSON nested
// 10,000 times, garbage bytes that are not JSON, huge 2 MiB of text, fail
// an error.

//go:wasmexport list_prompts
func listPrompts() int32 {
	return reply.JSON(map[string]any{"prompts": []map[string]any{
		{"name": "hello"}, {"name": "deep"}, {"name": "garbage"}, {"name": "huge"}, {"name": "fail"},
	}})
}

//go:wasmexport get_prompt
func getPrompt() int32 {
	var in struct {
		Request struct {
			Name string `json:"name"`
		} `json:"request"`
	}
	if err := pdk.InputJSON(&in); err != nil {
		return reply.Fail(err)
	}
	switch in.Request.Name {
	case "hello":
		return reply.JSON(map[string]any{"messages": []map[string]any{{"role": "user", "content": map[string]any{"text": "hello"}}}})
	case "deep":
		pdk.OutputString(strings.Repeat("[", 10000) + strings.Repeat("]", 10000))
	case "garbage":
		pdk.Output([]byte{0xff, 0xfe, '{'})
	case "huge":
		pdk.OutputString(`{"messages":[{"role":"user","content":{"type":"text","text":"` + strings.Repeat("a", 2<<20) + `"}}]}`)
	default:
		return reply.Fail(errors.New("no prompt " + in.Request.Name))
	}
	return 0
}
