package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

// contextTool asks the caller's model once for each includeContext in
// values, and answers a line each: "ok", "refused" (ErrSamplingContext)
// or the error.
type contextTool struct {
	schemaTool
	values []string
}

func (t contextTool) Execute(ctx context.Context, _ map[string]any) (string, error) {
	s, ok := engine.CallNotifierOf(ctx).(engine.CallSampler)
	if !ok {
		return "no sampler", nil
	}
	var lines []string
	for _, v := range t.values {
		_, err := s.CreateMessage(ctx, json.RawMessage(fmt.Sprintf(`{"messages":[{"role":"user","content":{"type":"text","text":"q"}}],"maxTokens":10,"includeContext":%q}`, v)))
		switch {
		case errors.Is(err, mcp.ErrSamplingContext):
			lines = append(lines, "refused")
		case err != nil:
			lines = append(lines, "error: "+err.Error())
		default:
			lines = append(lines, "ok")
		}
	}
	return strings.Join(lines, "\n"), nil
}

// A plugin's sampling request that asks for the client's context
// (includeContext thisServer or allServers) is refused before it reaches
// the client; "none" reaches it as "none".
func TestSamplingIncludeContext(t *testing.T) {
	reg := engine.NewRegistry()
	reg.Register(contextTool{schemaTool{name: "ask", schema: `{"type":"object"}`}, []string{"allServers", "thisServer", "none"}})
	srv := newServer(t, engine.New(nil, reg), mcp.Options{})
	var mu sync.Mutex
	var got []string
	st, ct := sdk.NewInMemoryTransports()
	go srv.Serve(context.Background(), st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, req.Params.IncludeContext)
			return &sdk.CreateMessageResult{Role: "assistant", Model: "m", Content: &sdk.TextContent{Text: "a"}}, nil
		},
	}).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if answer := text(call(t, cs, "ask", nil)); answer != "refused\nrefused\nok" {
		t.Errorf("the tool got %q, want the two context requests refused and none answered", answer)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "none" {
		t.Errorf("the client was asked with includeContext %q, want only none", got)
	}
}
