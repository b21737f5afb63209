package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// serverConfig writes a morph.toml for provider "openai" against url (no
// API key) and returns its path; extra is appended to the [llm] table.
func serverConfig(t *testing.T, url, extra string) string {
	t.Helper()
	cfg := fmt.Sprintf("[llm]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = %q\napi_key_env = \"\"\nmax_retries = 2\n%s", url, extra)
	path := filepath.Join(t.TempDir(), "morph.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// chatReply writes a chat completion whose text is content; usage is
// omitted when usage is empty.
func chatReply(w http.ResponseWriter, content, usage string) {
	w.Header().Set("Content-Type", "application/json")
	if usage != "" {
		usage = `,"usage":` + usage
	}
	fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]%s}`, content, usage)
}

// bodyServer is a model server that keeps each request's body in body and
// answers finalJSON.
func bodyServer(t *testing.T, body *map[string]any) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := json.NewDecoder(r.Body).Decode(body); err != nil {
			t.Error(err)
		}
		chatReply(w, finalJSON, `{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

const finalJSON = `{"type":"final","final":{"thought":"done","output":"ok"}}`

// A retry wait, here the server's Retry-After, prints one warning line at
// the default log level, with the wait and the reason.
func TestRetryWaitIsShown(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"slow down","type":"rate_limit"}}`)
			return
		}
		chatReply(w, finalJSON, `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`)
	}))
	defer srv.Close()
	code, stdout, stderr := morph(t, "", "run", "--config", serverConfig(t, srv.URL+"/v1", ""), "task")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if out := decode(t, stdout); out.Output != "ok" {
		t.Errorf("output %v, want ok", out.Output)
	}
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "retrying chat completion") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("want one retry line, got %d; stderr:\n%s", len(lines), stderr)
	}
	for _, want := range []string{"level=WARN", "wait=0s", "status=429", "Retry-After"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("retry line does not say %q: %s", want, lines[0])
		}
	}
}

// A server that reports no usage gives estimated token counts, and the
// result's metrics say "usage_estimated": true; one that does has no such
// key (see decode).
func TestUsageEstimatedShown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chatReply(w, finalJSON, "")
	}))
	defer srv.Close()
	code, stdout, stderr := morph(t, "", "run", "--config", serverConfig(t, srv.URL+"/v1", ""), "task")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var out struct {
		Metrics struct {
			TotalTokens    int   `json:"total_tokens"`
			UsageEstimated *bool `json:"usage_estimated"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Metrics.TotalTokens == 0 {
		t.Errorf("metrics: total_tokens 0, want the estimate:\n%s", stdout)
	}
	if u := out.Metrics.UsageEstimated; u == nil || !*u {
		t.Errorf("metrics: want \"usage_estimated\": true:\n%s", stdout)
	}
}

// [llm] json_mode decides the response_format sent: json_object by default,
// the protocol's schema with "json_schema", none with "off".
func TestJSONMode(t *testing.T) {
	for _, tc := range []struct {
		mode string // "" for the default
		want string // response_format.type; "" for none
	}{
		{"", "json_object"},
		{"json_object", "json_object"},
		{"json_schema", "json_schema"},
		{"off", ""},
	} {
		t.Run("mode "+tc.mode, func(t *testing.T) {
			var body map[string]any
			srv := bodyServer(t, &body)
			extra := ""
			if tc.mode != "" {
				extra = fmt.Sprintf("json_mode = %q\n", tc.mode)
			}
			code, _, stderr := morph(t, "", "run", "--config", serverConfig(t, srv.URL+"/v1", extra), "task")
			if code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, stderr)
			}
			rf, sent := body["response_format"].(map[string]any)
			switch {
			case tc.want == "" && sent:
				t.Fatalf("response_format sent with json_mode off: %v", rf)
			case tc.want == "":
				return
			case !sent || rf["type"] != tc.want:
				t.Fatalf("response_format %v, want type %q", body["response_format"], tc.want)
			}
			if tc.want == "json_schema" {
				js, _ := rf["json_schema"].(map[string]any)
				schema, _ := js["schema"].(map[string]any)
				props, _ := schema["properties"].(map[string]any)
				if js["name"] != "morph_response" {
					t.Errorf("json_schema's name %v, want morph_response", js["name"])
				}
				for _, p := range []string{"tool_call", "final"} {
					if props[p] == nil {
						t.Errorf("json_schema %v: no property %s, want the protocol's schema", js, p)
					}
				}
			}
		})
	}
}

// Table-valued parameters load and are sent, and [llm.extra_body] is added
// to the request body verbatim.
func TestTableParametersAndExtraBodySent(t *testing.T) {
	var body map[string]any
	srv := bodyServer(t, &body)
	extra := `[llm.parameters]
temperature = 0
chat_template_kwargs = { enable_thinking = false }
metadata = { run = "x" }
logit_bias = { "50256" = -100 }
[llm.extra_body]
top_k = 20
min_p = 0.05
repetition_penalty = 1.1
guided_decoding_backend = { name = "xgrammar" }
`
	code, _, stderr := morph(t, "", "run", "--config", serverConfig(t, srv.URL+"/v1", extra), "task")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	got, _ := json.Marshal(map[string]any{
		"temperature": body["temperature"], "chat_template_kwargs": body["chat_template_kwargs"], "metadata": body["metadata"],
		"logit_bias": body["logit_bias"], "top_k": body["top_k"], "min_p": body["min_p"],
		"repetition_penalty": body["repetition_penalty"], "guided_decoding_backend": body["guided_decoding_backend"],
	})
	want := `{"chat_template_kwargs":{"enable_thinking":false},"guided_decoding_backend":{"name":"xgrammar"},"logit_bias":{"50256":-100},"metadata":{"run":"x"},"min_p":0.05,"repetition_penalty":1.1,"temperature":0,"top_k":20}`
	if string(got) != want {
		t.Errorf("request fields\n%s\nwant\n%s", got, want)
	}
}

// A reply cut at max_tokens (finish_reason "length") that does not parse
// says so on each step's progress line, naming the TOML key to raise.
func TestCutReplyNamesMaxTokens(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"type\":\"final\",\"final\":{\"thought\":\"a long"},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":8,"total_tokens":13}}`)
	}))
	defer srv.Close()
	code, _, stderr := morph(t, "", "run", "--config", serverConfig(t, srv.URL+"/v1", "[llm.parameters]\nmax_tokens = 8\n"), "task")
	if code != exitFallback {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFallback, stderr)
	}
	if n := strings.Count(stderr, "parse error"); n != 3 {
		t.Errorf("%d parse error steps, want 3:\n%s", n, stderr)
	}
	if n := strings.Count(stderr, "error: the reply was cut at its token limit (finish_reason \"length\"): raise [llm.parameters] max_tokens, or max_completion_tokens if that is the one set"); n != 3 {
		t.Errorf("%d step lines say the reply was cut at its token limit, want 3:\n%s", n, stderr)
	}
}
