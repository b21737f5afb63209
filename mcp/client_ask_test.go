package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

// answering is a caller that answers its call's questions
// (engine.CallElicitor, engine.CallSampler) with elicited and sampled,
// and keeps what it was asked and whether the call's deadline came with
// each question.
type answering struct {
	callNotes
	elicited, sampled string

	mu       sync.Mutex
	asked    []string
	deadline bool
}

func (a *answering) ask(ctx context.Context, params json.RawMessage, answer string) (json.RawMessage, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, string(params))
	_, a.deadline = ctx.Deadline()
	return json.RawMessage(answer), nil
}

func (a *answering) Elicit(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	return a.ask(ctx, params, a.elicited)
}

func (a *answering) CreateMessage(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	return a.ask(ctx, params, a.sampled)
}

// newAnswering is a caller whose user answers "Ada" and whose model "hi".
func newAnswering() *answering {
	return &answering{elicited: `{"action":"accept","content":{"name":"Ada"}}`,
		sampled: `{"role":"assistant","model":"m","content":{"type":"text","text":"hi"}}`}
}

// callWith calls tool of eng with the caller n (none when nil) and gives
// its text, failing t on an error.
func callWith(t *testing.T, eng *engine.Engine, tool string, n engine.CallNotifier, params map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if n != nil {
		ctx = engine.WithCallNotifier(ctx, n)
	}
	tl, ok := eng.Registry().Get(tool)
	if !ok {
		t.Fatalf("no tool %q", tool)
	}
	out, _, err := tl.(engine.ImageTool).ExecuteImages(ctx, params)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return out
}

// A server's elicitation and sampling during a call reach the call's
// caller, with the call's deadline, and the caller's answers reach the
// server.
func TestClientRelaysQuestions(t *testing.T) {
	t.Parallel()
	eng, _, _, err := clientEngine(t, fixtureServer("ask", "ask"))
	if err != nil {
		t.Fatal(err)
	}
	a := newAnswering()
	if out := callWith(t, eng, "ask.elicit", a, nil); out != "accept Ada" {
		t.Errorf("elicit: %q, want the caller's answer, accept Ada", out)
	}
	if out := callWith(t, eng, "ask.sample", a, nil); out != "model m said hi" {
		t.Errorf("sample: %q, want the caller's model's answer", out)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.asked) != 2 || !strings.Contains(a.asked[0], "Your name?") || !strings.Contains(a.asked[1], "Say hi") {
		t.Errorf("the caller was asked %q, want the server's elicitation, then its sampling request", a.asked)
	}
	if !a.deadline {
		t.Error("the question came without the call's deadline")
	}
}

// Without a caller that can answer (none, or one that only takes
// notifications: morph run), an elicitation is declined and a sampling
// request refused with an error naming why, each logged once per server;
// with two calls in flight, a question could be either's and reaches
// neither caller.
func TestClientQuestionsWithoutCaller(t *testing.T) {
	t.Parallel()
	eng, _, logs, err := clientEngine(t, fixtureServer("ask", "ask"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []engine.CallNotifier{nil, &callNotes{}} {
		if out := callWith(t, eng, "ask.elicit", n, nil); out != "decline <nil>" {
			t.Errorf("elicit with caller %T: %q, want decline", n, out)
		}
		if out := callWith(t, eng, "ask.sample", n, nil); !strings.Contains(out, "sampling failed") || !strings.Contains(out, "not relayed: the call's caller cannot answer") {
			t.Errorf("sample with caller %T: %q, want an error naming why", n, out)
		}
	}
	for _, kind := range []string{"elicitation", "sampling request"} {
		if n := strings.Count(logs.String(), "mcp server's "+kind+" not relayed"); n != 1 {
			t.Errorf("%d warnings of a %s not relayed, want 1; log:\n%s", n, kind, logs)
		}
	}

	callers := []*answering{newAnswering(), newAnswering()}
	for tool, want := range map[string]string{"ask.elicit": "decline <nil>", "ask.sample": "more than one call"} {
		outs := make([]string, len(callers))
		var wg sync.WaitGroup
		for i, a := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i] = callWith(t, eng, tool, a, map[string]any{"together": len(callers)})
			}()
		}
		wg.Wait()
		for i, out := range outs {
			if !strings.Contains(out, want) {
				t.Errorf("%s, two calls in flight: call %d got %q, want %q", tool, i, out, want)
			}
		}
	}
	for i, a := range callers {
		if len(a.asked) != 0 {
			t.Errorf("with two calls in flight, caller %d was asked %q", i, a.asked)
		}
	}
}

// morph mcp serve fronts a server that asks: the outer client's user
// answers the elicitation, its model the sampling request (outer client ->
// morph's server -> morph's client -> the server, and back).
func TestServeRelaysQuestionsOfServers(t *testing.T) {
	t.Parallel()
	eng, _, _, err := clientEngine(t, fixtureServer("ask", "ask"))
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, eng, mcp.Options{MaxSamplingPerCall: 1, MaxNotifications: 1})
	st, ct := sdk.NewInMemoryTransports()
	go srv.Serve(context.Background(), st)
	var asked []string
	var mu sync.Mutex
	outer := sdk.NewClient(&sdk.Implementation{Name: "outer", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params.Message)
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Grace"}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params.Messages[0].Content.(*sdk.TextContent).Text)
			return &sdk.CreateMessageResult{Role: "assistant", Model: "outer-model", Content: &sdk.TextContent{Text: "hello"}}, nil
		},
	})
	cs, err := outer.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// Each call asks twice: past the call's caps (max_notifications,
	// max_sampling_per_call, 1 each here), as for a plugin's questions, the
	// second is declined or refused, and the outer client not asked.
	if out := text(call(t, cs, "ask.elicit", map[string]any{"times": 2})); out != "accept Grace\ndecline <nil>" {
		t.Errorf("elicit twice through morph mcp serve: %q, want the outer client's user's answer, then a decline", out)
	}
	out := text(call(t, cs, "ask.sample", map[string]any{"times": 2}))
	if first, second, _ := strings.Cut(out, "\n"); first != "model outer-model said hello" || !strings.Contains(second, "max_sampling_per_call reached") {
		t.Errorf("sample twice through morph mcp serve: %q, want the outer client's model's answer, then max_sampling_per_call's refusal", out)
	}
	if n := srv.Refusals().Sampling; n != 1 {
		t.Errorf("Refusals().Sampling %d, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"Your name?", "Say hi"}; strings.Join(asked, "|") != strings.Join(want, "|") {
		t.Errorf("the outer client was asked %q, want %q", asked, want)
	}
}
