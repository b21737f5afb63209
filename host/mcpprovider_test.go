package host

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/morphhost/morph/engine"
)

// A hyper-mcp v2 plugin's prompts reach the engine as an MCPProvider with
// the methods the module exports (no resources: it has none), and what a
// hostile plugin answers is a typed failure of the call: JSON nested too
// deep or not JSON is ErrBadOutput, an answer over the output limit
// ErrOutputTooLarge, the plugin's own error ErrGuest; the plugin goes on
// answering after each.
func TestMCPv2Prompts(t *testing.T) {
	l, _ := extismLoader()
	defer l.Close(context.Background())
	ctx := context.Background()
	p, err := l.Load(ctx, mcpv2Config(t, func(context.Context, *HostCall, []uint64) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	ext, err := p.Extender(engine.MiddlewareConfig{}).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Close(ctx)
	if ext.MCP == nil {
		t.Fatal("no MCPProvider for a plugin exporting list_prompts and get_prompt")
	}
	if got, want := ext.MCP.MCPMethods(), []string{engine.MethodListPrompts, engine.MethodGetPrompt}; !slices.Equal(got, want) {
		t.Errorf("MCPMethods() = %v, want %v", got, want)
	}
	list, err := ext.MCP.MCPRequest(ctx, engine.MethodListPrompts, nil)
	var prompts struct{ Prompts []struct{ Name string } }
	if err != nil || json.Unmarshal(list, &prompts) != nil || len(prompts.Prompts) != 5 {
		t.Fatalf("prompts/list: %s, %v; want five prompts", list, err)
	}
	get := func(name string) (json.RawMessage, error) {
		return ext.MCP.MCPRequest(ctx, engine.MethodGetPrompt, json.RawMessage(`{"name":"`+name+`"}`))
	}
	for name, kind := range map[string]error{"deep": ErrBadOutput, "garbage": ErrBadOutput, "huge": ErrOutputTooLarge, "fail": ErrGuest} {
		if _, err := get(name); !errors.Is(err, kind) {
			t.Errorf("prompts/get %s: %v, want %v", name, err, kind)
		}
		if hello, err := get("hello"); err != nil || !json.Valid(hello) {
			t.Errorf("prompts/get hello after %s: %s, %v; want the plugin's answer", name, hello, err)
		}
	}
	if _, err := ext.MCP.MCPRequest(ctx, engine.MethodReadResource, json.RawMessage(`{"uri":"x://y"}`)); !errors.Is(err, ErrABIMismatch) {
		t.Errorf("resources/read of a plugin without it: %v, want ErrABIMismatch", err)
	}
}
