package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/morphhost/morph/llm"
)

// TestServerEchoingTheKey checks that a server that echoes the request's
// Authorization header back (a debug endpoint as base_url, a proxy's error
// page) never gets the API key into Chat's error, its excerpt, the retry
// log or the reply's text (which the engine quotes in Step.Reply and
// Event.Reply), whichever way it sends it.
func TestServerEchoingTheKey(t *testing.T) {
	echo := func(r *http.Request) string { return "headers: Authorization: " + r.Header.Get("Authorization") }
	for _, tt := range []struct {
		name  string
		reply func(int, http.ResponseWriter, *http.Request)
	}{
		{"200 not a completion", func(_ int, w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, echo(r)) }},
		{"key cut by the excerpt", func(_ int, w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, strings.Repeat("x", excerptBytes-len("Bearer ")-5)+r.Header.Get("Authorization"))
		}},
		{"400 error message", func(_ int, w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusBadRequest, echo(r))
		}},
		{"500 plain body, retried", func(_ int, w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, echo(r))
		}},
		{"over the limit", func(_ int, w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, echo(r)+strings.Repeat("y", 8<<10))
		}},
		{"in the completion", func(_ int, w http.ResponseWriter, r *http.Request) {
			writeReply(w, "test-model", echo(r), 1, 1)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.reply)
			var logs bytes.Buffer
			c := s.client(t, func(c *Config) {
				c.MaxRetries, c.MaxReplyBytes = 1, 4<<10
				c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			res, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
			text := res.Text
			if err != nil {
				text = err.Error()
			}
			if !strings.Contains(text, scrubbedKey) {
				t.Errorf("%q does not say %s where the key was", text, scrubbedKey)
			}
			for _, leak := range []string{testKey, testKey[:minScrubbedPrefix]} {
				if strings.Contains(text, leak) || strings.Contains(logs.String(), leak) {
					t.Errorf("the key (%q) is in the result %q or the log:\n%s", leak, text, logs.String())
				}
			}
		})
	}
}

// TestErrorBodyControlCharacters checks that a non-2xx reply's message,
// which go-openai puts in its error, reaches Chat's error escaped, with
// the *APIError still reachable.
func TestErrorBodyControlCharacters(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"bad \u001b]0;pwned\u0007 \u001b[2J\nnext","type":"x","param":null,"code":null}}`)
	})
	_, err := s.client(t, nil).Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusBadRequest {
		t.Fatalf("error %v: want the *APIError of the 400 reachable", err)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\x1b\x07\n") || !strings.Contains(msg, `bad \x1b]0;pwned`) {
		t.Errorf("error %q: want the server's message escaped", msg)
	}
}
