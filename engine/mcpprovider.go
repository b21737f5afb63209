package engine

import (
	"context"
	"encoding/json"
)

// The MCP methods an MCPProvider may serve besides tools: a plugin
// convention that has prompts and resources (hyper-mcp's v2 exports)
// answers them with MCP's own payloads; completion completes a prompt's
// or a resource template's argument.
const (
	MethodListPrompts           = "prompts/list"
	MethodGetPrompt             = "prompts/get"
	MethodListResources         = "resources/list"
	MethodListResourceTemplates = "resources/templates/list"
	MethodReadResource          = "resources/read"
	MethodComplete              = "completion/complete"
)

// MCPProvider is what a plugin serves an MCP client besides its tools:
// prompts and resources, in MCP's JSON, which the engine does not read
// (only `morph mcp serve` serves them; a run has no use for them).
type MCPProvider interface {
	// MCPMethods are the methods (Method*) it answers.
	MCPMethods() []string
	// MCPRequest answers one request of method with its params (MCP's
	// JSON, without the JSON-RPC envelope) by the result's JSON, within
	// the plugin's deadline and output limit. The answer is the plugin's
	// to write: the caller checks it.
	MCPRequest(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// PluginMCP is a loaded plugin's MCPProvider, with its name.
type PluginMCP struct {
	Plugin string
	MCPProvider
}

// MCPProviders are the MCPProviders of the loaded plugins
// (Extension.MCP), in the order they were loaded: a server that serves
// them gives a name two plugins have to the first.
func (e *Engine) MCPProviders() []PluginMCP {
	e.life.mu.Lock()
	defer e.life.mu.Unlock()
	var out []PluginMCP
	for _, lp := range e.life.loaded {
		if lp.ext.MCP != nil {
			out = append(out, PluginMCP{Plugin: lp.name, MCPProvider: lp.ext.MCP})
		}
	}
	return out
}
