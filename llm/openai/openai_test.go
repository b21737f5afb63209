package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/llm"
)

const testKey = "sk-test-secret"

// captured is one request the fake server received.
type captured struct {
	method, path string
	header       http.Header
	body         []byte
}

// fakeServer speaks the Chat Completions wire format; reply decides the
// answer to the n-th request (1-based).
type fakeServer struct {
	*httptest.Server
	mu    sync.Mutex
	reqs  []captured
	reply func(n int, w http.ResponseWriter, r *http.Request)
}

func newServer(t *testing.T, reply func(n int, w http.ResponseWriter, r *http.Request)) *fakeServer {
	t.Helper()
	s := &fakeServer{reply: reply}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, captured{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
		n := len(s.reqs)
		s.mu.Unlock()
		s.reply(n, w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *fakeServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func (s *fakeServer) request(i int) captured {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[i]
}

// client builds a Client for s with fast retries; mut adjusts the config.
func (s *fakeServer) client(t *testing.T, mut func(*Config)) *Client {
	t.Helper()
	cfg := Config{
		BaseURL:        s.URL + "/v1",
		APIKey:         testKey,
		Model:          "test-model",
		RetryBaseDelay: time.Millisecond,
		Logger:         slog.New(slog.DiscardHandler),
	}
	if mut != nil {
		mut(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// fakeClock stands in for a client's clock (fakeTime): it records each wait
// between attempts and moves its time on by it without waiting, so a test
// of the retry schedule reads the schedule exactly and runs at once. Chat
// reads the clock and waits on its caller's goroutine: the test reads
// waits after Chat returns, without locking.
type fakeClock struct {
	now   time.Time
	waits []time.Duration
}

// fakeTime gives c a fakeClock.
func fakeTime(c *Client) *fakeClock {
	f := &fakeClock{now: time.Now()}
	c.now = func() time.Time { return f.now }
	c.wait = func(ctx context.Context, d time.Duration) error {
		f.waits = append(f.waits, d)
		f.now = f.now.Add(d)
		return ctx.Err()
	}
	return f
}

func writeReply(w http.ResponseWriter, model, text string, in, out int) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":%q,
		"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, model, text, in, out, in+out)
}

func ok(text string) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { writeReply(w, "test-model", text, 1, 1) }
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":"test_error","param":null,"code":null}}`, msg)
}

func userMsg(s string) []llm.Message { return []llm.Message{{Role: llm.RoleUser, Content: s}} }

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, b)
	}
	return m
}

func TestRequestWireFormat(t *testing.T) {
	s := newServer(t, ok(`{"answer":42}`))
	c := s.client(t, nil)

	// Every supported key, each in a representation a JSON or TOML decoder
	// really produces.
	params := map[string]any{
		"temperature":           0.25,
		"top_p":                 json.Number("0.5"),
		"max_tokens":            int64(256),   // TOML integer
		"max_completion_tokens": float64(512), // JSON number
		"seed":                  42,
		"stop":                  []any{"END", "STOP"},
		"presence_penalty":      0.5,
		"frequency_penalty":     -0.5,
		"n":                     json.Number("1"),
		"logit_bias":            map[string]any{"50256": -100.0, "11": int64(5)},
		"logprobs":              true,
		"top_logprobs":          int64(3),
		"user":                  "user-1",
		"reasoning_effort":      "low",
		"service_tier":          "flex",
		"parallel_tool_calls":   false,
		"store":                 true,
		"metadata":              map[string]any{"run": "r1"},
		"verbosity":             "medium",
		"safety_identifier":     "sid-1",
		"chat_template_kwargs":  map[string]any{"enable_thinking": false},
		"guided_choice":         []string{"yes", "no"},
	}
	if got, want := slices.Sorted(func(yield func(string) bool) {
		for k := range params {
			if !yield(k) {
				return
			}
		}
	}), SupportedParameters(); !slices.Equal(got, want) {
		t.Fatalf("test does not cover every supported parameter:\n test: %v\n  pkg: %v", got, want)
	}

	res, err := c.Chat(context.Background(), llm.Request{
		Model: "gpt-test",
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "be terse"},
			{Role: llm.RoleUser, Content: "hi"},
		},
		ForceJSON:  true,
		Parameters: params,
	})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if res.Text != `{"answer":42}` {
		t.Errorf("Text = %q", res.Text)
	}
	if !reflect.DeepEqual(res.JSON, map[string]any{"answer": 42.0}) {
		t.Errorf("JSON = %#v, want the decoded reply", res.JSON)
	}

	if n := s.count(); n != 1 {
		t.Fatalf("server saw %d requests, want 1", n)
	}
	r := s.request(0)
	if r.method != http.MethodPost || r.path != "/v1/chat/completions" {
		t.Errorf("request = %s %s, want POST /v1/chat/completions", r.method, r.path)
	}
	if got := r.header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
	if got := r.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	want := decode(t, []byte(`{
		"model": "gpt-test",
		"messages": [
			{"role": "system", "content": "be terse"},
			{"role": "user", "content": "hi"}
		],
		"stream": false,
		"response_format": {"type": "json_object"},
		"temperature": 0.25,
		"top_p": 0.5,
		"max_tokens": 256,
		"max_completion_tokens": 512,
		"seed": 42,
		"stop": ["END", "STOP"],
		"presence_penalty": 0.5,
		"frequency_penalty": -0.5,
		"n": 1,
		"logit_bias": {"50256": -100, "11": 5},
		"logprobs": true,
		"top_logprobs": 3,
		"user": "user-1",
		"reasoning_effort": "low",
		"service_tier": "flex",
		"parallel_tool_calls": false,
		"store": true,
		"metadata": {"run": "r1"},
		"verbosity": "medium",
		"safety_identifier": "sid-1",
		"chat_template_kwargs": {"enable_thinking": false},
		"guided_choice": ["yes", "no"]
	}`))
	if got := decode(t, r.body); !reflect.DeepEqual(got, want) {
		gotJSON, _ := json.MarshalIndent(got, "", "  ")
		wantJSON, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("body mismatch\n got: %s\nwant: %s", gotJSON, wantJSON)
	}
}

// go-openai tags temperature and friends omitempty; an explicit 0 must still
// reach the server or it silently uses its default (temperature 1).
func TestExplicitZerosAndDefaults(t *testing.T) {
	s := newServer(t, ok("fine"))
	c := s.client(t, func(cfg *Config) { cfg.APIKey = "" })

	_, err := c.Chat(context.Background(), llm.Request{
		Messages: userMsg("hi"),
		Parameters: map[string]any{
			"temperature":       0,
			"top_p":             0.0,
			"presence_penalty":  json.Number("0"),
			"frequency_penalty": int64(0),
			"top_logprobs":      0,
			"seed":              0,
			"stop":              "END",
		},
	})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	r := s.request(0)
	want := decode(t, []byte(`{
		"model": "test-model",
		"messages": [{"role": "user", "content": "hi"}],
		"stream": false,
		"temperature": 0,
		"top_p": 0,
		"presence_penalty": 0,
		"frequency_penalty": 0,
		"top_logprobs": 0,
		"seed": 0,
		"stop": ["END"]
	}`))
	if got := decode(t, r.body); !reflect.DeepEqual(got, want) {
		t.Errorf("body = %s\nwant %v", r.body, want)
	}
	if got := r.header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q with no API key, want none", got)
	}
}

// max_tokens and max_completion_tokens are each sent under their own name,
// whatever the model: a local server reads only max_tokens, and an OpenAI
// reasoning model only max_completion_tokens, so neither is translated, and
// the server, not go-openai's list of model names, refuses the one it does
// not take (go-openai refused max_tokens for "o3-mini" before sending it).
func TestTokenLimitKeysSentAsWritten(t *testing.T) {
	for _, model := range []string{"llama-3.1-8b-instruct", "o3-mini"} {
		for _, key := range []string{"max_tokens", "max_completion_tokens"} {
			s := newServer(t, ok("fine"))
			c := s.client(t, func(cfg *Config) { cfg.Model = model })
			if _, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Parameters: map[string]any{key: int64(300)}}); err != nil {
				t.Fatalf("%s with %s: %v", model, key, err)
			}
			want := decode(t, []byte(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}],"stream":false,"`+key+`":300}`))
			if got := decode(t, s.request(0).body); !reflect.DeepEqual(got, want) {
				t.Errorf("%s with %s: body = %s\nwant %v", model, key, s.request(0).body, want)
			}
		}
	}
}

func TestUnknownParameterRejectedBeforeSending(t *testing.T) {
	s := newServer(t, ok("never"))
	c := s.client(t, nil)
	params := map[string]any{"temprature": 0.5, "bogus": 1, "stream": true, "top_p": 0.9}

	_, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Parameters: params})
	if err == nil {
		t.Fatal("Chat accepted unknown parameters")
	}
	if n := s.count(); n != 0 {
		t.Fatalf("server saw %d requests, want 0", n)
	}
	var perr *ParametersError
	if !errors.As(err, &perr) {
		t.Fatalf("error %T %v is not a *ParametersError", err, err)
	}
	var keys []string
	for _, p := range perr.Problems {
		keys = append(keys, p.Key)
	}
	if want := []string{"bogus", "stream", "temprature"}; !slices.Equal(keys, want) {
		t.Errorf("problem keys = %v, want %v (sorted, valid top_p excluded)", keys, want)
	}
	if !slices.Equal(perr.Supported, SupportedParameters()) {
		t.Errorf("Supported = %v", perr.Supported)
	}
	msg := err.Error()
	for _, want := range []string{`"bogus"`, `"temprature"`, `did you mean "temperature"`, "set Request.Stream", "supported: chat_template_kwargs, frequency_penalty"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	var one *ParameterError
	if !errors.As(err, &one) || one.Key != "bogus" {
		t.Errorf("errors.As(*ParameterError) = %v, want the first bad key", one)
	}
	// The checker the engine calls gives the same verdict.
	if err2 := c.CheckParameters(params); err2 == nil || err2.Error() != msg {
		t.Errorf("CheckParameters = %v, want %q", err2, msg)
	}
}

func TestWrongTypedParameterRejected(t *testing.T) {
	s := newServer(t, ok("never"))
	c := s.client(t, nil)
	cases := []struct {
		key    string
		value  any
		reason string
	}{
		{"temperature", "hot", `want a number, got string "hot"`},
		{"temperature", -0.1, "want a number >= 0"},
		{"temperature", math.Inf(1), "finite"},
		{"top_p", 1.5, "between 0 and 1"},
		{"max_tokens", 1.5, "want an integer"},
		{"max_tokens", 0, "want an integer >= 1"},
		{"n", json.Number("2.5"), "want an integer"},
		{"seed", "42", "want an integer"},
		{"stop", []any{"ok", 3}, "item 1"},
		{"stop", 7, "want a string or a list of strings"},
		{"logit_bias", map[string]any{"hello": 5}, "not a token ID"},
		{"logit_bias", map[string]any{"11": 101}, "between -100 and 100"},
		{"logit_bias", []any{1}, "want a table"},
		{"metadata", map[string]any{"run": 1}, `"run" is number 1`},
		{"logprobs", "true", "want true or false"},
		{"user", 12, "want a string"},
		{"chat_template_kwargs", "x", "want a table"},
		{"guided_choice", []any{}, "at least one"},
		{"temperature", nil, "null"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s=%v", tc.key, tc.value), func(t *testing.T) {
			params := map[string]any{tc.key: tc.value}
			err := c.CheckParameters(params)
			var perr *ParameterError
			if !errors.As(err, &perr) {
				t.Fatalf("CheckParameters = %v, want a *ParameterError", err)
			}
			if perr.Key != tc.key || !strings.Contains(perr.Reason, tc.reason) {
				t.Errorf("got key %q reason %q, want key %q reason containing %q", perr.Key, perr.Reason, tc.key, tc.reason)
			}
			if !strings.Contains(err.Error(), `"`+tc.key+`"`) {
				t.Errorf("message %q does not name the key", err)
			}
			if _, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Parameters: params}); !errors.As(err, &perr) {
				t.Errorf("Chat error = %v, want the same *ParameterError", err)
			}
		})
	}
	if n := s.count(); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
}

func TestNumericRepresentationsAccepted(t *testing.T) {
	c, err := New(Config{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{2, int8(2), int32(2), int64(2), uint(2), uint64(2), float32(2), 2.0, json.Number("2"), json.Number("2.0")} {
		if err := c.CheckParameters(map[string]any{"max_tokens": v, "temperature": v, "seed": v}); err != nil {
			t.Errorf("%T(%v): %v", v, v, err)
		}
	}
	if err := c.CheckParameters(nil); err != nil {
		t.Errorf("nil params: %v", err)
	}
}

func TestUsageAndCost(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		// Servers often answer with a dated snapshot name; cost must use
		// the name the request priced.
		writeReply(w, "priced-model-2025-01-01", "hello", 1000, 500)
	})
	c := s.client(t, func(cfg *Config) {
		cfg.Model = "priced-model"
		cfg.Pricing = llm.Pricing{"priced-model": {InputPerMillion: 2.0, OutputPerMillion: 8.0}}
	})
	res, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if res.Text != "hello" {
		t.Errorf("Text = %q", res.Text)
	}
	if res.JSON != nil {
		t.Errorf("JSON = %v without ForceJSON, want nil", res.JSON)
	}
	checkPricedUsage(t, res)
}

// syncBuffer is a log sink the test reads while others write to it.
type syncBuffer = testenv.Buffer

func TestRetryOn500ThenSuccess(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			writeError(w, http.StatusInternalServerError, "boom")
			return
		}
		writeReply(w, "test-model", "recovered", 3, 4)
	})
	var logs syncBuffer
	c := s.client(t, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		cfg.RetryBaseDelay = 20 * time.Millisecond
		cfg.Pricing = llm.Pricing{"test-model": {}} // priced: the retry warning is the only log record
	})
	clock := fakeTime(c)
	res, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	// The first backoff: the base delay, randomized by half either way.
	if len(clock.waits) != 1 {
		t.Errorf("waited %v between attempts, want one wait", clock.waits)
	} else if w := clock.waits[0]; w < 10*time.Millisecond || w > 30*time.Millisecond {
		t.Errorf("waited %v between attempts, want 20ms ± 50%%", w)
	}
	if res.Text != "recovered" || res.Usage.TotalTokens != 7 {
		t.Errorf("result = %+v", res)
	}
	if n := s.count(); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
	// The retried body is the same request.
	if a, b := s.request(0).body, s.request(1).body; !bytes.Equal(a, b) {
		t.Errorf("retry body differs:\n%s\n%s", a, b)
	}
	// The wait is counted in Duration (the fake clock moves only by it).
	if len(clock.waits) == 1 && res.Duration != clock.waits[0] {
		t.Errorf("Duration = %v, want the backoff wait %v", res.Duration, clock.waits[0])
	}

	var rec map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(logs.String())), &rec); err != nil {
		t.Fatalf("want exactly one JSON log record, got %q: %v", logs.String(), err)
	}
	for k, want := range map[string]any{"level": "WARN", "attempt": 1.0, "status": 500.0} {
		if rec[k] != want {
			t.Errorf("retry log %s = %v, want %v (%v)", k, rec[k], want, rec)
		}
	}
	if rec["wait"] == nil {
		t.Errorf("retry log has no wait (%v)", rec)
	}
	if strings.Contains(logs.String(), testKey) {
		t.Error("API key appears in the log")
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, "slow down")
			return
		}
		writeReply(w, "test-model", "ok", 1, 1)
	})
	c := s.client(t, nil) // backoff alone would wait ~1ms
	clock := fakeTime(c)
	if _, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")}); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if want := []time.Duration{time.Second}; !slices.Equal(clock.waits, want) {
		t.Errorf("waited %v between attempts, want %v as Retry-After asked", clock.waits, want)
	}
	if n := s.count(); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}

func TestClientErrorsNotRetried(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				writeError(w, status, "no good")
			})
			c := s.client(t, nil)
			_, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
			if err == nil {
				t.Fatal("Chat succeeded")
			}
			if n := s.count(); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
			var apiErr *goopenai.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v does not expose *openai.APIError", err)
			}
			if apiErr.HTTPStatusCode != status || apiErr.Message != "no good" {
				t.Errorf("APIError = %+v", apiErr)
			}
			if !strings.Contains(err.Error(), "1 attempt") {
				t.Errorf("error %q does not give the attempt count", err)
			}
		})
	}
}

// countingTransport counts round trips, to count attempts that never reach a
// server.
type countingTransport struct {
	n atomic.Int32
}

func (ct *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ct.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestNetworkErrorRetriedThenFails(t *testing.T) {
	s := newServer(t, ok("never"))
	base := s.URL
	s.Close() // nothing listens any more: connection refused

	ct := &countingTransport{}
	c, err := New(Config{
		BaseURL:        base + "/v1",
		Model:          "m",
		MaxRetries:     2,
		RetryBaseDelay: time.Millisecond,
		HTTPClient:     &http.Client{Transport: ct},
		Logger:         slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	if err == nil {
		t.Fatal("Chat succeeded against a closed server")
	}
	if n := ct.n.Load(); n != 3 {
		t.Errorf("made %d attempts, want 3 (1 + MaxRetries 2)", n)
	}
	if !strings.Contains(err.Error(), "after 3 attempts") {
		t.Errorf("error %q does not give the attempt count", err)
	}
	var urlErr *url.Error
	if !errors.As(err, &urlErr) {
		t.Errorf("error %v does not expose the *url.Error", err)
	}
}

func TestMaxRetriesExhausted(t *testing.T) {
	for _, tc := range []struct {
		maxRetries, wantRequests int
	}{
		{0, 4}, // default: 3 retries
		{1, 2},
		{-1, 1}, // negative: no retries
	} {
		t.Run(fmt.Sprint(tc.maxRetries), func(t *testing.T) {
			s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				writeError(w, http.StatusServiceUnavailable, "overloaded")
			})
			c := s.client(t, func(cfg *Config) { cfg.MaxRetries = tc.maxRetries })
			_, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
			if err == nil {
				t.Fatal("Chat succeeded")
			}
			if n := s.count(); n != tc.wantRequests {
				t.Errorf("server saw %d requests, want %d", n, tc.wantRequests)
			}
			var apiErr *goopenai.APIError
			if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusServiceUnavailable {
				t.Errorf("error %v does not expose the 503 *openai.APIError", err)
			}
			if want := fmt.Sprintf("after %d attempt", tc.wantRequests); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		})
	}
}

func TestNonJSONServerErrorRetriedAsRequestError(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway) // a proxy's plain-text page
	})
	c := s.client(t, func(cfg *Config) { cfg.MaxRetries = 1 })
	_, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	var reqErr *goopenai.RequestError
	if !errors.As(err, &reqErr) || reqErr.HTTPStatusCode != http.StatusBadGateway {
		t.Fatalf("error %v does not expose the 502 *openai.RequestError", err)
	}
	if n := s.count(); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}

// TestStringErrorKeepsStatus checks that an error body whose "error" is a
// string, as Ollama and Express servers send, keeps its HTTP status: a 503
// is retried, a 404 gets the hint at the API root.
func TestStringErrorKeepsStatus(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":"server busy"}`)
			return
		}
		writeReply(w, "test-model", "hi", 1, 1)
	})
	if _, err := s.client(t, nil).Chat(context.Background(), llm.Request{Messages: userMsg("hi")}); err != nil {
		t.Fatalf("503 then 200: %v", err)
	}
	if n := s.count(); n != 2 {
		t.Errorf("server saw %d requests, want 2 (the 503 retried)", n)
	}

	s = newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":"model \"m\" not found"}`)
	})
	_, err := s.client(t, nil).Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	if err == nil {
		t.Fatal("404 with a string error: no error")
	}
	for _, want := range []string{"answered with HTTP 404", "ending in /v1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("404 with a string error: %q does not say %q", err, want)
		}
	}
}

func TestCancelDuringBackoffReturnsPromptly(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusInternalServerError, "boom")
	})
	c := s.client(t, func(cfg *Config) { cfg.RetryBaseDelay = 10 * time.Second })
	waiting := make(chan struct{})
	c.wait = func(ctx context.Context, d time.Duration) error {
		close(waiting) // Chat is in the backoff wait: the real one, which ctx ends
		return sleep(ctx, d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-waiting
		cancel()
	}()
	start := time.Now()
	_, err := c.Chat(ctx, llm.Request{Messages: userMsg("hi")})
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("Chat returned %v after start; cancellation was not prompt", elapsed)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v is not context.Canceled", err)
	}
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 {
		t.Errorf("error %v lost the last attempt's *openai.APIError", err)
	}
	if n := s.count(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestCancelDuringRequest(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	c := s.client(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Chat(ctx, llm.Request{Messages: userMsg("hi")})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v is not context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("returned after %v", elapsed)
	}
	if n := s.count(); n != 1 {
		t.Errorf("server saw %d requests, want 1 (no retry once ctx is done)", n)
	}
}

func TestRetryAfterBeyondDeadlineGivesUpAtOnce(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusTooManyRequests, "slow down")
	})
	c := s.client(t, nil)
	clock := fakeTime(c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.Chat(ctx, llm.Request{Messages: userMsg("hi")})
	if len(clock.waits) > 0 {
		t.Errorf("waited %v for a retry that could not happen in time", clock.waits)
	}
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusTooManyRequests {
		t.Errorf("error %v does not expose the 429", err)
	}
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("error %v does not explain the deadline", err)
	}
	if n := s.count(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestAttemptTimeoutRetried(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			select { // hang until the client gives up on this attempt
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		writeReply(w, "test-model", "second time lucky", 1, 1)
	})
	c := s.client(t, func(cfg *Config) { cfg.Timeout = 150 * time.Millisecond })
	res, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if res.Text != "second time lucky" {
		t.Errorf("Text = %q", res.Text)
	}
	if n := s.count(); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
	if res.Duration < 150*time.Millisecond {
		t.Errorf("Duration = %v, want it to include the timed-out attempt", res.Duration)
	}
}

func TestEmptyChoicesIsAnError(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","model":"test-model","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":0,"total_tokens":5}}`)
	})
	c := s.client(t, nil)
	_, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	if err == nil || !strings.Contains(err.Error(), "no choices") {
		t.Fatalf("error = %v, want a no-choices error", err)
	}
	if n := s.count(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestMalformedReplyNotRetried(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `<html>not json</html>`)
	})
	c := s.client(t, nil)
	if _, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")}); err == nil {
		t.Fatal("Chat accepted a non-JSON reply")
	}
	if n := s.count(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestRequestProblemsCaughtBeforeSending(t *testing.T) {
	s := newServer(t, ok("never"))
	c := s.client(t, func(cfg *Config) { cfg.Model = "" })
	if _, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")}); err == nil || !strings.Contains(err.Error(), "no model") {
		t.Errorf("no model: error = %v", err)
	}
	if _, err := c.Chat(context.Background(), llm.Request{Model: "m"}); err == nil || !strings.Contains(err.Error(), "no messages") {
		t.Errorf("no messages: error = %v", err)
	}
	if n := s.count(); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	bad := []struct {
		name string
		cfg  Config
		want string
	}{
		{"unparsable URL", Config{BaseURL: "http://[::1"}, "malformed"},
		{"no scheme", Config{BaseURL: "localhost:8000/v1"}, "http:// or https://"},
		{"wrong scheme", Config{BaseURL: "ftp://example.com/v1"}, "http:// or https://"},
		{"no host", Config{BaseURL: "http:///v1"}, "no host"},
		{"query", Config{BaseURL: "http://example.com/v1?x=1"}, "query"},
		{"negative timeout", Config{Timeout: -time.Second}, "timeout"},
		{"negative delay", Config{RetryBaseDelay: -time.Second}, "delay"},
		{"negative total timeout", Config{TotalTimeout: -time.Second}, "total timeout"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.APIKey = testKey
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error containing %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q leaks the API key", err)
			}
		})
	}
	if _, err := New(Config{}); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	cfg := Config{APIKey: testKey, Model: "m"}
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg)} {
		if strings.Contains(s, testKey) {
			t.Errorf("formatted Config %q leaks the API key", s)
		}
	}
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	cases := []struct {
		name   string
		status int
		header http.Header
		want   time.Duration
		ok     bool
	}{
		{"seconds", 429, h("Retry-After", "2"), 2 * time.Second, true},
		{"503 seconds", 503, h("Retry-After", "1"), time.Second, true},
		{"http date", 429, h("Retry-After", now.Add(5*time.Second).Format(http.TimeFormat)), 5 * time.Second, true},
		{"past date", 429, h("Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)), 0, true},
		{"capped", 429, h("Retry-After", "3600"), maxRetryAfter, true},
		{"milliseconds win", 429, h("Retry-After-Ms", "250", "Retry-After", "9"), 250 * time.Millisecond, true},
		{"garbage", 429, h("Retry-After", "soon"), 0, false},
		{"absent", 429, h(), 0, false},
		{"not on 500", 500, h("Retry-After", "2"), 0, false},
	}
	for _, tc := range cases {
		got, ok := retryAfter(tc.status, tc.header, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: retryAfter = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// checkPricedUsage checks a reply of 1000 input and 500 output tokens priced
// at 2 and 8 USD per million.
func checkPricedUsage(t *testing.T, res llm.Result) {
	t.Helper()
	u := res.Usage
	if u.InputTokens != 1000 {
		t.Errorf("Usage.InputTokens = %d, want 1000", u.InputTokens)
	}
	if u.OutputTokens != 500 {
		t.Errorf("Usage.OutputTokens = %d, want 500", u.OutputTokens)
	}
	if u.TotalTokens != 1500 {
		t.Errorf("Usage.TotalTokens = %d, want 1500", u.TotalTokens)
	}
	if math.Abs(u.Cost-0.006) > 1e-12 {
		t.Errorf("cost = %v, want 0.006", u.Cost)
	}
	if res.Duration <= 0 {
		t.Errorf("Duration = %v", res.Duration)
	}
}

// CallBound is the attempts' timeouts and the longest waits between them
// (a server's Retry-After, capped at 60 s, outwaits the backoff's 30 s cap
// with its jitter), or the total timeout when that is shorter.
func TestCallBound(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{}, DefaultTotalTimeout}, // 4*DefaultTimeout + 3*time.Minute is longer
		{Config{Timeout: 10 * time.Second, MaxRetries: 1}, 20*time.Second + time.Minute},
		{Config{Timeout: 5 * time.Second, MaxRetries: -1}, 5 * time.Second},
		{Config{Timeout: 100 * time.Second}, 200 * time.Second}, // the default total: twice the attempt's
		{Config{TotalTimeout: 90 * time.Second}, 90 * time.Second},
	} {
		c, err := New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.CallBound(); got != tc.want {
			t.Errorf("%+v: CallBound %s, want %s", tc.cfg, got, tc.want)
		}
	}
}
