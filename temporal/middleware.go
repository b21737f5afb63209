package temporal

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/morphhost/morph/abi"
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

// middlewareActivity names Activities.Middleware, which mwHooks cannot
// refer to as a method (it refers to mwHooks).
const middlewareActivity = "Middleware"

// mwHook is one middleware hook: whether a Funcs has it, how a worker
// serves a call of it, and how a workflow's Funcs gets it as an activity.
type mwHook struct {
	has   func(f *engine.Funcs) bool
	serve func(ctx context.Context, f *engine.Funcs, input json.RawMessage) (json.RawMessage, error)
	stub  func(ctx workflow.Context, f *engine.Funcs, timeout time.Duration, calls sessionCalls)
}

// hookOf makes the mwHook of a hook of payloads I and O, reached through
// get and set on a Funcs.
func hookOf[I, O any](name string, get func(*engine.Funcs) func(context.Context, I) (O, error),
	set func(*engine.Funcs, func(context.Context, I) (O, error))) mwHook {
	return mwHook{
		has: func(f *engine.Funcs) bool { return get(f) != nil },
		serve: func(ctx context.Context, f *engine.Funcs, input json.RawMessage) (json.RawMessage, error) {
			var in I
			if err := json.Unmarshal(input, &in); err != nil {
				return nil, err
			}
			out, err := get(f)(ctx, in)
			if err != nil {
				return nil, err
			}
			return json.Marshal(out)
		},
		stub: func(ctx workflow.Context, f *engine.Funcs, timeout time.Duration, calls sessionCalls) {
			id := f.ID
			set(f, func(gctx context.Context, in I) (O, error) {
				var out O
				input, err := json.Marshal(in)
				if err != nil {
					return out, err
				}
				var raw json.RawMessage
				c := MiddlewareCall{ID: id, Hook: name, Input: input, Session: calls.of(gctx, id)}
				if err := call(gctx, ctx, timeout, middlewareActivity, &raw, c); err != nil {
					return out, err
				}
				return out, json.Unmarshal(raw, &out)
			})
		},
	}
}

// notifyOf is hookOf for a hook that answers nothing.
func notifyOf[I any](name string, get func(*engine.Funcs) func(context.Context, I) error, set func(*engine.Funcs, func(context.Context, I) error)) mwHook {
	return hookOf(name,
		func(f *engine.Funcs) func(context.Context, I) (struct{}, error) {
			fn := get(f)
			if fn == nil {
				return nil
			}
			return func(ctx context.Context, in I) (struct{}, error) { return struct{}{}, fn(ctx, in) }
		},
		func(f *engine.Funcs, fn func(context.Context, I) (struct{}, error)) {
			set(f, func(ctx context.Context, in I) error { _, err := fn(ctx, in); return err })
		})
}

// mwHooks are the middleware hooks, by abi name.
var mwHooks = map[string]mwHook{
	abi.HookOnTurnStart: notifyOf(abi.HookOnTurnStart, func(f *engine.Funcs) func(context.Context, abi.TurnStart) error { return f.TurnStart },
		func(f *engine.Funcs, fn func(context.Context, abi.TurnStart) error) { f.TurnStart = fn }),
	abi.HookOnAction: notifyOf(abi.HookOnAction, func(f *engine.Funcs) func(context.Context, abi.Action) error { return f.Action },
		func(f *engine.Funcs, fn func(context.Context, abi.Action) error) { f.Action = fn }),
	abi.HookOnObservation: notifyOf(abi.HookOnObservation, func(f *engine.Funcs) func(context.Context, abi.Observation) error { return f.Observation },
		func(f *engine.Funcs, fn func(context.Context, abi.Observation) error) { f.Observation = fn }),
	abi.HookOnFinal: notifyOf(abi.HookOnFinal, func(f *engine.Funcs) func(context.Context, abi.TurnFinal) error { return f.Final },
		func(f *engine.Funcs, fn func(context.Context, abi.TurnFinal) error) { f.Final = fn }),
	abi.HookAfterRun: notifyOf(abi.HookAfterRun, func(f *engine.Funcs) func(context.Context, abi.AfterRunInput) error { return f.AfterRun },
		func(f *engine.Funcs, fn func(context.Context, abi.AfterRunInput) error) { f.AfterRun = fn }),
	abi.HookBeforeRun: hookOf(abi.HookBeforeRun,
		func(f *engine.Funcs) func(context.Context, abi.BeforeRunInput) (abi.BeforeRunOutput, error) {
			return f.BeforeRun
		},
		func(f *engine.Funcs, fn func(context.Context, abi.BeforeRunInput) (abi.BeforeRunOutput, error)) {
			f.BeforeRun = fn
		}),
	abi.HookBeforeToolCall: hookOf(abi.HookBeforeToolCall,
		func(f *engine.Funcs) func(context.Context, abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
			return f.BeforeToolCall
		},
		func(f *engine.Funcs, fn func(context.Context, abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error)) {
			f.BeforeToolCall = fn
		}),
	abi.HookAfterToolCall: hookOf(abi.HookAfterToolCall,
		func(f *engine.Funcs) func(context.Context, abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
			return f.AfterToolCall
		},
		func(f *engine.Funcs, fn func(context.Context, abi.AfterToolCallInput) (abi.AfterToolCallOutput, error)) {
			f.AfterToolCall = fn
		}),
}

// middlewareSpecs describe the middleware of e for a workflow.
func middlewareSpecs(e *engine.Engine) []MiddlewareSpec {
	var out []MiddlewareSpec
	for _, m := range e.Middleware() {
		s := MiddlewareSpec{ID: m.Funcs.ID, History: m.Funcs.History, Config: m.Config, EndsSessions: m.Funcs.SessionEnd != nil}
		for _, name := range abi.HookNames(abi.Middleware) {
			if mwHooks[name].has(m.Funcs) {
				s.Hooks = append(s.Hooks, name)
			}
		}
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
		mwHooks[name].stub(ctx, f, timeout, calls)
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
	h, ok := mwHooks[c.Hook]
	for _, m := range a.rt.Engine.Middleware() {
		if m.Funcs.ID == c.ID && ok && h.has(m.Funcs) {
			out, err := h.serve(ctx, m.Funcs, c.Input)
			return out, nonRetryable(c.Hook, err)
		}
	}
	return nil, nonRetryable(c.Hook, fmt.Errorf("this worker has no middleware %q with hook %s: workers must load the same configuration", c.ID, c.Hook))
}
