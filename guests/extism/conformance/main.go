// Command conformance is an MCP plugin in hyper-mcp's v2 interface (like
// mcpv2) serving the tools the official MCP conformance suite
// (@modelcontextprotocol/conformance) calls in its server scenarios, so
// that the suite, run against `morph mcp serve`, exercises the sandboxed
// path: every result below comes out of this WebAssembly module.
//
//   - test_simple_text, test_image_content, test_audio_content,
//     test_embedded_resource and test_multiple_content_types return the
//     content the scenarios ask for (text, a 1x1 PNG, a short WAV, an
//     embedded text resource, and the three together);
//   - test_tool_with_logging sends three log messages with
//     notify_logging_message, 50 ms apart;
//   - test_tool_with_progress sends progress 0, 50 and 100 of 100 with
//     notify_progress, with the progress token of its request context;
//   - test_elicitation, test_elicitation_sep1034_defaults and
//     test_elicitation_sep1330_enums ask the user for input with
//     create_elicitation, with the scenarios' schemas, and answer what the
//     user answered;
//   - test_sampling asks the client's model to answer its prompt with
//     create_message, and answers the model's answer;
//   - test_notify calls notify_resource_updated for its uri, or
//     notify_resource_list_changed or notify_prompt_list_changed (list:
//     resources, prompts);
//   - test_error_handling returns a result with isError;
//   - json_schema_2020_12_tool has an input schema with $schema, $defs and
//     additionalProperties, which must reach the client as written.
//
// Its resources (list_resources, list_resource_templates, read_resource)
// and prompts (list_prompts, get_prompt) are the resources-read-*,
// resources-templates-read, resources-subscribe and prompts-get-*
// scenarios': a static text, a static binary and a watched resource,
// the template test://template/{id}/data, and a simple prompt, one with
// arguments, one with an embedded resource and one with an image;
// complete completes the arguments of test_prompt_with_arguments
// (testValue1, testValue2).
//
// Build (`make extism-guests`, from the repository's root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags='-s -w' -o extism-conformance.wasm ./conformance
package main

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	pdk "github.com/extism/go-pdk"

	"github.com/morphhost/morph/guests/extism/internal/reply"
)

func main() {}

//go:wasmimport extism:host/user notify_logging_message
func notifyLoggingMessage(uint64)

//go:wasmimport extism:host/user notify_progress
func notifyProgress(uint64)

//go:wasmimport extism:host/user create_elicitation
func createElicitation(uint64) uint64

//go:wasmimport extism:host/user create_message
func createMessage(uint64) uint64

//go:wasmimport extism:host/user notify_resource_updated
func notifyResourceUpdated(uint64)

//go:wasmimport extism:host/user notify_resource_list_changed
func notifyResourceListChanged()

//go:wasmimport extism:host/user notify_prompt_list_changed
func notifyPromptListChanged()

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// requestContext is what hyper-mcp sends with each request.
type requestContext struct {
	ID   *json.RawMessage `json:"id"`
	Meta struct {
		ProgressToken any `json:"progressToken"`
	} `json:"_meta"`
}

// schema2020 is the conformance scenario json-schema-2020-12's schema.
const schema2020 = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
	`"$defs":{"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},` +
	`"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"}},"additionalProperties":false}`

//go:wasmexport list_tools
func listTools() int32 {
	var in struct {
		Context *requestContext `json:"context"`
	}
	if err := pdk.InputJSON(&in); err != nil || in.Context == nil || in.Context.ID == nil {
		return reply.Fail(errors.New("list_tools: want {\"context\": {\"id\": ..., \"_meta\": ...}}"))
	}
	none := json.RawMessage(`{"type":"object"}`)
	tools := []tool{
		{Name: "test_simple_text", Description: "Returns simple text.", InputSchema: none},
		{Name: "test_image_content", Description: "Returns an image.", InputSchema: none},
		{Name: "test_audio_content", Description: "Returns audio.", InputSchema: none},
		{Name: "test_embedded_resource", Description: "Returns an embedded resource.", InputSchema: none},
		{Name: "test_multiple_content_types", Description: "Returns text, an image and a resource.", InputSchema: none},
		{Name: "test_tool_with_logging", Description: "Sends three log messages.", InputSchema: none},
		{Name: "test_tool_with_progress", Description: "Reports progress three times.", InputSchema: none},
		{Name: "test_elicitation", Description: "Asks the user for a username and an email.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`)},
		{Name: "test_elicitation_sep1034_defaults", Description: "Asks the user, with defaults.", InputSchema: none},
		{Name: "test_elicitation_sep1330_enums", Description: "Asks the user, with enums.", InputSchema: none},
		{Name: "test_error_handling", Description: "Always fails.", InputSchema: none},
		{Name: "json_schema_2020_12_tool", Description: "Tool with JSON Schema 2020-12 features", InputSchema: json.RawMessage(schema2020)},
		{Name: "test_sampling", Description: "Asks the client's model to answer a prompt.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`)},
		{Name: "test_notify", Description: "Tells the client a resource changed (uri), or that the resources or prompts changed (list).",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"uri":{"type":"string"},"list":{"enum":["resources","prompts"]}}}`)},
	}
	return reply.JSON(map[string]any{"tools": tools})
}

const (
	// pixel is a 1x1 PNG, base64.
	pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	// wav is eight samples of silence, 8 kHz mono 8-bit PCM, base64.
	wav = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="
)

type item = map[string]any

func text(s string) item { return item{"type": "text", "text": s} }

func image() item { return item{"type": "image", "mimeType": "image/png", "data": pixel} }

func resource(uri, mime, s string) item {
	return item{"type": "resource", "resource": item{"uri": uri, "mimeType": mime, "text": s}}
}

// Schemas of the elicitation scenarios' requests.
const (
	userSchema = `{"type":"object","properties":{"username":{"type":"string","description":"User's response"},` +
		`"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`
	defaultsSchema = `{"type":"object","properties":{` +
		`"name":{"type":"string","description":"User name","default":"John Doe"},` +
		`"age":{"type":"integer","description":"User age","default":30},` +
		`"score":{"type":"number","description":"User score","default":95.5},` +
		`"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},` +
		`"verified":{"type":"boolean","description":"Verification status","default":true}}}`
	enumsSchema = `{"type":"object","properties":{` +
		`"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},` +
		`"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},` +
		`"legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},` +
		`"untitledMulti":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"string","enum":["option1","option2","option3"]}},` +
		`"titledMulti":{"type":"array","minItems":1,"maxItems":3,"items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}}}`
)

// elicit asks the user with create_elicitation and returns the answer's
// JSON.
func elicit(message, schema string) string {
	b, _ := json.Marshal(item{"message": message, "requestedSchema": json.RawMessage(schema)})
	mem := pdk.AllocateBytes(b)
	defer mem.Free()
	answer := pdk.FindMemory(createElicitation(mem.Offset()))
	return string(answer.ReadBytes())
}

// sample asks the client's model to answer prompt with create_message,
// and returns the answer's JSON (an error object when there is none).
func sample(prompt string) string {
	b, _ := json.Marshal(item{"messages": []item{{"role": "user", "content": text(prompt)}}, "maxTokens": 100})
	mem := pdk.AllocateBytes(b)
	defer mem.Free()
	answer := pdk.FindMemory(createMessage(mem.Offset()))
	return string(answer.ReadBytes())
}

// notify calls a notify_* host function with v's JSON.
func notify(fn func(uint64), v any) {
	b, _ := json.Marshal(v)
	mem := pdk.AllocateBytes(b)
	fn(mem.Offset())
	mem.Free()
}

//go:wasmexport call_tool
func callTool() int32 {
	var in struct {
		Request struct {
			Name      string `json:"name"`
			Arguments struct {
				Message string `json:"message"`
				Prompt  string `json:"prompt"`
				URI     string `json:"uri"`
				List    string `json:"list"`
			} `json:"arguments"`
		} `json:"request"`
		Context *requestContext `json:"context"`
	}
	if err := pdk.InputJSON(&in); err != nil || in.Context == nil {
		return reply.Fail(errors.New("call_tool: want {\"request\": ..., \"context\": ...}"))
	}
	content := func(items ...item) int32 { return reply.JSON(item{"content": items}) }
	switch in.Request.Name {
	case "test_simple_text":
		return content(text("This is a simple text response for testing."))
	case "test_image_content":
		return content(image())
	case "test_audio_content":
		return content(item{"type": "audio", "mimeType": "audio/wav", "data": wav})
	case "test_embedded_resource":
		return content(resource("test://embedded-resource", "text/plain", "This is an embedded resource content."))
	case "test_multiple_content_types":
		return content(text("Multiple content types test:"), image(),
			resource("test://mixed-content-resource", "application/json", `{"test":"data","value":123}`))
	case "test_tool_with_logging":
		for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			notify(notifyLoggingMessage, item{"level": "info", "data": msg})
		}
		return content(text("Tool with logging executed successfully"))
	case "test_tool_with_progress":
		for i, p := range []int{0, 50, 100} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			notify(notifyProgress, item{"progressToken": in.Context.Meta.ProgressToken, "progress": p, "total": 100})
		}
		return content(text("Tool with progress executed successfully"))
	case "test_elicitation":
		return content(text("User response: " + elicit(in.Request.Arguments.Message, userSchema)))
	case "test_elicitation_sep1034_defaults":
		return content(text("Elicitation completed: " + elicit("Test defaults for primitives", defaultsSchema)))
	case "test_elicitation_sep1330_enums":
		return content(text("Elicitation completed: " + elicit("Test enum schemas", enumsSchema)))
	case "test_error_handling":
		return reply.JSON(item{"content": []item{text("This tool intentionally returns an error for testing")}, "isError": true})
	case "json_schema_2020_12_tool":
		return content(text("json_schema_2020_12_tool called"))
	case "test_sampling":
		return content(text("LLM response: " + sample(in.Request.Arguments.Prompt)))
	case "test_notify":
		switch args := in.Request.Arguments; {
		case args.URI != "":
			notify(notifyResourceUpdated, item{"uri": args.URI})
		case args.List == "resources":
			notifyResourceListChanged()
		case args.List == "prompts":
			notifyPromptListChanged()
		}
		return content(text("notified"))
	}
	return reply.JSON(item{"content": []item{text("no tool " + in.Request.Name)}, "isError": true})
}

// The conformance scenarios' resources: two static ones and a template.
const (
	staticText   = "test://static-text"
	staticBinary = "test://static-binary"
	watched      = "test://watched-resource"
	dataTemplate = "test://template/{id}/data"
)

//go:wasmexport list_resources
func listResources() int32 {
	return reply.JSON(item{"resources": []item{
		{"uri": staticText, "name": "static-text", "mimeType": "text/plain", "description": "A static text resource."},
		{"uri": staticBinary, "name": "static-binary", "mimeType": "image/png", "description": "A static binary resource."},
		{"uri": watched, "name": "watched-resource", "mimeType": "text/plain", "description": "A resource test_notify says is updated."},
	}})
}

//go:wasmexport list_resource_templates
func listResourceTemplates() int32 {
	return reply.JSON(item{"resourceTemplates": []item{
		{"uriTemplate": dataTemplate, "name": "template-data", "mimeType": "application/json", "description": "Data by id."},
	}})
}

//go:wasmexport read_resource
func readResource() int32 {
	var in struct {
		Request struct {
			URI string `json:"uri"`
		} `json:"request"`
		Context *requestContext `json:"context"`
	}
	if err := pdk.InputJSON(&in); err != nil || in.Context == nil {
		return reply.Fail(errors.New("read_resource: want {\"request\": {\"uri\": ...}, \"context\": ...}"))
	}
	uri := in.Request.URI
	contents := func(c item) int32 { return reply.JSON(item{"contents": []item{c}}) }
	switch {
	case uri == staticText:
		return contents(item{"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."})
	case uri == staticBinary:
		return contents(item{"uri": uri, "mimeType": "image/png", "blob": pixel})
	case uri == watched:
		return contents(item{"uri": uri, "mimeType": "text/plain", "text": "Watched resource content."})
	case strings.HasPrefix(uri, "test://template/") && strings.HasSuffix(uri, "/data"):
		id := strings.TrimSuffix(strings.TrimPrefix(uri, "test://template/"), "/data")
		b, _ := json.Marshal(item{"id": id, "templateTest": true, "data": "Data for ID: " + id})
		return contents(item{"uri": uri, "mimeType": "application/json", "text": string(b)})
	}
	return reply.Fail(errors.New("no resource " + uri))
}

//go:wasmexport list_prompts
func listPrompts() int32 {
	return reply.JSON(item{"prompts": []item{
		{"name": "test_simple_prompt", "description": "A simple prompt without arguments."},
		{"name": "test_prompt_with_arguments", "description": "A prompt with arguments.", "arguments": []item{
			{"name": "arg1", "description": "First test argument", "required": true},
			{"name": "arg2", "description": "Second test argument", "required": true},
		}},
		{"name": "test_prompt_with_embedded_resource", "description": "A prompt with an embedded resource.", "arguments": []item{
			{"name": "resourceUri", "description": "URI of the resource to embed", "required": true},
		}},
		{"name": "test_prompt_with_image", "description": "A prompt with an image."},
	}})
}

//go:wasmexport get_prompt
func getPrompt() int32 {
	var in struct {
		Request struct {
			Name      string            `json:"name"`
			Arguments map[string]string `json:"arguments"`
		} `json:"request"`
		Context *requestContext `json:"context"`
	}
	if err := pdk.InputJSON(&in); err != nil || in.Context == nil {
		return reply.Fail(errors.New("get_prompt: want {\"request\": {\"name\": ...}, \"context\": ...}"))
	}
	args := in.Request.Arguments
	messages := func(content ...item) int32 {
		msgs := make([]item, len(content))
		for i, c := range content {
			msgs[i] = item{"role": "user", "content": c}
		}
		return reply.JSON(item{"messages": msgs})
	}
	switch in.Request.Name {
	case "test_simple_prompt":
		return messages(text("This is a simple prompt for testing."))
	case "test_prompt_with_arguments":
		return messages(text("Prompt with arguments: arg1='" + args["arg1"] + "', arg2='" + args["arg2"] + "'"))
	case "test_prompt_with_embedded_resource":
		return messages(resource(args["resourceUri"], "text/plain", "Embedded resource content for testing."),
			text("Please process the embedded resource above."))
	case "test_prompt_with_image":
		return messages(image(), text("Please analyze the image above."))
	}
	return reply.Fail(errors.New("no prompt " + in.Request.Name))
}

//go:wasmexport complete
func complete() int32 {
	var in struct {
		Request struct {
			Ref struct {
				Type string `json:"type"`
				Name string `json:"name"`
			} `json:"ref"`
			Argument struct {
				Name  string `json:"name"`
				Value string `json:"value"`
			} `json:"argument"`
		} `json:"request"`
		Context *requestContext `json:"context"`
	}
	if err := pdk.InputJSON(&in); err != nil || in.Context == nil {
		return reply.Fail(errors.New("complete: want {\"request\": {\"ref\": ..., \"argument\": ...}, \"context\": ...}"))
	}
	values := []string{}
	if in.Request.Ref.Type == "ref/prompt" && in.Request.Ref.Name == "test_prompt_with_arguments" {
		for _, v := range []string{"testValue1", "testValue2"} {
			if strings.HasPrefix(v, in.Request.Argument.Value) {
				values = append(values, v)
			}
		}
	}
	return reply.JSON(item{"completion": item{"values": values}})
}
