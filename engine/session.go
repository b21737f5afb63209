package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/llm"
)

// Session is a conversation with the agent: each turn sees the inputs and
// final answers of the turns before it. Turns of one session run one at a
// time; sessions are independent and may run concurrently.
//
// A session ends with Close, which tells the middleware that keep
// something per session (a WebAssembly plugin in session isolation keeps
// an instance for it) to release it.
type Session struct {
	e       *Engine
	id      string
	mu      sync.Mutex
	turn    int
	history []llm.Message
	closed  bool
}

// ErrSessionClosed is returned by RunTurn on a session that Close ended.
var ErrSessionClosed = errors.New("engine: session closed")

// NewSession starts a session. An empty id gets a fresh one, random unless
// the engine has a nonce source (WithNonce).
func (e *Engine) NewSession(id string) *Session {
	if id == "" {
		id = e.nonce()
	}
	return &Session{e: e, id: id}
}

// ResumeSession continues a conversation a host kept: history (inputs and
// final answers, as History returned them) precedes the first turn.
func (e *Engine) ResumeSession(id string, history []llm.Message) *Session {
	s := e.NewSession(id)
	s.history = slices.Clone(history)
	return s
}

// ResumeSessionAt is ResumeSession for a session that has already run
// turns turns: its next turn is numbered turns+1, as the local session's
// would be (package temporal's session workflow, continued as new).
func (e *Engine) ResumeSessionAt(id string, history []llm.Message, turns int) *Session {
	s := e.ResumeSession(id, history)
	s.turn = turns
	return s
}

// Turns is how many turns the session has run, those before a
// ResumeSessionAt included.
func (s *Session) Turns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turn
}

// ID is the session's id, as middleware payloads carry it.
func (s *Session) ID() string { return s.id }

// History returns a copy of the session's history: each turn's input and,
// when it ended with one, its final answer.
func (s *Session) History() []llm.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.history)
}

// RunTurn runs one turn on input. It returns as Engine.Run does; middleware
// hear of the turn's end (on_final, then after_run) exactly once, whatever
// the path: a turn the engine refuses (its initialization failed, or it is
// closed) ends with status error too. On a closed engine the middleware
// have been released: a plugin's hooks then fail, isolated as any fault.
//
// On a closed session it returns ErrSessionClosed, without starting a turn
// (no middleware hears of it).
func (s *Session) RunTurn(ctx context.Context, input string, opts RunOptions) (*Final, *Context, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, &Context{Task: input, SessionID: s.id, Turn: s.turn, StopReason: StopInit}, ErrSessionClosed
	}
	s.turn++
	e := s.e
	rc := &Context{Task: input, SessionID: s.id, Turn: s.turn, Metrics: Metrics{StartTime: time.Now()}}
	ctx, span := e.tel.startTurn(ctx, rc, opts)
	r := e.newRun(ctx, rc, opts)
	if err := e.begin(ctx); err != nil {
		rc.StopReason = StopInit
		e.refused(r, err)
		e.tel.endTurn(span, rc, err)
		return nil, rc, err
	}
	defer e.end()
	final, _, err := e.turn(r, slices.Clone(s.history))
	rc.Metrics.Elapsed = time.Since(rc.Metrics.StartTime)
	e.endTurn(r, final, err)
	e.tel.endTurn(span, rc, err)
	s.history = append(s.history, llm.Message{Role: llm.RoleUser, Content: input})
	if final != nil {
		s.history = append(s.history, llm.Message{Role: llm.RoleAssistant, Content: string(rc.RawFinalAnswer)})
	}
	return final, rc, err
}

// Close ends the session: every middleware that keeps something per
// session (SessionEndHook) is told, so that it lets go of it now, not when
// it expires: a WebAssembly plugin in session isolation releases the
// session's instances, calling their morph_destroy (package host). It
// waits for a turn in progress. An engine that never initialized, or that
// is closed, holds nothing of the session, and tells no one. Later turns
// fail with ErrSessionClosed; a second Close does nothing. The errors are
// the middleware's, joined; each is also logged.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	e := s.e
	if !e.join() {
		return nil
	}
	defer e.end()
	var errs []error
	for _, m := range e.chain() {
		if m.f.SessionEnd == nil {
			continue
		}
		if err := recovered(ctx, m.f.SessionEnd, s.id); err != nil {
			err = fmt.Errorf("middleware %q session end: %w", m.f.ID, err)
			e.log.WarnContext(ctx, "middleware failed to end a session", "session", s.id, "plugin", m.f.ID, "error", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// endTurn tells the middleware how the turn ended. It runs even when the
// turn's context is done, so its hooks get a context without the
// cancellation (each hook keeps its own deadline).
func (e *Engine) endTurn(r *run, final *Final, err error) {
	ctx := context.WithoutCancel(r.ctx)
	status := turnStatus(r.StopReason)
	errText := ""
	if err != nil {
		errText = err.Error()
	}
	var last llm.Usage
	if n := len(r.Steps); n > 0 {
		last = r.Steps[n-1].Usage
	}
	ev := abi.TurnEnd{SessionID: r.SessionID, Turn: r.Turn, Step: len(r.Steps), Status: status, Error: errText,
		StepUsage: last, TurnUsage: r.Metrics.Usage()}
	if final != nil {
		ev.Final = string(r.RawFinalAnswer)
	}
	notify(e, ctx, r, finalHook, ev.Step, false, func(bool) abi.TurnEnd { return ev })
	after := abi.AfterRunInput{SessionID: r.SessionID, Turn: r.Turn, Status: status, Error: errText,
		Usage: r.Metrics.Usage(), Steps: len(r.Steps)}
	notify(e, ctx, r, afterRunHook, after.Steps, false, func(bool) abi.AfterRunInput {
		c := after
		c.Final = final.wire() // a copy for each: a native middleware cannot change the caller's final
		return c
	})
}

func turnStatus(stop string) string {
	switch stop {
	case StopFinal:
		return abi.StatusFinal
	case StopForced:
		return abi.StatusForced
	case StopFallback:
		return abi.StatusFallback
	case StopCanceled:
		return abi.StatusCanceled
	}
	return abi.StatusError
}

// historySnapshot is the conversation so far without the system prompt, as
// a copy middleware cannot change the engine's through.
func historySnapshot(msgs []llm.Message) []abi.Message {
	out := make([]abi.Message, 0, len(msgs))
	for _, m := range msgs {
		if m.Role != llm.RoleSystem {
			out = append(out, abi.Message{Role: m.Role, Content: m.Content})
		}
	}
	return out
}

// cloneJSON deep-copies a value made of JSON types, so a native middleware
// given a payload cannot reach the engine's own maps and slices.
func cloneJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(v))
		for k, x := range v {
			c[k] = cloneJSON(x)
		}
		return c
	case []any:
		c := make([]any, len(v))
		for i, x := range v {
			c[i] = cloneJSON(x)
		}
		return c
	case json.RawMessage:
		return slices.Clone(v)
	}
	return v
}

func cloneParams(p map[string]any) map[string]any {
	if p == nil {
		return nil
	}
	return cloneJSON(p).(map[string]any)
}
