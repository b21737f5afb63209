package host

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/engine"
)

// notifications is an engine.CallNotifier that keeps what it is told.
type notifications struct {
	token any
	mu    sync.Mutex
	got   []string
}

func (n *notifications) Progress(progress, total float64, message string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, fmt.Sprintf("progress %v/%v", progress, total))
}

func (n *notifications) Log(level, logger string, data json.RawMessage) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, fmt.Sprintf("log %s %s", level, data))
}

func (n *notifications) ProgressToken() any { return n.token }

// sampler is notifications that also samples: it answers "4", and keeps
// the requests.
type sampler struct {
	notifications
	asked []string
}

func (s *sampler) CreateMessage(_ context.Context, params json.RawMessage) (json.RawMessage, error) {
	s.asked = append(s.asked, string(params))
	return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"4"},"model":"m"}`), nil
}

// newsTaker is notifications that also takes resource news
// (engine.CallItemNotifier).
type newsTaker struct{ notifications }

func (n *newsTaker) ResourceUpdated(uri string) { n.got = append(n.got, "updated "+uri) }
func (n *newsTaker) ItemsChanged()              { n.got = append(n.got, "items changed") }

// A hyper-mcp v2 plugin's notify_progress and notify_logging_message reach
// the call's engine.CallNotifier (the conformance fixture's tools), its
// progress only when the caller has a token, which the plugin's request
// context carries; its create_elicitation is declined when the caller
// cannot ask; its create_message relays to a caller that samples
// (engine.CallSampler), else answers an error object; its
// notify_resource_updated and list_changed notifications reach a caller
// that takes them (engine.CallItemNotifier); its audio and resource content reach CallToolResult.
func TestMCPv2Notifications(t *testing.T) {
	l, _ := extismLoader()
	e := engine.New(nil, nil, engine.WithExtenders(l.Extender(Config{Path: extismGuestWasm(t, "conformance"), Name: "conformance"}, engine.MiddlewareConfig{})))
	defer e.Close(context.Background())
	ctx := context.Background()
	call := func(n *notifications, tool string) engine.ToolResult {
		t.Helper()
		res, err := e.CallToolResult(engine.WithCallNotifier(ctx, n), "s", tool, map[string]any{}, engine.RunOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res
	}
	n := &notifications{token: "tok"}
	call(n, "test_tool_with_progress")
	call(n, "test_tool_with_logging")
	want := []string{"progress 0/100", "progress 50/100", "progress 100/100",
		`log info "Tool execution started"`, `log info "Tool processing data"`, `log info "Tool execution completed"`}
	if !slices.Equal(n.got, want) {
		t.Errorf("with a token: notified %q, want %q", n.got, want)
	}
	n = &notifications{}
	call(n, "test_tool_with_progress")
	if len(n.got) != 0 {
		t.Errorf("without a token: notified %q, want nothing", n.got)
	}
	// A caller that cannot ask its user: create_elicitation declines.
	if res, err := e.CallToolResult(engine.WithCallNotifier(ctx, n), "s", "test_elicitation", map[string]any{"message": "name?"}, engine.RunOptions{}); err != nil ||
		res.Output != `User response: {"action":"decline"}` {
		t.Errorf("test_elicitation without an elicitor: %q, %v; want a decline", res.Output, err)
	}
	// No caller that samples: create_message answers an error the plugin
	// reads; one that does: its answer, after the request was checked.
	res, err := e.CallToolResult(engine.WithCallNotifier(ctx, n), "s", "test_sampling", map[string]any{"prompt": "2+2?"}, engine.RunOptions{})
	if err != nil || !strings.HasPrefix(res.Output, `LLM response: {"error":{"code":-32601,"message":"sampling is not available`) {
		t.Errorf("test_sampling without a sampler: %q, %v; want the error object", res.Output, err)
	}
	s := &sampler{}
	if res, err := e.CallToolResult(engine.WithCallNotifier(ctx, s), "s", "test_sampling", map[string]any{"prompt": "2+2?"}, engine.RunOptions{}); err != nil ||
		res.Output != `LLM response: {"role":"assistant","content":{"type":"text","text":"4"},"model":"m"}` ||
		len(s.asked) != 1 || s.asked[0] != `{"maxTokens":100,"messages":[{"content":{"text":"2+2?","type":"text"},"role":"user"}]}` {
		t.Errorf("test_sampling with a sampler: %q, %v, asked %q; want the answer, asked once", res.Output, err, s.asked)
	}
	// Resource news reach a caller that takes them.
	news := &newsTaker{}
	for _, args := range []map[string]any{{"uri": "test://watched-resource"}, {"list": "resources"}, {"list": "prompts"}} {
		if _, err := e.CallToolResult(engine.WithCallNotifier(ctx, news), "s", "test_notify", args, engine.RunOptions{}); err != nil {
			t.Fatalf("test_notify %v: %v", args, err)
		}
	}
	if want := []string{"updated test://watched-resource", "items changed", "items changed"}; !slices.Equal(news.got, want) {
		t.Errorf("test_notify: the notifier got %q, want %q", news.got, want)
	}
	res = call(n, "test_audio_content")
	if len(res.Content) != 1 || res.Content[0].Type != "audio" || res.Content[0].MimeType != "audio/wav" || res.Content[0].Data == "" {
		t.Errorf("test_audio_content: %+v, want one audio/wav item", res.Content)
	}
	res = call(n, "test_embedded_resource")
	if len(res.Content) != 1 || res.Content[0].URI != "test://embedded-resource" || res.Output != "This is an embedded resource content." {
		t.Errorf("test_embedded_resource: output %q, content %+v; want the resource, its text as the output", res.Output, res.Content)
	}
}

// An embedding host's create_message replaces morph's: the plugin gets
// its answer, and the call's sampler is not asked.
func TestMCPv2HostCreateMessage(t *testing.T) {
	l, _ := extismLoader()
	ptr := []api.ValueType{api.ValueTypeI64}
	own := HostFunction{Name: "create_message", Params: ptr, Results: ptr, Func: func(_ context.Context, call *HostCall, stack []uint64) (err error) {
		stack[0], err = call.Write([]byte(`{"role":"assistant","content":{"type":"text","text":"the host's"},"model":"host"}`))
		return err
	}}
	e := engine.New(nil, nil, engine.WithExtenders(l.Extender(Config{Path: extismGuestWasm(t, "conformance"), Name: "conformance",
		HostFunctions: []HostFunction{own}}, engine.MiddlewareConfig{})))
	defer e.Close(context.Background())
	s := &sampler{}
	res, err := e.CallToolResult(engine.WithCallNotifier(context.Background(), s), "s", "test_sampling", map[string]any{"prompt": "2+2?"}, engine.RunOptions{})
	if err != nil || res.Output != `LLM response: {"role":"assistant","content":{"type":"text","text":"the host's"},"model":"host"}` || len(s.asked) != 0 {
		t.Errorf("test_sampling: %q, %v, the call's sampler asked %q; want the host's answer, the sampler not asked", res.Output, err, s.asked)
	}
}

// longAnswers is notifications whose user answers an elicitation with n
// bytes.
type longAnswers struct {
	notifications
	n int
}

func (l *longAnswers) Elicit(context.Context, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"action":"accept","content":{"username":"` + strings.Repeat("x", l.n) + `"}}`), nil
}

// An elicitation's answer longer than the plugin's input limit is a
// decline: written to the plugin, it would trap the call.
func TestMCPv2ElicitAnswerOverInputLimit(t *testing.T) {
	l, _ := extismLoader()
	cfg := Config{Path: extismGuestWasm(t, "conformance"), Name: "conformance"}
	cfg.Limits.MaxInputBytes = 4 << 10
	e := engine.New(nil, nil, engine.WithExtenders(l.Extender(cfg, engine.MiddlewareConfig{})))
	defer e.Close(context.Background())
	for _, n := range []int{100, 8 << 10} {
		res, err := e.CallToolResult(engine.WithCallNotifier(context.Background(), &longAnswers{n: n}), "s", "test_elicitation", map[string]any{"message": "who?"}, engine.RunOptions{})
		declined := strings.Contains(res.Output, `"decline"`)
		if err != nil || declined != (n > 4<<10) {
			t.Errorf("an answer of %d bytes to a plugin taking 4 KiB: %q, %v; want a decline only past the limit", n, res.Output, err)
		}
	}
}
