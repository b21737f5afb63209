package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"sync"
	"time"
)

// modelServer is a stateless OpenAI-compatible chat completions server on
// 127.0.0.1 whose reply is a function of the request alone, so that any
// worker and any attempt of a call gets the same answer: a turn's task
// names the turn ("chaos turn ID"), and the reply to a conversation with k
// assistant messages is the ledger tool's call k (line "ID k") while
// k < steps, then the final. Each call is logged (calls, and the log file
// as JSON lines) under its key, a hash of the conversation so far: a call
// made again has the key of its first making.
type modelServer struct {
	steps   int
	latency time.Duration // how long each answer takes, as a real model's would
	now     func() time.Time

	mu    sync.Mutex
	calls []callEvent
	log   io.Writer
	srv   *http.Server
	url   string
}

// callEvent is a call's arrival, answer or abort (its client went away
// first: a killed worker's).
type callEvent struct {
	Time  time.Time `json:"time"`
	Event string    `json:"event"` // eventArrived, eventAnswered, eventAborted
	Key   string    `json:"key"`
	Turn  string    `json:"turn"`
	Step  int       `json:"step"`
}

const (
	eventArrived  = "arrived"
	eventAnswered = "answered"
	eventAborted  = "aborted"
)

// turnTask is a turn's task: the model server reads the turn's id back
// from it.
func turnTask(id string) string {
	return fmt.Sprintf("chaos turn %s: append this turn's lines to the ledger, then answer.", id)
}

var turnID = regexp.MustCompile(`chaos turn ([A-Za-z0-9_.-]+):`)

// ledgerLine is the line the tool call of a turn's step appends.
func ledgerLine(turn string, step int) string { return fmt.Sprintf("%s %d", turn, step) }

type chatRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// callKey is the identity of the call req makes: the conversation so far.
func callKey(req *chatRequest) string {
	h := sha256.New()
	for _, m := range req.Messages {
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", m.Role, len(m.Content), m.Content)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// reply is the answer to req: the turn, the step and the reply's content.
func (s *modelServer) reply(req *chatRequest) (turn string, step int, content string, err error) {
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			step++
		}
		if turn == "" && m.Role == "user" {
			if sub := turnID.FindStringSubmatch(m.Content); sub != nil {
				turn = sub[1]
			}
		}
	}
	if turn == "" {
		return "", 0, "", fmt.Errorf("no %q in the conversation", "chaos turn ID:")
	}
	if step < s.steps {
		call := map[string]any{"type": "tool_call", "tool_call": map[string]any{"thought": fmt.Sprintf("step %d", step),
			"tool_name": "ledger_append", "tool_params": map[string]string{"line": ledgerLine(turn, step)}}}
		b, _ := json.Marshal(call)
		return turn, step, string(b), nil
	}
	b, _ := json.Marshal(map[string]any{"type": "final", "final": map[string]any{"thought": "done", "output": turn + " done"}})
	return turn, step, string(b), nil
}

func (s *modelServer) record(ev callEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, ev)
	if s.log != nil {
		b, _ := json.Marshal(ev)
		s.log.Write(append(b, '\n'))
	}
}

// events returns the calls' events so far.
func (s *modelServer) events() []callEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]callEvent(nil), s.calls...)
}

func (s *modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	turn, step, content, err := s.reply(&req)
	if err != nil {
		b, _ := json.Marshal(map[string]any{"error": map[string]string{"message": err.Error()}})
		http.Error(w, string(b), http.StatusBadRequest)
		return
	}
	ev := callEvent{Time: s.now(), Event: eventArrived, Key: callKey(&req), Turn: turn, Step: step}
	s.record(ev)
	select {
	case <-time.After(s.latency):
	case <-r.Context().Done():
		ev.Time, ev.Event = s.now(), eventAborted
		s.record(ev)
		return
	}
	b, _ := json.Marshal(map[string]any{"id": "chaos", "object": "chat.completion", "created": 1, "model": "chaos",
		"choices": []any{map[string]any{"index": 0, "message": map[string]string{"role": "assistant", "content": content}, "finish_reason": "stop"}},
		"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
	ev.Time, ev.Event = s.now(), eventAnswered
	s.record(ev)
}

// start serves on a port of 127.0.0.1.
func (s *modelServer) start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.url = "http://" + ln.Addr().String() + "/v1"
	go s.srv.Serve(ln)
	return nil
}

func (s *modelServer) close() {
	if s.srv != nil {
		s.srv.Close()
	}
}
