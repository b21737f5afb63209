package config_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/llm"
	"github.com/morphhost/morph/llm/openai"
)

// TestClientErrorsNameTheKey checks that the model client's errors name
// the morph.toml setting to change, and the file, where a setting is the
// cause: a model the server does not have (llm.model), a reply over
// llm.max_reply_kb, an attempt cut at llm.timeout, a call given up at
// llm.total_timeout; they still match the client's sentinels.
func TestClientErrorsNameTheKey(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/big/") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"%s"}`, strings.Repeat("x", 4<<10))
			return
		}
		if strings.Contains(r.URL.Path, "/missing/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"message":"The model `+"`gpt-nope`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
			return
		}
		select { // hung: never answers
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer srv.Close()
	defer close(stop)

	for _, tt := range []struct {
		name, path, settings string
		sentinel             error
		want                 []string
	}{
		{"model", "/missing/v1", "", openai.ErrModelNotFound, []string{`the server has no model "gpt-nope"`, "set llm.model in", "--model"}},
		{"reply limit", "/big/v1", "max_reply_kb = 2\n", openai.ErrReplyTooLarge, []string{"over the limit of 2048 bytes", "llm.max_reply_kb in"}},
		{"attempt", "/hung/v1", "timeout = \"50ms\"\nmax_retries = 0\n", openai.ErrAttemptTimeout, []string{"attempt timed out after 50ms", "llm.timeout in"}},
		{"total", "/hung/v1", "timeout = \"100ms\"\ntotal_timeout = \"400ms\"\nmax_retries = 5\n", openai.ErrTotalTimeout, []string{"gave up at the total timeout (400ms)", "llm.total_timeout in"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := write(t, map[string]string{"morph.toml": fmt.Sprintf("[llm]\nprovider = \"openai\"\nmodel = \"gpt-nope\"\nbase_url = %q\napi_key_env = \"\"\n%s",
				srv.URL+tt.path, tt.settings)})
			file := filepath.Join(dir, "morph.toml")
			cfg, err := config.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			client, err := cfg.Client(nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = client.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("error %v; want %v", err, tt.sentinel)
			}
			for _, want := range append(tt.want, file) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %q: %v", want, err)
				}
			}
		})
	}
}

// TestUnpricedModelWarnsOnTheLogger checks that the client Client builds
// warns of a model [llm.pricing] has no price for on the logger it is
// given, once, and marks the cost unknown.
func TestUnpricedModelWarnsOnTheLogger(t *testing.T) {
	dir := write(t, map[string]string{
		"morph.toml":   "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n\n[llm.pricing.\"priced\"]\ninput = 1\noutput = 1\n",
		"replies.json": `{"model":"unpriced","replies":[{"reply":"a"},{"reply":"b"}]}`,
	})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	client, err := cfg.Client(slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res, err := client.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
		if err != nil || !res.Usage.CostUnknown {
			t.Fatalf("Chat: usage %+v, %v; want the cost unknown", res.Usage, err)
		}
	}
	if n := strings.Count(logs.String(), llm.UnpricedMessage); n != 1 || !strings.Contains(logs.String(), "model=unpriced") {
		t.Errorf("%d warnings on the logger, want 1 naming the model:\n%s", n, logs.String())
	}
}
