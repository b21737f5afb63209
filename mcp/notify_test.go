package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

// richTool answers every kind of abi.Content and a structured result, and
// first reports progress and log messages, n of each, to the call's
// notifier.
type richTool struct {
	schemaTool
	n int
}

func (t richTool) ExecuteResult(ctx context.Context, _ map[string]any) (abi.ToolCallOutput, error) {
	if n := engine.CallNotifierOf(ctx); n != nil {
		for i := range t.n {
			n.Progress(float64(i), float64(t.n), "step")
			n.Log("info", "rich", json.RawMessage(`"working"`))
		}
	}
	return abi.ToolCallOutput{Output: "a greeting",
		Content: []abi.Content{
			{Type: "audio", MimeType: "audio/wav", Data: "UklGRg=="},
			{Type: "resource", URI: "test://text", MimeType: "text/plain", Text: "hello"},
			{Type: "resource", URI: "test://blob", MimeType: "application/octet-stream", Data: "AAE="},
			{Type: "resource_link", URI: "file:///a.txt", Name: "a.txt", MimeType: "text/plain"},
		},
		Structured: json.RawMessage(`{"words":1}`)}, nil
}

// A tool's content beyond text and images reaches the client as MCP
// content of its kind, in order after the text, and its structured result
// as structuredContent.
func TestRichContent(t *testing.T) {
	reg := engine.NewRegistry()
	reg.Register(richTool{schemaTool: schemaTool{name: "greet", schema: `{"type":"object"}`}})
	cs, _ := connect(t, newServer(t, engine.New(nil, reg), mcp.Options{}))
	res := call(t, cs, "greet", nil)
	if res.IsError || len(res.Content) != 5 || text(res) != "a greeting" {
		t.Fatalf("greet: isError %v, %d contents, text %q; want 5, a greeting", res.IsError, len(res.Content), text(res))
	}
	if a, ok := res.Content[1].(*sdk.AudioContent); !ok || a.MIMEType != "audio/wav" || string(a.Data) != "RIFF" {
		t.Errorf("content 1: %#v, want audio/wav RIFF", res.Content[1])
	}
	if r, ok := res.Content[2].(*sdk.EmbeddedResource); !ok || r.Resource.URI != "test://text" || r.Resource.Text != "hello" || r.Resource.MIMEType != "text/plain" {
		t.Errorf("content 2: %#v, want the text resource", res.Content[2])
	}
	if r, ok := res.Content[3].(*sdk.EmbeddedResource); !ok || r.Resource.URI != "test://blob" || !bytes.Equal(r.Resource.Blob, []byte{0, 1}) {
		t.Errorf("content 3: %#v, want the blob resource", res.Content[3])
	}
	if l, ok := res.Content[4].(*sdk.ResourceLink); !ok || l.URI != "file:///a.txt" || l.Name != "a.txt" {
		t.Errorf("content 4: %#v, want the resource link", res.Content[4])
	}
	if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"words":1}` {
		t.Errorf("structuredContent %s, want {\"words\":1}", b)
	}
}

// A call's progress (with the client's token) and log messages reach the
// client as notifications, at most MaxNotifications of them; the rest are
// dropped and counted. A call without a token gets no progress.
func TestNotifications(t *testing.T) {
	reg := engine.NewRegistry()
	reg.Register(richTool{schemaTool: schemaTool{name: "greet", schema: `{"type":"object"}`}, n: 3})
	srv := newServer(t, engine.New(nil, reg), mcp.Options{MaxNotifications: 4})
	var mu sync.Mutex
	var progress []float64
	var logs []string
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if req.Params.ProgressToken == "tok" {
				progress = append(progress, req.Params.Progress)
			}
		},
		LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, string(req.Params.Level))
		},
	})
	st, ct := sdk.NewInMemoryTransports()
	go srv.Serve(context.Background(), st)
	cs, err := client.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(context.Background(), &sdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	params := &sdk.CallToolParams{Name: "greet"}
	params.SetProgressToken("tok")
	if res, err := cs.CallTool(context.Background(), params); err != nil || res.IsError {
		t.Fatalf("greet: %v, %+v", err, res)
	}
	// 3 progress and 3 logs, interleaved: the first 4 are sent.
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(progress), len(logs)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if p, l := counts(); p+l >= 4 || time.Now().After(deadline) {
			break
		}
	}
	if p, l := counts(); p != 2 || l != 2 {
		t.Errorf("%d progress and %d log notifications, want 2 and 2 (MaxNotifications 4)", p, l)
	}
	if len(progress) == 2 && progress[0] > progress[1] {
		t.Errorf("progress %v, want increasing", progress)
	}
	if n := srv.Refusals().Notifications; n != 2 {
		t.Errorf("Refusals().Notifications %d, want 2", n)
	}
	// Without a token: the 3 logs, within the cap; no progress.
	if res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "greet"}); err != nil || res.IsError {
		t.Fatalf("greet without a token: %v, %+v", err, res)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, l := counts(); l >= 5 || time.Now().After(deadline) {
			break
		}
	}
	if p, l := counts(); p != 2 || l != 5 {
		t.Errorf("after a call without a token: %d progress and %d log notifications, want 2 and 5", p, l)
	}
	if n := srv.Refusals().Notifications; n != 2 {
		t.Errorf("Refusals().Notifications %d after a call within the cap, want still 2", n)
	}
}

// askTool asks the caller's user for a name (engine.CallElicitor) and
// answers the answer's JSON, or the error.
type askTool struct{ schemaTool }

func (t askTool) Execute(ctx context.Context, _ map[string]any) (string, error) {
	el, ok := engine.CallNotifierOf(ctx).(engine.CallElicitor)
	if !ok {
		return "no elicitor", nil
	}
	res, err := el.Elicit(ctx, json.RawMessage(`{"message":"name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`))
	if err != nil {
		return "error: " + err.Error(), nil
	}
	return string(res), nil
}

// A tool's elicitation reaches a client that declared the capability, and
// its answer the tool; a client without it gets the tool an error.
func TestElicit(t *testing.T) {
	reg := engine.NewRegistry()
	reg.Register(askTool{schemaTool{name: "ask", schema: `{"type":"object"}`}})
	srv := newServer(t, engine.New(nil, reg), mcp.Options{})
	for _, asks := range []bool{true, false} {
		opts := &sdk.ClientOptions{}
		var asked []string
		if asks {
			opts.ElicitationHandler = func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				asked = append(asked, req.Params.Message)
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
			}
		}
		st, ct := sdk.NewInMemoryTransports()
		go srv.Serve(context.Background(), st)
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts).Connect(context.Background(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := text(call(t, cs, "ask", nil))
		cs.Close()
		switch {
		case asks && (got != `{"action":"accept","content":{"name":"Ada"}}` || len(asked) != 1 || asked[0] != "name?"):
			t.Errorf("with the capability: the tool got %q, the client was asked %q; want the answer, asked once", got, asked)
		case !asks && !strings.Contains(got, "does not support elicitation"):
			t.Errorf("without the capability: the tool got %q, want an error", got)
		}
	}
}

// debugTool logs n debug messages, then reports 2 progress steps.
type debugTool struct {
	schemaTool
	n int
}

func (t debugTool) Execute(ctx context.Context, _ map[string]any) (string, error) {
	if n := engine.CallNotifierOf(ctx); n != nil {
		for range t.n {
			n.Log("debug", "chatty", json.RawMessage(`"detail"`))
		}
		n.Progress(1, 2, "half")
		n.Progress(2, 2, "done")
	}
	return "said", nil
}

// Log messages below the level the client set are neither sent nor
// counted against max_notifications: 300 debug lines under "error" leave
// the call's 2 progress notifications their room.
func TestNotificationsBelowLevelAreFree(t *testing.T) {
	reg := engine.NewRegistry()
	reg.Register(debugTool{schemaTool: schemaTool{name: "chat", schema: `{"type":"object"}`}, n: 300})
	srv := newServer(t, engine.New(nil, reg), mcp.Options{})
	var mu sync.Mutex
	progress, logs := 0, 0
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress++
		},
		LoggingMessageHandler: func(context.Context, *sdk.LoggingMessageRequest) {
			mu.Lock()
			defer mu.Unlock()
			logs++
		},
	})
	st, ct := sdk.NewInMemoryTransports()
	go srv.Serve(context.Background(), st)
	cs, err := client.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(context.Background(), &sdk.SetLoggingLevelParams{Level: "error"}); err != nil {
		t.Fatal(err)
	}
	params := &sdk.CallToolParams{Name: "chat"}
	params.SetProgressToken("tok")
	if res, err := cs.CallTool(context.Background(), params); err != nil || res.IsError {
		t.Fatalf("chat: %v, %+v", err, res)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		p := progress
		mu.Unlock()
		if p >= 2 || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if progress != 2 || logs != 0 {
		t.Errorf("%d progress and %d log notifications, want 2 and 0", progress, logs)
	}
	if n := srv.Refusals().Notifications; n != 0 {
		t.Errorf("Refusals().Notifications %d, want 0", n)
	}
}
