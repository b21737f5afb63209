package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

// sampleTool asks the caller's model (engine.CallSampler) n times, and
// answers each answer's JSON or error, a line each.
type sampleTool struct {
	schemaTool
	n int
}

func (t sampleTool) Execute(ctx context.Context, _ map[string]any) (string, error) {
	s, ok := engine.CallNotifierOf(ctx).(engine.CallSampler)
	if !ok {
		return "no sampler", nil
	}
	var lines []string
	for i := range t.n {
		res, err := s.CreateMessage(ctx, json.RawMessage(fmt.Sprintf(`{"messages":[{"role":"user","content":{"type":"text","text":"q%d"}}],"maxTokens":10}`, i)))
		switch {
		case errors.Is(err, mcp.ErrMaxSampling):
			lines = append(lines, "max")
		case errors.Is(err, engine.ErrNoSampling):
			lines = append(lines, "none")
		case err != nil:
			lines = append(lines, "error: "+err.Error())
		default:
			lines = append(lines, string(res))
		}
	}
	return strings.Join(lines, "\n"), nil
}

// A tool's sampling requests reach a client that declared the capability,
// at most MaxSamplingPerCall in a call: the next is refused
// (ErrMaxSampling) and counted, and a new call may ask again. A client
// without the capability is not asked: engine.ErrNoSampling.
func TestSampling(t *testing.T) {
	reg := engine.NewRegistry()
	reg.Register(sampleTool{schemaTool{name: "ask", schema: `{"type":"object"}`}, 3})
	srv := newServer(t, engine.New(nil, reg), mcp.Options{MaxSamplingPerCall: 2})
	for _, samples := range []bool{true, false} {
		opts := &sdk.ClientOptions{}
		var asked atomic.Int32
		if samples {
			opts.CreateMessageHandler = func(_ context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
				asked.Add(1)
				q := req.Params.Messages[0].Content.(*sdk.TextContent).Text
				return &sdk.CreateMessageResult{Role: "assistant", Model: "m", Content: &sdk.TextContent{Text: "a" + q[1:]}}, nil
			}
		}
		st, ct := sdk.NewInMemoryTransports()
		go srv.Serve(context.Background(), st)
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts).Connect(context.Background(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			got := text(call(t, cs, "ask", nil))
			want := "none\nnone\nnone"
			if samples {
				want = `{"content":{"type":"text","text":"a0"},"model":"m","role":"assistant"}` + "\n" +
					`{"content":{"type":"text","text":"a1"},"model":"m","role":"assistant"}` + "\nmax"
			}
			if got != want {
				t.Errorf("sampling client %v: the tool got %q, want %q", samples, got, want)
			}
		}
		cs.Close()
		if want := map[bool]int32{true: 4, false: 0}[samples]; asked.Load() != want {
			t.Errorf("sampling client %v: asked %d times, want %d", samples, asked.Load(), want)
		}
	}
	if n := srv.Refusals().Sampling; n != 2 {
		t.Errorf("Refusals().Sampling %d, want 2 (one a call past the cap)", n)
	}
}
