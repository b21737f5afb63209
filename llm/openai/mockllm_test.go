package openai

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/morphhost/morph/internal/mockllm"
	"github.com/morphhost/morph/llm"
)

// TestMockLLM runs the client against mock-llm (internal/mockllm), an
// OpenAI-compatible mock server that others wrote, where the other tests
// use servers written to the client's own idea of the API.
func TestMockLLM(t *testing.T) {
	s := mockllm.Start(t)
	const final = `{"type":"final","final":{"thought":"done","output":"ok"}}`
	pricing := llm.Pricing{"test-model": {InputPerMillion: 1e6, OutputPerMillion: 2e6}}
	client := func(t *testing.T, mut func(*Config)) *Client {
		t.Helper()
		cfg := Config{BaseURL: s.URL + "/v1", APIKey: testKey, Model: "test-model", Pricing: pricing,
			RetryBaseDelay: time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
		if mut != nil {
			mut(&cfg)
		}
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ask := llm.Request{Messages: userMsg("task"), ForceJSON: true, ResponseSchema: &llm.JSONSchema{Name: "proto", Schema: []byte(`{"type":"object"}`)}}

	// mock-llm answers as its rules say whatever the response_format:
	// here the last rule, which wins, answers only what the default JSON
	// mode asks, with the key.
	t.Run("json final with usage", func(t *testing.T) {
		s.Configure(t,
			mockllm.Rule{Status: 400, Body: mockllm.Error("want response_format json_object and the key", "invalid_request_error", "")},
			mockllm.Rule{
				Match: "body.response_format.type == 'json_object' && headers.authorization == 'Bearer " + testKey + "'",
				Body:  mockllm.Completion(final, `{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}`),
			})
		res, err := client(t, nil).Chat(context.Background(), ask)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != final || res.FinishReason != "stop" {
			t.Errorf("text %q, finish %q; want %q, stop", res.Text, res.FinishReason, final)
		}
		if m, _ := res.JSON.(map[string]any); m["type"] != "final" {
			t.Errorf("JSON %v, want the decoded final", res.JSON)
		}
		want := llm.Usage{InputTokens: 12, OutputTokens: 7, TotalTokens: 19, Cost: 12 + 14}
		if res.Usage != want || res.UsageEstimated {
			t.Errorf("usage %+v estimated %v; want %+v as reported", res.Usage, res.UsageEstimated, want)
		}
	})

	// The server echoes the response_format type it received ("null" for
	// none), through its own JSON parsing and JMESPath.
	t.Run("json modes", func(t *testing.T) {
		s.Configure(t, mockllm.Rule{Body: mockllm.Completion(`{"seen":"{{jmes request body.response_format.type}}"}`, "")})
		for mode, want := range map[string]string{"": "json_object", JSONModeSchema: "json_schema", JSONModeOff: "null"} {
			res, err := client(t, func(c *Config) { c.JSONMode = mode }).Chat(context.Background(), ask)
			if err != nil {
				t.Fatalf("mode %q: %v", mode, err)
			}
			if m, _ := res.JSON.(map[string]any); m["seen"] != want {
				t.Errorf("mode %q: the server saw response_format %v, want %s", mode, res.JSON, want)
			}
		}
	})

	// mock-llm reports no usage unless a rule does, and sends no usage
	// chunk in a stream (it ignores stream_options): both are estimated.
	t.Run("no usage, plain and streamed", func(t *testing.T) {
		s.Configure(t, mockllm.Rule{Body: mockllm.Completion(final, "")})
		wantUsage := llm.Usage{InputTokens: llm.EstimateTokens(len("task")), OutputTokens: llm.EstimateTokens(len(final))}
		wantUsage.TotalTokens = wantUsage.InputTokens + wantUsage.OutputTokens
		wantUsage.Cost = float64(wantUsage.InputTokens) + 2*float64(wantUsage.OutputTokens)

		var pieces []string
		stream := ask
		stream.Stream = func(d string) { pieces = append(pieces, d) }
		for _, req := range []llm.Request{ask, stream} {
			res, err := client(t, nil).Chat(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			streamed := req.Stream != nil
			if res.Text != final {
				t.Errorf("streamed %v: Text = %q, want %q", streamed, res.Text, final)
			}
			if res.FinishReason != "stop" {
				t.Errorf("streamed %v: FinishReason = %q, want %q", streamed, res.FinishReason, "stop")
			}
			if !res.UsageEstimated {
				t.Errorf("streamed %v: UsageEstimated = false, want true", streamed)
			}
			if res.Usage != wantUsage {
				t.Errorf("streamed %v: Usage = %+v, want %+v", streamed, res.Usage, wantUsage)
			}
		}
		// The server's pieces are 8 characters (mockllm's streaming config).
		if want := (len(final) + 7) / 8; len(pieces) != want || strings.Join(pieces, "") != final {
			t.Errorf("%d pieces %q; want %d making the reply", len(pieces), pieces, want)
		}
	})

	t.Run("429 retried", func(t *testing.T) {
		s.Configure(t,
			mockllm.Rule{Nth: 1, Status: 429, Body: mockllm.Error("Rate limit reached.", "requests", "rate_limit_exceeded")},
			mockllm.Rule{Nth: 2, Body: mockllm.Completion(final, "")},
		)
		var logs syncBuffer
		res, err := client(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }).Chat(context.Background(), ask)
		if err != nil || res.Text != final {
			t.Fatalf("Chat: %q, %v; want the reply after one retry", res.Text, err)
		}
		if got := strings.TrimSpace(logs.String()); strings.Count(got, RetryMessage) != 1 || !strings.Contains(got, "status=429") {
			t.Errorf("log %q; want one retry record, of a 429", got)
		}
	})

	// The third-party server counts the requests: after the client gives
	// up, the next one is the 4th.
	t.Run("500 until retries run out", func(t *testing.T) {
		rules := []mockllm.Rule{{Nth: 4, Body: mockllm.Completion("fourth", "")}}
		for n := 1; n <= 3; n++ {
			rules = append(rules, mockllm.Rule{Nth: n, Status: 500, Body: mockllm.Error("The server had an error.", "server_error", "")})
		}
		s.Configure(t, rules...)
		c := client(t, func(c *Config) { c.MaxRetries = 2 })
		_, err := c.Chat(context.Background(), ask)
		var apiErr *goopenai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 || !strings.Contains(err.Error(), "chat failed after 3 attempts") ||
			!strings.Contains(err.Error(), "The server had an error.") {
			t.Fatalf("error %v; want the 500 after 3 attempts", err)
		}
		if res, err := c.Chat(context.Background(), ask); err != nil || res.Text != "fourth" {
			t.Errorf("next call: %q, %v; want the 4th request's reply", res.Text, err)
		}
	})

	t.Run("401 not retried", func(t *testing.T) {
		s.Configure(t,
			mockllm.Rule{Nth: 1, Status: 401, Body: mockllm.Error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key")},
			mockllm.Rule{Nth: 2, Body: mockllm.Completion("second", "")},
		)
		c := client(t, nil)
		_, err := c.Chat(context.Background(), ask)
		var apiErr *goopenai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 || apiErr.Code != "invalid_api_key" ||
			!strings.Contains(err.Error(), "after 1 attempt (not retryable)") || !strings.Contains(err.Error(), "Incorrect API key provided.") {
			t.Fatalf("error %v; want the 401 after 1 attempt", err)
		}
		if res, err := c.Chat(context.Background(), ask); err != nil || res.Text != "second" {
			t.Errorf("next call: %q, %v; want the 2nd request's reply", res.Text, err)
		}
	})

	// A model the server does not have: OpenAI's 404 with code
	// model_not_found names the model, not the base URL.
	t.Run("404 model not found", func(t *testing.T) {
		s.Configure(t, mockllm.Rule{Status: 404,
			Body: mockllm.Error("The model `gpt-nope` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found")})
		_, err := client(t, func(c *Config) { c.Model = "gpt-nope" }).Chat(context.Background(), ask)
		if !errors.Is(err, ErrModelNotFound) || !strings.Contains(err.Error(), `the server has no model "gpt-nope"`) || strings.Contains(err.Error(), "base URL") {
			t.Errorf("error %v; want ErrModelNotFound naming the model, without the base-URL hint", err)
		}
	})

	// Without /v1 the request misses mock-llm's API and meets its own 404,
	// {"error": "Not Found", ...}, whose "error" is a string.
	t.Run("base URL without /v1", func(t *testing.T) {
		s.Configure(t, mockllm.Rule{Body: mockllm.Completion(final, "")})
		_, err := client(t, func(c *Config) { c.BaseURL = s.URL }).Chat(context.Background(), ask)
		if err == nil {
			t.Fatal("Chat succeeded")
		}
		for _, want := range []string{"POST " + s.URL + "/chat/completions answered with HTTP 404", "ending in /v1", "Cannot POST /chat/completions"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error does not say %q: %v", want, err)
			}
		}
	})

	// mock-llm sends an error status in a stream as a 200 whose one event
	// is the error: its message is what the client can report.
	t.Run("error in a stream", func(t *testing.T) {
		s.Configure(t, mockllm.Rule{Status: 503, Body: mockllm.Error("The engine is overloaded.", "server_error", "")})
		req := ask
		req.Stream = func(string) { t.Error("text delivered from an error") }
		_, err := client(t, nil).Chat(context.Background(), req)
		if err == nil || !strings.Contains(err.Error(), "The engine is overloaded.") {
			t.Errorf("error %v; want the server's message", err)
		}
	})
}
