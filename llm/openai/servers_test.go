package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/llm"
)

// TestFinishReasonReported checks that the server's finish_reason reaches
// Result.FinishReason, streamed or not, so the engine can tell a reply cut
// at max_tokens from a malformed one.
func TestFinishReasonReported(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c","object":"chat.completion","created":1,"model":"test-model",
			"choices":[{"index":0,"message":{"role":"assistant","content":"{\"type\":\"fin"},"finish_reason":"length"}],
			"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`)
	})
	res, err := s.client(t, nil).Chat(context.Background(), llm.Request{Messages: userMsg("hi"), ForceJSON: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.FinishReason != llm.FinishLength {
		t.Errorf("FinishReason = %q, want %q", res.FinishReason, llm.FinishLength)
	}

	st := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"test-model\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"{\\\"ty\"},\"finish_reason\":null}]}\n\n")
		fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"test-model\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	res, err = st.client(t, nil).Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Stream: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	if res.FinishReason != llm.FinishLength || res.Text != `{"ty` {
		t.Errorf("streamed: FinishReason %q, Text %q; want %q, %q", res.FinishReason, res.Text, llm.FinishLength, `{"ty`)
	}
}

// TestWrongURLNamesIt checks that a 404 or an HTML page in reply names the
// full URL called (never the key) and hints at the /v1 API root, and that a
// base URL ending in /chat/completions is refused with the root to use.
func TestWrongURLNamesIt(t *testing.T) {
	tests := []struct {
		name  string
		base  string // appended to the server's URL
		reply func(int, http.ResponseWriter, *http.Request)
		want  string
	}{
		{"404 json", "", func(_ int, w http.ResponseWriter, _ *http.Request) { writeError(w, http.StatusNotFound, "no route") },
			"answered with HTTP 404"},
		{"404 plain", "", func(_ int, w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) },
			"answered with HTTP 404"},
		{"html 200", "", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, "<!doctype html><html><body>Welcome</body></html>")
		}, "answered with an HTML page, not the API's JSON"},
		{"html 502", "", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "<html><body>Bad gateway</body></html>")
		}, "answered with an HTML page, not the API's JSON (HTTP 502)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.reply)
			c := s.client(t, func(c *Config) { c.BaseURL = s.URL + "/api"; c.MaxRetries = 1 })
			_, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), ForceJSON: true})
			if err == nil {
				t.Fatal("Chat succeeded")
			}
			msg := err.Error()
			for _, want := range []string{"POST " + s.URL + "/api/chat/completions", tt.want, "ending in /v1"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not say %q:\n%s", want, msg)
				}
			}
			if strings.Contains(msg, testKey) {
				t.Errorf("error shows the API key: %s", msg)
			}
		})
	}

	// A server error in JSON is not about the URL: no hint.
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { writeError(w, http.StatusBadRequest, "bad") })
	_, err := s.client(t, nil).Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	if err == nil || strings.Contains(err.Error(), "ending in /v1") {
		t.Errorf("400 in JSON: err %v; want an error without the URL hint", err)
	}

	_, err = New(Config{BaseURL: "http://localhost:8000/v1/chat/completions"})
	if err == nil || !strings.Contains(err.Error(), `use the API root "http://localhost:8000/v1"`) {
		t.Errorf("New with the endpoint as base URL: %v", err)
	}
}

// TestMissingUsageEstimated checks that a reply without usage, streamed or
// not, gets estimated token counts (about four characters a token) and
// their cost, marked estimated, while a reported usage is kept as is.
func TestMissingUsageEstimated(t *testing.T) {
	const text = "0123456789abcdef" // 16 characters: 4 tokens
	plain := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"test-model",
			"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, text)
	})
	stream := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"test-model\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", text)
	})
	pricing := llm.Pricing{"test-model": {InputPerMillion: 1e6, OutputPerMillion: 2e6}}
	msgs := userMsg("12345678") // 8 characters: 2 tokens
	for _, tc := range []struct {
		name string
		s    *fakeServer
		req  llm.Request
	}{
		{"plain", plain, llm.Request{Messages: msgs}},
		{"stream", stream, llm.Request{Messages: msgs, Stream: func(string) {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.s.client(t, func(c *Config) { c.Pricing = pricing }).Chat(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			want := llm.Usage{InputTokens: 2, OutputTokens: 4, TotalTokens: 6, Cost: 2 + 8}
			if !res.UsageEstimated || res.Usage != want {
				t.Errorf("usage %+v estimated %v; want %+v estimated", res.Usage, res.UsageEstimated, want)
			}
		})
	}

	reported := newServer(t, ok("hi"))
	res, err := reported.client(t, nil).Chat(context.Background(), llm.Request{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if res.UsageEstimated {
		t.Errorf("reported usage: UsageEstimated = true, want false")
	}
	if res.Usage.InputTokens != 1 {
		t.Errorf("reported usage: InputTokens = %d, want 1", res.Usage.InputTokens)
	}
	if res.Usage.OutputTokens != 1 {
		t.Errorf("reported usage: OutputTokens = %d, want 1", res.Usage.OutputTokens)
	}
}

// TestJSONModes checks the response_format each Config.JSONMode sends for a
// ForceJSON request, and that New refuses an unknown mode.
func TestJSONModes(t *testing.T) {
	schema := &llm.JSONSchema{Name: "proto", Schema: []byte(`{"type":"object"}`)}
	for _, tc := range []struct {
		mode   string
		schema *llm.JSONSchema
		want   string // the response_format JSON; "" for none
	}{
		{"", schema, `{"type":"json_object"}`},
		{JSONModeObject, schema, `{"type":"json_object"}`},
		{JSONModeSchema, schema, `{"type":"json_schema","json_schema":{"name":"proto","schema":{"type":"object"},"strict":false}}`},
		{JSONModeSchema, nil, `{"type":"json_object"}`},
		{JSONModeOff, schema, ""},
	} {
		s := newServer(t, ok(`{}`))
		c := s.client(t, func(c *Config) { c.JSONMode = tc.mode })
		if _, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), ForceJSON: true, ResponseSchema: tc.schema}); err != nil {
			t.Fatal(err)
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(s.request(0).body, &body); err != nil {
			t.Fatal(err)
		}
		if got := string(body["response_format"]); got != tc.want {
			t.Errorf("mode %q, schema %v: response_format %s, want %s", tc.mode, tc.schema != nil, got, tc.want)
		}
	}
	if _, err := New(Config{JSONMode: "yes"}); err == nil || !strings.Contains(err.Error(), "json_object, json_schema, off") {
		t.Errorf("New with JSON mode \"yes\": %v", err)
	}
}

// TestExtraBody checks that Config.ExtraBody reaches the body verbatim,
// streamed or not, next to the parameters, and that New refuses a field the
// client sets itself.
func TestExtraBody(t *testing.T) {
	s := newServer(t, ok(`{}`))
	c := s.client(t, func(c *Config) {
		c.ExtraBody = map[string]any{"top_k": 20, "min_p": 0.05, "nested": map[string]any{"a": []any{1, "b"}}}
	})
	if _, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi"), Parameters: map[string]any{"temperature": 0}}); err != nil {
		t.Fatal(err)
	}
	body := decode(t, s.request(0).body)
	got, _ := json.Marshal([]any{body["top_k"], body["min_p"], body["nested"], body["temperature"]})
	if want := `[20,0.05,{"a":[1,"b"]},0]`; string(got) != want {
		t.Errorf("body fields %s, want %s", got, want)
	}

	for _, key := range []string{"top_p", "messages", "response_format"} {
		var perr *ParametersError
		_, err := New(Config{ExtraBody: map[string]any{key: 1}})
		if !errors.As(err, &perr) || perr.Problems[0].Key != key {
			t.Errorf("New with extra body field %q: %v", key, err)
		}
	}
}

// A message with images goes as content parts: its text, then each image
// as a data URL (the image_url part vision models take); one without
// stays a plain string.
func TestImagesAsContentParts(t *testing.T) {
	s := newServer(t, ok(`{}`))
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "task"},
		{Role: llm.RoleUser, Content: "Tool Result (chart):\n[image 1: image/png]", Images: []abi.Image{{MimeType: "image/png", Data: "iVBORw0KGgo="}}}}
	if _, err := s.client(t, nil).Chat(context.Background(), llm.Request{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(decode(t, s.request(0).body)["messages"])
	want := `[{"content":"task","role":"user"},{"content":[{"text":"Tool Result (chart):\n[image 1: image/png]","type":"text"},` +
		`{"image_url":{"url":"data:image/png;base64,iVBORw0KGgo="},"type":"image_url"}],"role":"user"}]`
	if string(got) != want {
		t.Errorf("messages\n%s\nwant\n%s", got, want)
	}
}
