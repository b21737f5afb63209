package temporal

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/morphhost/morph/engine"
)

// MiddlewareSpec is a middleware of the workers' engine, as the workflow's
// engine runs it: its hooks an activity each, its configuration (policy,
// quarantine) applied by the workflow's engine, so that a quarantine is
// part of the workflow's history and a replay decides as the first run.
type MiddlewareSpec struct {
	ID      string
	History bool
	Hooks   []string // the middleware hooks it implements (abi names)
	Config  engine.MiddlewareConfig
	// EndsSessions says it keeps something per session
	// (engine.SessionEndHook: a plugin in session isolation), which the
	// workers release when a session ends (sessionend.go).
	EndsSessions bool `json:",omitempty"`
}

// MiddlewareCall is one call of a middleware hook: its input and output
// are the hook's ABI v1 payloads, as JSON.
type MiddlewareCall struct {
	ID    string
	Hook  string
	Input json.RawMessage
	// Session is the session the call is made for, which the worker serves
	// it as (a call recorded before it was added serves as no session's).
	Session CallSession
}

// middlewareActivity names Activities.Middleware.
const middlewareActivity = "Middleware"

// mwStub is a middleware hook of s as an activity of that timeout, for
// its session, numbered in calls: the workflow's engine encodes the
// payload, and the activity's answer is decoded into the engine's.
func mwStub(ctx workflow.Context, id, hook string, timeout time.Duration, calls sessionCalls) engine.JSONHook {
	return func(gctx context.Context, payload []byte, answer any) error {
		var raw json.RawMessage
		c := MiddlewareCall{ID: id, Hook: hook, Input: payload, Session: calls.of(gctx, id)}
		if err := call(gctx, ctx, timeout, middlewareActivity, &raw, c); err != nil {
			return err
		}
		if answer == nil || len(raw) == 0 {
			return nil
		}
		return json.Unmarshal(raw, answer)
	}
}

// middlewareSpecs describe the middleware of e for a workflow.
func middlewareSpecs(e *engine.Engine) []MiddlewareSpec {
	var out []MiddlewareSpec
	for _, m := range e.Middleware() {
		s := MiddlewareSpec{ID: m.Funcs.ID, History: m.Funcs.History, Config: m.Config, EndsSessions: m.Funcs.SessionEnd != nil}
		s.Hooks = m.Funcs.Hooks()
		out = append(out, s)
	}
	return out
}

// stubMiddleware is s as the workflow's engine runs it: each hook an
// activity of that timeout, called on the run's goroutine (Bounded: the
// activity has its deadline), for its session, numbered in calls. With
// endSessions, its session end is a session's end on every worker
// (endSessions): the workflow gives it to one middleware of those that
// keep something per session, and each worker's end reaches them all.
func stubMiddleware(ctx workflow.Context, s MiddlewareSpec, timeout time.Duration, calls sessionCalls, ends bool) *engine.Funcs {
	f := &engine.Funcs{ID: s.ID, History: s.History, Bounded: true}
	for _, name := range s.Hooks {
		// a hook this build's engine does not call is left out, as
		// newEngine leaves out an engine hook it does not know
		_ = f.SetJSON(name, mwStub(ctx, s.ID, name, timeout, calls))
	}
	if ends {
		f.SessionEnd = endSessions(ctx, calls)
	}
	return f
}

// Middleware runs one middleware hook of the worker's engine, as a call
// of c's session.
func (a *Activities) Middleware(ctx context.Context, c MiddlewareCall) (json.RawMessage, error) {
	ctx = c.Session.context(ctx)
	for _, m := range a.rt.Engine.Middleware() {
		if m.Funcs.ID == c.ID && slices.Contains(m.Funcs.Hooks(), c.Hook) {
			out, err := m.Funcs.CallJSON(ctx, c.Hook, c.Input)
			return out, nonRetryable(c.Hook, err)
		}
	}
	return nil, nonRetryable(c.Hook, fmt.Errorf("this worker has no middleware %q with hook %s: workers must load the same configuration", c.ID, c.Hook))
}
