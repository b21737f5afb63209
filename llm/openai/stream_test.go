package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/morphhost/morph/llm"
)

// sse writes server-sent events the way OpenAI streams a chat completion.
type sse struct {
	w http.ResponseWriter
}

func startSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	return sse{w}
}

// event writes one "data:" event and flushes it to the client.
func (s sse) event(data string) {
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	http.NewResponseController(s.w).Flush()
}

// role is the first chunk OpenAI sends: the role, no text yet.
func (s sse) role() {
	s.event(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`)
}

// text sends one piece of the first choice's text.
func (s sse) text(d string) { s.choice(0, d) }

func (s sse) choice(index int, d string) {
	s.event(fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":%d,"delta":{"content":%q},"finish_reason":null}],"usage":null}`, index, d))
}

// finish ends the first choice.
func (s sse) finish() {
	s.event(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`)
}

// usage is the extra chunk stream_options.include_usage asks for.
func (s sse) usage(in, out int) {
	s.event(fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out))
}

func (s sse) done() { s.event("[DONE]") }

// streamOK streams pieces as a complete reply with usage.
func streamOK(pieces ...string) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		s := startSSE(w)
		s.role()
		for _, p := range pieces {
			s.text(p)
		}
		s.finish()
		s.usage(1, 1)
		s.done()
	}
}

// collector records the deltas Stream receives.
type collector struct {
	deltas  []string
	onDelta func(d string) // optional, called after recording
}

func (c *collector) stream(d string) {
	c.deltas = append(c.deltas, d)
	if c.onDelta != nil {
		c.onDelta(d)
	}
}

// abort drops the connection, as a crashed server or proxy would, leaving a
// chunked reply unterminated.
func abort() { panic(http.ErrAbortHandler) }

func TestStreamDeltasInOrderWithUsage(t *testing.T) {
	gotFirst := make(chan struct{})
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		sw := startSSE(w)
		sw.role()
		sw.text("Hel")
		// The rest waits until the client has passed on the first piece,
		// so pieces must reach Stream as they arrive, not at the end.
		select {
		case <-gotFirst:
		case <-time.After(5 * time.Second):
			t.Error("first delta not delivered while the stream was open")
		}
		sw.choice(1, "other choice") // n > 1: ignored
		sw.text("lo, ")
		sw.text("wörld")
		sw.finish()
		sw.usage(1000, 500)
		sw.done()
	})
	c := s.client(t, func(cfg *Config) {
		cfg.Model = "priced-model"
		cfg.Pricing = llm.Pricing{"priced-model": {InputPerMillion: 2.0, OutputPerMillion: 8.0}}
	})
	col := &collector{}
	col.onDelta = func(string) {
		if len(col.deltas) == 1 {
			close(gotFirst)
		}
	}
	res, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Stream: col.stream})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if want := []string{"Hel", "lo, ", "wörld"}; !slices.Equal(col.deltas, want) {
		t.Errorf("deltas = %q, want %q", col.deltas, want)
	}
	if res.Text != strings.Join(col.deltas, "") || res.Text != "Hello, wörld" {
		t.Errorf("Text = %q, deltas joined = %q", res.Text, strings.Join(col.deltas, ""))
	}
	if res.JSON != nil {
		t.Errorf("JSON = %v without ForceJSON", res.JSON)
	}
	checkPricedUsage(t, res)
	if n := s.count(); n != 1 {
		t.Fatalf("server saw %d requests, want 1", n)
	}
	r := s.request(0)
	if got := r.header.Get("Accept"); got != "text/event-stream" {
		t.Errorf("Accept = %q", got)
	}
	body := decode(t, r.body)
	if body["stream"] != true || !reflect.DeepEqual(body["stream_options"], map[string]any{"include_usage": true}) {
		t.Errorf("body stream = %v, stream_options = %v; want true and include_usage", body["stream"], body["stream_options"])
	}
}

// The streamed request is the non-streamed one plus the two stream fields:
// every parameter, explicit zeros included, and JSON mode map the same way.
func TestStreamRequestBodyMatchesNonStreamed(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			writeReply(w, "test-model", `{"answer":42}`, 1, 1)
			return
		}
		streamOK(`{"answer"`, `:42}`)(n, w, r)
	})
	c := s.client(t, nil)
	req := llm.Request{
		Model:     "gpt-test",
		Messages:  []llm.Message{{Role: llm.RoleSystem, Content: "be terse"}, {Role: llm.RoleUser, Content: "hi"}},
		ForceJSON: true,
		Parameters: map[string]any{
			"temperature": 0, "top_p": 0.5, "max_tokens": 64, "seed": 7,
			"stop": "END", "logit_bias": map[string]any{"11": 5},
		},
	}
	if _, err := c.Chat(context.Background(), req); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	col := &collector{}
	req.Stream = col.stream
	res, err := c.Chat(context.Background(), req)
	if err != nil {
		t.Fatalf("streamed Chat: %v", err)
	}
	if !reflect.DeepEqual(res.JSON, map[string]any{"answer": 42.0}) {
		t.Errorf("JSON = %#v, want the decoded streamed reply", res.JSON)
	}
	if !slices.Equal(col.deltas, []string{`{"answer"`, `:42}`}) {
		t.Errorf("deltas = %q", col.deltas)
	}

	plain, streamed := decode(t, s.request(0).body), decode(t, s.request(1).body)
	if plain["temperature"] != 0.0 || plain["response_format"] == nil {
		t.Fatalf("non-streamed body lacks the explicit zero or JSON mode: %v", plain)
	}
	plain["stream"] = true
	plain["stream_options"] = map[string]any{"include_usage": true}
	if !reflect.DeepEqual(streamed, plain) {
		a, _ := json.MarshalIndent(streamed, "", "  ")
		b, _ := json.MarshalIndent(plain, "", "  ")
		t.Errorf("streamed body\n%s\nwant\n%s", a, b)
	}
}

func TestStreamWithoutUsageChunk(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		sw := startSSE(w)
		sw.text("no usage")
		sw.finish()
		sw.done()
	})
	c := s.client(t, func(cfg *Config) {
		cfg.Pricing = llm.Pricing{"test-model": {InputPerMillion: 1, OutputPerMillion: 1}}
	})
	col := &collector{}
	res, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Stream: col.stream})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	// Estimated: "hi" is 1 token, "no usage" 2, at about four characters a token.
	want := llm.Usage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3, Cost: 3e-6}
	if res.Text != "no usage" {
		t.Errorf("Text = %q, want %q", res.Text, "no usage")
	}
	if res.Usage != want {
		t.Errorf("Usage = %+v, want %+v", res.Usage, want)
	}
	if !res.UsageEstimated {
		t.Errorf("UsageEstimated = false, want true")
	}
}

func TestStream500BeforeStreamingRetried(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			writeError(w, http.StatusInternalServerError, "boom")
		case 2:
			w.Header().Set("Retry-After-Ms", "150")
			writeError(w, http.StatusTooManyRequests, "slow down")
		default:
			streamOK("re", "covered")(n, w, r)
		}
	})
	c := s.client(t, nil)
	clock := fakeTime(c)
	col := &collector{}
	res, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Stream: col.stream})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if len(clock.waits) != 2 || clock.waits[1] != 150*time.Millisecond {
		t.Errorf("waited %v between attempts; the 429's Retry-After-Ms of 150ms was not honoured", clock.waits)
	}
	if res.Text != "recovered" || !slices.Equal(col.deltas, []string{"re", "covered"}) {
		t.Errorf("Text = %q, deltas = %q", res.Text, col.deltas)
	}
	if n := s.count(); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
	for i := range 3 {
		if body := decode(t, s.request(i).body); body["stream"] != true {
			t.Errorf("request %d: stream = %v", i+1, body["stream"])
		}
	}
}

func TestStreamClientErrorNotRetried(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusBadRequest, "no good")
	})
	c := s.client(t, nil)
	col := &collector{}
	_, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Stream: col.stream})
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusBadRequest {
		t.Fatalf("error %v does not expose the 400 *openai.APIError", err)
	}
	if n := s.count(); n != 1 || len(col.deltas) != 0 {
		t.Errorf("server saw %d requests and %d deltas were delivered, want 1 and 0", n, len(col.deltas))
	}
}

// A stream cut before any text reached the caller is retried like a
// truncated non-streamed reply.
func TestStreamCutBeforeFirstDeltaRetried(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			startSSE(w).role()
			abort()
		case 2: // ends cleanly but empty: a proxy that gave up
			startSSE(w)
		default:
			streamOK("whole")(n, w, r)
		}
	})
	c := s.client(t, nil)
	col := &collector{}
	res, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Stream: col.stream})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if res.Text != "whole" || !slices.Equal(col.deltas, []string{"whole"}) {
		t.Errorf("Text = %q, deltas = %q", res.Text, col.deltas)
	}
	if n := s.count(); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
}

func TestStreamCutMidStreamNotRetried(t *testing.T) {
	cases := map[string]func(sse){
		"connection dropped": func(sw sse) { abort() },
		"ended without finish_reason": func(sw sse) {
			sw.done()
		},
		"error event": func(sw sse) {
			sw.event(`{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`)
		},
	}
	for name, end := range cases {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				sw := startSSE(w)
				sw.role()
				sw.text("Hel")
				sw.text("lo")
				end(sw)
			})
			c := s.client(t, nil)
			col := &collector{}
			res, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Stream: col.stream})
			if err == nil {
				t.Fatalf("Chat succeeded with %q", res.Text)
			}
			t.Logf("error: %v", err)
			if n := s.count(); n != 1 {
				t.Errorf("server saw %d requests, want 1 (no retry after text was delivered)", n)
			}
			if !slices.Equal(col.deltas, []string{"Hel", "lo"}) {
				t.Errorf("deltas = %q", col.deltas)
			}
			for _, want := range []string{"5 bytes", "not retried", "partial reply"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			var apiErr *goopenai.APIError
			if name == "error event" {
				if !errors.As(err, &apiErr) || apiErr.Message != "overloaded" {
					t.Errorf("error %v does not wrap the server's *openai.APIError", err)
				}
			} else if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("error %v does not wrap io.ErrUnexpectedEOF", err)
			}
		})
	}
}

func TestStreamCancelMidStream(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		sw := startSSE(w)
		sw.role()
		sw.text("Hel")
		select { // the model "thinks" until the client goes away
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	c := s.client(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	col := &collector{}
	col.onDelta = func(string) {
		go func() {
			time.Sleep(50 * time.Millisecond) // let Chat block reading the stream
			cancel()
		}()
	}
	start := time.Now()
	_, err := c.Chat(ctx, llm.Request{Messages: userMsg("hi"), Stream: col.stream})
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("Chat returned %v after start; cancellation was not prompt", elapsed)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v is not context.Canceled", err)
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), "not retried") {
		t.Errorf("error %q does not say the partial reply was not retried", err)
	}
	if !slices.Equal(col.deltas, []string{"Hel"}) {
		t.Errorf("deltas = %q", col.deltas)
	}
	if n := s.count(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

// Pieces already received but not yet passed on are dropped once ctx ends,
// rather than delivered after the caller cancelled.
func TestStreamCancelledInCallbackStopsDelivery(t *testing.T) {
	s := newServer(t, streamOK("a", "b", "c"))
	c := s.client(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	col := &collector{onDelta: func(string) { cancel() }}
	_, err := c.Chat(ctx, llm.Request{Messages: userMsg("hi"), Stream: col.stream})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v is not context.Canceled", err)
	}
	if !slices.Equal(col.deltas, []string{"a"}) {
		t.Errorf("deltas = %q, want only the one before cancelling", col.deltas)
	}
}

func TestStreamAttemptTimeoutCoversWholeStream(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		sw := startSSE(w)
		sw.text("slow")
		select { // headers and a first piece came fast; the rest never does
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	c := s.client(t, func(cfg *Config) { cfg.Timeout = 200 * time.Millisecond })
	col := &collector{}
	start := time.Now()
	_, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Stream: col.stream})
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("returned after %v; the per-attempt timeout did not cover the stream", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("error %v is not the attempt timeout", err)
	}
	t.Logf("error: %v", err)
	if n := s.count(); n != 1 {
		t.Errorf("server saw %d requests, want 1 (no retry after text was delivered)", n)
	}
}

func TestStreamTimeoutBeforeFirstDeltaRetried(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			startSSE(w).role()
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		streamOK("second ", "time")(n, w, r)
	})
	c := s.client(t, func(cfg *Config) { cfg.Timeout = 150 * time.Millisecond })
	col := &collector{}
	res, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Stream: col.stream})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if res.Text != "second time" || s.count() != 2 {
		t.Errorf("Text = %q after %d requests, want %q after 2", res.Text, s.count(), "second time")
	}
}

// A server that ignores "stream": true answers with one JSON body; that is
// reported plainly and not retried.
func TestStreamIgnoredByServer(t *testing.T) {
	s := newServer(t, ok("not streamed"))
	c := s.client(t, nil)
	col := &collector{}
	_, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Stream: col.stream})
	if err == nil || !strings.Contains(err.Error(), "support streaming") {
		t.Fatalf("error = %v, want one saying the server did not stream", err)
	}
	if n := s.count(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}
