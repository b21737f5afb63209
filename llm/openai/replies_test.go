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
	"time"

	"github.com/morphhost/morph/llm"
)

// TestModelNotFound checks that a server's "no such model" reply, in each
// shape servers send it, says so and names the model rather than hinting
// at the base URL, and is not retried; a 404 that does not name the model
// keeps the URL hint.
func TestModelNotFound(t *testing.T) {
	const model = "gpt-nope"
	json404 := func(body string) func(int, http.ResponseWriter, *http.Request) {
		return func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, body)
		}
	}
	for _, tt := range []struct {
		name  string
		reply func(int, http.ResponseWriter, *http.Request)
	}{
		{"openai", json404(`{"error":{"message":"The model ` + "`gpt-nope`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)},
		{"openai code only", json404(`{"error":{"message":"No such thing.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)},
		{"vllm", json404(`{"object":"error","message":"The model ` + "`gpt-nope`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`)},
		{"ollama", json404(`{"error":"model 'gpt-nope' not found"}`)},
		{"litellm 400", func(_ int, w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusBadRequest, "Invalid model name passed in model=gpt-nope. The model was not found.")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.reply)
			_, err := s.client(t, func(c *Config) { c.Model = model }).Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
			if !errors.Is(err, ErrModelNotFound) {
				t.Fatalf("error %v; want ErrModelNotFound", err)
			}
			msg := err.Error()
			for _, want := range []string{`the server has no model "gpt-nope"`, "POST " + s.URL + "/v1/chat/completions"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not say %q: %s", want, msg)
				}
			}
			if strings.Contains(msg, "base URL") {
				t.Errorf("error hints at the base URL: %s", msg)
			}
			if n := s.count(); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}

	// A 404 that is not about the model is about the URL.
	for name, reply := range map[string]func(int, http.ResponseWriter, *http.Request){
		"plain":       func(_ int, w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) },
		"other model": json404(`{"error":"model 'other' not found"}`),
	} {
		s := newServer(t, reply)
		_, err := s.client(t, func(c *Config) { c.Model = model }).Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
		if err == nil || errors.Is(err, ErrModelNotFound) || !strings.Contains(err.Error(), "ending in /v1") {
			t.Errorf("%s 404: error %v; want the base-URL hint and not ErrModelNotFound", name, err)
		}
	}
}

// TestReplyNotACompletion checks that a 200 whose body is not a chat
// completion (truncated JSON, an HTML page, control characters, 10 MB of
// garbage) fails at once with the URL, the body's size and a short,
// escaped excerpt of it (cut with "...", no count of the rest): the server answered, so it is not retried as a lost reply.
func TestReplyNotACompletion(t *testing.T) {
	garbage := bytes.Repeat([]byte("garbage\x1b[2J\x00"), 1<<20) // 10 MB
	for _, tt := range []struct {
		name, body, want string
	}{
		{"truncated json", `{"id":"x","choices":[`, `"{\"id\":\"x\",\"choices\":["`},
		{"html", `<html><body>oops</body></html>`, `"<html><body>oops</body></html>"`},
		{"control characters", "\x1b]0;owned\x07\x1b[31mred", `"\x1b]0;owned\a\x1b[31mred"`},
		{"10 MB of garbage", string(garbage), `"garbage\x1b[2J\x00garbage`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tt.body)) // the client may stop reading early
			})
			_, err := s.client(t, nil).Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
			if err == nil {
				t.Fatal("Chat accepted the reply")
			}
			msg := err.Error()
			for _, want := range []string{"POST " + s.URL + "/v1/chat/completions answered HTTP 200", "not a chat completion", tt.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not say %q: %s", want, msg)
				}
			}
			if strings.ContainsAny(msg, "\x1b\x07\x00") {
				t.Errorf("error holds the server's control characters raw: %q", msg)
			}
			if len(msg) > 1000 {
				t.Errorf("error is %d bytes; want the body's excerpt capped", len(msg))
			}
			if strings.Contains(msg, "more bytes)") { // a count of the capture, not of the body
				t.Errorf("error counts what the excerpt left out: %s", msg)
			}
			if n := s.count(); n != 1 {
				t.Errorf("server saw %d requests, want 1 (the server answered: not retried)", n)
			}
		})
	}
}

// TestReplyCutOffLoggedAsSuch checks that a 200 whose connection drops
// mid-body is retried once, and that the retry's log says the reply was cut off,
// not that none came.
func TestReplyCutOffLoggedAsSuch(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			fmt.Fprint(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"id\":\"x\",\"choi")
			buf.Flush()
			conn.Close()
			return
		}
		writeReply(w, "test-model", "whole", 1, 1)
	})
	var logs bytes.Buffer
	c := s.client(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	res, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	if err != nil || res.Text != "whole" {
		t.Fatalf("Chat: %q, %v; want the second reply", res.Text, err)
	}
	if !strings.Contains(logs.String(), "reply cut off after 15 bytes (HTTP 200)") || strings.Contains(logs.String(), "no reply") {
		t.Errorf("retry log does not say the reply was cut off:\n%s", logs.String())
	}
	if n := s.count(); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}

// TestTotalTimeout checks that a server that never answers is given up on
// at the total timeout, however many retries are left, with
// ErrTotalTimeout, and that a retry whose wait would pass the total is not
// waited for.
func TestTotalTimeout(t *testing.T) {
	stop := make(chan struct{})
	s := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select { // never answer: hang until the client gives up or the test ends
		case <-r.Context().Done():
		case <-stop:
		}
	})
	defer close(stop)
	c := s.client(t, func(c *Config) {
		c.Timeout, c.TotalTimeout, c.MaxRetries = 50*time.Millisecond, time.Second, 1000
	})
	_, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	if !errors.Is(err, ErrTotalTimeout) || !strings.Contains(err.Error(), "gave up at the total timeout (1s)") {
		t.Fatalf("error %v; want ErrTotalTimeout", err)
	}
	if n := s.count(); n < 2 {
		t.Errorf("server saw %d requests; want the hung attempts retried until the total timeout", n)
	}

	// A Retry-After past the total: no wait.
	s429 := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusTooManyRequests, "slow down")
	})
	c = s429.client(t, func(c *Config) { c.TotalTimeout = 10 * time.Second })
	clock := fakeTime(c)
	_, err = c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	if !errors.Is(err, ErrTotalTimeout) || !strings.Contains(err.Error(), "the next retry (in 30s) would pass it") {
		t.Errorf("error %v; want ErrTotalTimeout before the wait", err)
	}
	if len(clock.waits) > 0 {
		t.Errorf("waited %v for a retry past the total timeout", clock.waits)
	}
}

// TestAttemptTimeoutTyped checks that an attempt cut at the per-attempt
// timeout says so with ErrAttemptTimeout, still matching
// context.DeadlineExceeded.
func TestAttemptTimeoutTyped(t *testing.T) {
	stop := make(chan struct{})
	s := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	})
	defer close(stop)
	c := s.client(t, func(c *Config) { c.Timeout, c.MaxRetries = 50*time.Millisecond, -1 })
	_, err := c.Chat(context.Background(), llm.Request{Messages: userMsg("hi")})
	if !errors.Is(err, ErrAttemptTimeout) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTotalTimeout) {
		t.Errorf("error %v; want ErrAttemptTimeout and context.DeadlineExceeded", err)
	}
}

// TestReplyOverTheLimit checks that a reply whose body passes
// MaxReplyBytes, a completion, an error reply or a stream, is read no
// further than the limit and fails at once with ErrReplyTooLarge, naming
// the URL.
func TestReplyOverTheLimit(t *testing.T) {
	const limit = 4 << 10
	big := strings.Repeat("a", 1<<20)
	for _, tt := range []struct {
		name   string
		reply  func(int, http.ResponseWriter, *http.Request)
		stream bool
	}{
		{"completion", ok(big), false},
		{"error reply", func(_ int, w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusInternalServerError, big)
		}, false},
		{"stream", streamOK(big), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.reply)
			req := llm.Request{Messages: userMsg("hi")}
			if tt.stream {
				req.Stream = func(string) {}
			}
			_, err := s.client(t, func(c *Config) { c.MaxReplyBytes = limit }).Chat(context.Background(), req)
			if !errors.Is(err, ErrReplyTooLarge) {
				t.Fatalf("error %v; want ErrReplyTooLarge", err)
			}
			if !strings.Contains(err.Error(), "POST "+s.URL+"/v1/chat/completions answered HTTP") || len(err.Error()) > 2000 {
				t.Errorf("error does not name the URL briefly: %.3000s", err)
			}
			if n := s.count(); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}
}
