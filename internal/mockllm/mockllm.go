// Package mockllm runs mock-llm (@dwmkerr/mock-llm on npm), an
// OpenAI-compatible mock server written by others, for tests: a check that
// the model client works with a server it was not written against, which
// the tests' own httptest servers cannot be. Tests set its replies with its
// rules (Rule: a JMESPath match on the request, a place in the sequence of
// requests, the status and body), sent to its /config endpoint.
package mockllm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/internal/testenv"
)

// initialConfig is what the server starts with and returns to at each
// Configure: its default rules, and streams cut into short pieces with no
// pause between them (the defaults pause 50 ms per 50 characters).
const initialConfig = "streaming:\n  chunkSize: 8\n  chunkIntervalMs: 0\n"

// startTimeout bounds the wait for the server to listen; node usually
// takes under a second.
const startTimeout = 20 * time.Second

// Server is a running mock-llm.
type Server struct {
	// URL is the server's root, http://127.0.0.1:PORT; its OpenAI API root
	// is URL + "/v1".
	URL string
}

// Start runs mock-llm on 127.0.0.1 at a free port and waits until it
// listens; t's cleanup kills it. It fails or skips t as testenv.MockLLM says
// when mock-llm is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := testenv.MockLLM(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mock-llm.yaml")
	if err := os.WriteFile(cfg, []byte(initialConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	// A port found free can be taken before the server binds it (the
	// server cannot be told to pick one and say which): then try another.
	for range 3 {
		var s *Server
		if s, err = start(t, bin, dir, cfg); err == nil {
			return s
		}
	}
	t.Fatal(err)
	return nil
}

func start(t testing.TB, bin, dir, cfg string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	out := &testenv.Buffer{} // the server's stdout and stderr, polled below
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Dir = dir // it would read ./mock-llm.yaml too
	cmd.Env = append(os.Environ(), "HOST=127.0.0.1", "PORT="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("mock-llm: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = killGroup(cmd)
		<-exited
	}

	// Its own line, rather than an answer on the port, which another
	// process could give.
	listening := fmt.Sprintf("server running on 127.0.0.1:%d", port)
	deadline := time.Now().Add(startTimeout)
	for !strings.Contains(out.String(), listening) {
		select {
		case <-exited:
			return nil, fmt.Errorf("mock-llm exited before listening on port %d: %s\n%s", port, cmd.ProcessState, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("mock-llm did not listen on port %d within %s; its output:\n%s", port, startTimeout, out)
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() { // its line per request, and its errors
			t.Logf("mock-llm's output:\n%s", out)
		}
	})
	return &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}, nil
}

// freePort is a TCP port free on 127.0.0.1 now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ChatPath is the path of the chat completions endpoint, where Rules
// answer.
const ChatPath = "/v1/chat/completions"

// Rule is one of mock-llm's reply rules for POST ChatPath. Of the rules
// that answer a request, the last one given to Configure does; with none,
// mock-llm answers 404.
type Rule struct {
	// Match is a JMESPath expression over the request (body, headers with
	// lower-case names, method, path, query) that must be true; "" for any.
	Match string
	// Nth, when not 0, restricts the rule to the Nth request to ChatPath
	// since Configure, counting from 1 (mock-llm's sequence Nth-1). Only
	// requests answered by such a rule count.
	Nth int
	// Status is the reply's HTTP status; 0 for 200.
	Status int
	// Body is the reply's body: JSON, in which {{jmes request EXPR}} is
	// replaced by EXPR's value over the request (an object or array as
	// JSON, anything else as text) and {{timestamp}} by the time.
	Body string
}

// Configure replaces the server's rules with rules and restarts its
// sequence count.
func (s *Server) Configure(t testing.TB, rules ...Rule) {
	t.Helper()
	wire := make([]map[string]any, len(rules))
	for i, r := range rules {
		m := map[string]any{"path": "^" + ChatPath + "$", "method": http.MethodPost, "match": cmp.Or(r.Match, "@"),
			"response": map[string]any{"status": cmp.Or(r.Status, http.StatusOK), "content": r.Body}}
		if r.Nth != 0 {
			m["sequence"] = r.Nth - 1
		}
		wire[i] = m
	}
	body, err := json.Marshal(map[string]any{"rules": wire})
	if err != nil {
		t.Fatal(err)
	}
	// DELETE returns to the initial config and restarts the count; PATCH
	// then replaces the rules.
	s.call(t, http.MethodDelete, nil)
	s.call(t, http.MethodPatch, body)
}

func (s *Server) call(t testing.TB, method string, body []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+"/config", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("mock-llm: %s /config: %v", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("mock-llm: %s /config: %s\n%s", method, resp.Status, b)
	}
}

// Completion is the body of a chat completion replying text, in the shape
// of mock-llm's default rule, with usage (a JSON object) unless it is "".
func Completion(text, usage string) string {
	if usage != "" {
		usage = `,"usage":` + usage
	}
	return fmt.Sprintf(`{"id":"chatcmpl-{{timestamp}}","object":"chat.completion","model":"{{jmes request body.model}}",`+
		`"choices":[{"message":{"role":"assistant","content":%s},"finish_reason":"stop"}]%s}`, quote(text), usage)
}

// Error is the body of an error reply as OpenAI sends it; code "" is
// null.
func Error(message, typ, code string) string {
	c := "null"
	if code != "" {
		c = quote(code)
	}
	return fmt.Sprintf(`{"error":{"message":%s,"type":%s,"param":null,"code":%s}}`, quote(message), quote(typ), c)
}

func quote(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}
