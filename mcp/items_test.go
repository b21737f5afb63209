package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

// itemsPlugin is a plugin serving prompts and resources (an
// engine.MCPProvider) whose answers, by method and, for a get or read, by
// name or URI, are whatever the test says: what a guest can write.
type itemsPlugin struct {
	name    string
	answers map[string]string // method, or method+" "+name/uri -> JSON
	mu      sync.Mutex
	calls   []string // "method params", each request
}

func (p *itemsPlugin) Name() string { return p.name }

func (p *itemsPlugin) Open(context.Context) (*engine.Extension, error) {
	return &engine.Extension{MCP: p}, nil
}

func (p *itemsPlugin) MCPMethods() []string {
	return []string{engine.MethodListPrompts, engine.MethodGetPrompt, engine.MethodListResources,
		engine.MethodListResourceTemplates, engine.MethodReadResource, engine.MethodComplete}
}

func (p *itemsPlugin) MCPRequest(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	p.mu.Lock()
	p.calls = append(p.calls, method+" "+string(params))
	p.mu.Unlock()
	var req struct{ Name, URI string }
	_ = json.Unmarshal(params, &req)
	if a, ok := p.answers[strings.TrimSpace(method+" "+req.Name+req.URI)]; ok {
		return json.RawMessage(a), nil
	}
	if a, ok := p.answers[method]; ok {
		return json.RawMessage(a), nil
	}
	return nil, fmt.Errorf("plugin %s: no answer for %s %s", p.name, method, params)
}

// requests are the requests made of p so far.
func (p *itemsPlugin) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// A plugin's prompts and resources are served to an MCP client, a get or
// read forwarded with the client's params; what the plugin answers that
// MCP cannot carry is refused loudly, and a name two plugins list is the
// first's.
func TestPromptsAndResources(t *testing.T) {
	var many, values []string
	for i := range 20 {
		many = append(many, fmt.Sprintf(`{"name":"many_%02d"}`, i))
	}
	for i := range 150 {
		values = append(values, fmt.Sprintf(`"v%d"`, i))
	}
	first := &itemsPlugin{name: "first", answers: map[string]string{
		engine.MethodListPrompts: `{"prompts":[{"name":"greet","arguments":[{"name":"who","required":true}]},` +
			`{"name":""},null,{"name":"untyped"},{"name":"fails"},{"name":"badmsg"}]}`,
		engine.MethodGetPrompt + " greet":   `{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hello"}}]}`,
		engine.MethodGetPrompt + " untyped": `{"messages":[{"role":"user","content":{"text":"no type"}},{"role":"assistant","content":{"mimeType":"image/png","data":"AAEC"}}]}`,
		engine.MethodGetPrompt + " badmsg":  `{"messages":[{"role":"user","content":{"type":"video","data":"AAEC"}}]}`,
		engine.MethodListResources: `{"resources":[{"uri":"test://text","name":"text"},{"uri":"test://blob","name":"blob"},` +
			`{"uri":"relative/path","name":"rel"},{"uri":"test://badblob","name":"badblob"},{"uri":"test://both","name":"both"},` +
			`{"uri":"test://latin1","name":"latin1"}]}`,
		engine.MethodListResourceTemplates:            `{"resourceTemplates":[{"uriTemplate":"test://t/{id}","name":"t"},{"uriTemplate":"test://bad/{id","name":"bad"}]}`,
		engine.MethodReadResource + " test://text":    `{"contents":[{"uri":"test://text","mimeType":"text/plain","text":"hi"}]}`,
		engine.MethodReadResource + " test://blob":    `{"contents":[{"uri":"test://blob","mimeType":"application/octet-stream","blob":"AAEC"}]}`,
		engine.MethodReadResource + " test://badblob": `{"contents":[{"uri":"test://badblob","blob":"not base64!"}]}`,
		engine.MethodReadResource + " test://both":    `{"contents":[{"uri":"test://both","text":"a","blob":"AAEC"}]}`,
		engine.MethodReadResource + " test://latin1":  "{\"contents\":[{\"uri\":\"test://latin1\",\"text\":\"caf\xe9\"}]}",
		engine.MethodReadResource + " test://t/7":     `{"contents":[{"uri":"test://t/7","text":"seven"}]}`,
		engine.MethodComplete:                         `{"completion":{"values":[` + strings.Join(values, ",") + `]}}`,
	}}
	second := &itemsPlugin{name: "second", answers: map[string]string{
		engine.MethodListPrompts:           `{"prompts":[{"name":"greet"},` + strings.Join(many, ",") + `]}`,
		engine.MethodListResources:         `{"resources":[{"uri":"test://text","name":"shadow"}]}`,
		engine.MethodListResourceTemplates: `not JSON`,
	}}
	var logs bytes.Buffer
	eng := engine.New(nil, engine.NewRegistry(), engine.WithExtenders(first, second))
	srv := newServer(t, eng, mcp.Options{MaxItems: 8, Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))})

	wantPrompts := []string{"badmsg", "fails", "greet", "many_00", "many_01", "many_02", "many_03", "many_04", "many_05", "many_06", "untyped"}
	if got := srv.Prompts(); !slices.Equal(got, wantPrompts) {
		t.Errorf("Prompts() = %v, want %v (the first's greet, 8 of second's listed)", got, wantPrompts)
	}
	if n := srv.Refusals().Items; n != 13 {
		t.Errorf("Refusals().Items = %d, want 13 (second's 21 prompts over max_items 8)", n)
	}
	wantResources := []string{"test://badblob", "test://blob", "test://both", "test://latin1", "test://t/{id}", "test://text"}
	if got := srv.Resources(); !slices.Equal(got, wantResources) {
		t.Errorf("Resources() = %v, want %v", got, wantResources)
	}
	for _, warning := range []string{"too many prompts", "null prompts", `key=relative/path`, `key=""`,
		"another plugin's of that name is", "URI template", "resources/templates/list", "plugin=second"} {
		if !strings.Contains(logs.String(), warning) {
			t.Errorf("no warning with %q in the log:\n%s", warning, logs.String())
		}
	}

	cs, _ := connect(t, srv)
	ctx := context.Background()
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) != len(wantPrompts) {
		t.Fatalf("ListPrompts: %v, %v; want %d prompts", prompts, err, len(wantPrompts))
	}
	res, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "you"}})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].Content.(*sdk.TextContent).Text != "hello" {
		t.Errorf("GetPrompt(greet) = %+v, %v; want the first plugin's hello", res, err)
	}
	if c := first.requests(); !slices.ContainsFunc(c, func(s string) bool { return strings.Contains(s, `"who":"you"`) }) {
		t.Errorf("the plugin's requests %q, want the client's arguments passed on", c)
	}
	res, err = cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "untyped"})
	if err != nil || len(res.Messages) != 2 {
		t.Fatalf("GetPrompt(untyped) = %+v, %v; want two messages", res, err)
	}
	if _, ok := res.Messages[1].Content.(*sdk.ImageContent); !ok {
		t.Errorf("untyped's second message %T, want an image", res.Messages[1].Content)
	}
	for _, name := range []string{"fails", "badmsg"} {
		if _, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: name}); err == nil || !strings.Contains(err.Error(), `plugin "first"`) {
			t.Errorf("GetPrompt(%s): %v, want a JSON-RPC error naming the plugin", name, err)
		}
	}

	resources, err := cs.ListResources(ctx, nil)
	if err != nil || len(resources.Resources) != 5 {
		t.Fatalf("ListResources: %v, %v; want 5", resources, err)
	}
	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "test://t/{id}" {
		t.Errorf("ListResourceTemplates: %v, %v; want test://t/{id}", templates, err)
	}
	read := func(uri string) (*sdk.ReadResourceResult, error) {
		return cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	}
	if r, err := read("test://text"); err != nil || r.Contents[0].Text != "hi" {
		t.Errorf("read test://text: %+v, %v; want hi (the first plugin's)", r, err)
	}
	if r, err := read("test://blob"); err != nil || !bytes.Equal(r.Contents[0].Blob, []byte{0, 1, 2}) {
		t.Errorf("read test://blob: %+v, %v; want 00 01 02", r, err)
	}
	if r, err := read("test://t/7"); err != nil || r.Contents[0].Text != "seven" {
		t.Errorf("read test://t/7: %+v, %v; want seven, through the template", r, err)
	}
	if r, err := read("test://latin1"); err != nil || !strings.HasPrefix(r.Contents[0].Text, "caf") {
		t.Errorf("read test://latin1: %+v, %v; want text with its bad byte replaced", r, err)
	}
	for _, uri := range []string{"test://badblob", "test://both"} {
		if _, err := read(uri); err == nil || !strings.Contains(err.Error(), mcp.ErrPluginAnswer.Error()) {
			t.Errorf("read %s: %v, want a JSON-RPC error with %v", uri, err, mcp.ErrPluginAnswer)
		}
	}
	if _, err := read("test://unlisted"); err == nil {
		t.Error("read of a URI no plugin lists succeeded")
	}

	complete := func(ref *sdk.CompleteReference) (*sdk.CompleteResult, error) {
		return cs.Complete(ctx, &sdk.CompleteParams{Ref: ref, Argument: sdk.CompleteParamsArgument{Name: "who", Value: "y"}})
	}
	c, err := complete(&sdk.CompleteReference{Type: "ref/prompt", Name: "greet"})
	if err != nil || len(c.Completion.Values) != 100 || !c.Completion.HasMore || c.Completion.Values[0] != "v0" {
		t.Errorf("complete greet: %+v, %v; want the plugin's first 100 values and hasMore", c, err)
	}
	if c := first.requests()[len(first.requests())-1]; !strings.HasPrefix(c, engine.MethodComplete) || !strings.Contains(c, `"value":"y"`) {
		t.Errorf("the plugin's last request %q, want the completion's params", c)
	}
	c, err = complete(&sdk.CompleteReference{Type: "ref/prompt", Name: "nobody's"})
	if err != nil || len(c.Completion.Values) != 0 {
		t.Errorf("complete of a prompt no plugin lists: %+v, %v; want no values", c, err)
	}
}

// syncWriter is a writer safe for the server's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
