package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/guest"
)

// mcpMethods are the MCP methods besides tools a plugin may serve
// (engine.MCPProvider), in the order a server lists them.
var mcpMethods = []string{engine.MethodListPrompts, engine.MethodGetPrompt, engine.MethodListResources,
	engine.MethodListResourceTemplates, engine.MethodReadResource, engine.MethodComplete}

// mcpProvider serves a plugin's prompts and resources: the methods its
// module answers besides tools (an Extism MCP plugin's v2 exports, see
// guest.MCPExport), each a call of the plugin like a tool's, under its
// deadline, isolation, input and output limits and fault policy.
type mcpProvider struct {
	p       *Plugin
	methods []string
}

// mcpProvider is p's engine.MCPProvider, or nil when its module serves
// none of mcpMethods.
func (p *Plugin) mcpProvider() engine.MCPProvider {
	var methods []string
	for _, m := range mcpMethods {
		if p.Exports(guest.MCPExport(m)) {
			methods = append(methods, m)
		}
	}
	if len(methods) == 0 {
		return nil
	}
	return &mcpProvider{p: p, methods: methods}
}

func (m *mcpProvider) MCPMethods() []string { return slices.Clone(m.methods) }

// MCPRequest calls the plugin for method. Its answer must be JSON no deeper
// than the plugin's MaxJSONDepth, within its output limit; otherwise the
// call fails with ErrBadOutput (or ErrOutputTooLarge), as a tool's would,
// and what the JSON says is the caller's to check.
func (m *mcpProvider) MCPRequest(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if !slices.Contains(m.methods, method) {
		return nil, fmt.Errorf("plugin %q: %w: it does not serve %s", m.p.Name(), ErrABIMismatch, method)
	}
	var out json.RawMessage
	err := m.p.CallFunc(ctx, guest.MCPExport(method), params, func(view []byte) error {
		if err := guest.DecodeJSON(view, m.p.limits.MaxJSONDepth, new(json.RawMessage)); err != nil {
			return err
		}
		out = bytes.Clone(view)
		return nil
	})
	return out, err
}
