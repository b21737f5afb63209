package host

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// Middleware returns the plugin as session middleware for the engine: an
// *engine.Funcs named after the plugin, wanting the session history when
// its manifest asks for it, with a function for each middleware hook the
// plugin implements and has enabled (Config.Hooks). It returns nil when
// there is none, outside session isolation. It is only part of a plugin
// (see Options); Loader.Extender and Plugin.Extender give an engine all of
// it.
//
// Each function is one call of the hook's export on a pooled instance, with
// the plugin's limits. A failure is returned as the host's typed *Error
// (ErrTimeout, ErrTrap, ErrGuest, ErrBadOutput, ...: see errors.Is), never a
// panic; the engine isolates it (it logs and counts it, and applies the
// middleware's policy), so a failing plugin never ends a session. Observing
// hooks ignore the guest's output; a mutating hook's empty output is its
// zero payload, which changes nothing.
//
// In session isolation it also ends sessions: engine.Session.Close calls
// its SessionEnd, which releases the session's instances (EndSession). A
// plugin in session isolation without middleware hooks (a build_prompt
// plugin configured so) returns a middleware with that alone.
func (p *Plugin) Middleware() engine.Middleware {
	f := &engine.Funcs{ID: p.name, History: p.manifest.History, Bounded: true}
	n := 0
	for _, h := range p.hooks {
		export, ok := abi.MiddlewareExports[h]
		if !ok {
			continue
		}
		n++
		switch h {
		case abi.HookOnTurnStart:
			f.TurnStart = observer[abi.TurnStart](p, export)
		case abi.HookOnAction:
			f.Action = observer[abi.Action](p, export)
		case abi.HookOnObservation:
			f.Observation = observer[abi.Observation](p, export)
		case abi.HookOnFinal:
			f.Final = observer[abi.TurnFinal](p, export)
		case abi.HookBeforeRun:
			f.BeforeRun = mutator[abi.BeforeRunInput, abi.BeforeRunOutput](p, export)
		case abi.HookAfterRun:
			f.AfterRun = observer[abi.AfterRunInput](p, export)
		case abi.HookBeforeToolCall:
			f.BeforeToolCall = mutator[abi.BeforeToolCallInput, abi.BeforeToolCallOutput](p, export)
		case abi.HookAfterToolCall:
			f.AfterToolCall = mutator[abi.AfterToolCallInput, abi.AfterToolCallOutput](p, export)
		default:
			n-- // a middleware hook of abi this host does not wire yet
		}
	}
	if p.mode == IsolationSession {
		f.SessionEnd = func(_ context.Context, id string) error {
			p.EndSession(id)
			return nil
		}
	} else if n == 0 {
		return nil
	}
	return f
}

// observer calls an observing hook's export; its output, if any, is ignored
// (it must still be JSON: anything else is ErrBadOutput).
func observer[In any](p *Plugin, export string) func(context.Context, In) error {
	return func(ctx context.Context, in In) error {
		_, err := invokeEvent[json.RawMessage](ctx, p, export, in)
		return err
	}
}

// mutator calls a mutating hook's export; an empty output is the zero Out.
func mutator[In, Out any](p *Plugin, export string) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		return invokeEvent[Out](ctx, p, export, in)
	}
}

// payloadJSON is a hook's payload as JSON, encoded by encode: within a
// middleware hook call, the event's encoding, made once for every plugin
// the event goes to (engine.BoundedCall).
func payloadJSON(ctx context.Context, encode func() ([]byte, error)) ([]byte, error) {
	if c := engine.BoundedCallOf(ctx); c != nil {
		return c.PayloadJSON(encode)
	}
	return encode()
}

// callDeadline is when a guest call starting at now must end: after the
// plugin's timeout, or sooner at the deadline of the middleware hook call
// ctx belongs to, which the engine arms no timer for
// (engine.BoundedCall): the guest's own deadline check keeps it.
func (p *Plugin) callDeadline(ctx context.Context, now time.Time) time.Time {
	d := now.Add(p.limits.Timeout)
	if c := engine.BoundedCallOf(ctx); c != nil && c.Deadline().Before(d) {
		return c.Deadline()
	}
	return d
}

// withHookDeadline is ctx ending at the deadline of the middleware hook
// call it belongs to, if any, for a call that must wait (for an instance
// slot, a session place): the engine gives the deadline as a value, and a
// timer costs little beside a wait.
func withHookDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if c := engine.BoundedCallOf(ctx); c != nil {
		return context.WithDeadline(ctx, c.Deadline())
	}
	return ctx, func() {}
}

// destroy calls morph_destroy, when the module exports it, on each of the
// idle instances, at once and each with the plugin's timeout. A failure is
// logged under the plugin's name and counted; it does not stop the others.
func (p *Plugin) destroy(ctx context.Context, idle []*instance) {
	var wg sync.WaitGroup
	for _, inst := range idle {
		if !p.module.Exports(abi.ExportDestroy) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := inst.g.Call(ctx, time.Now().Add(p.limits.Timeout), abi.ExportDestroy, nil, p.limits.MaxOutputBytes)
			p.shards.local().calls.Add(1)
			if err == nil {
				return
			}
			p.stats.faults.Add(1)
			p.log.WarnContext(ctx, "plugin destroy failed; closing anyway",
				"err", p.failure(abi.ExportDestroy, p.classified(ctx, err)))
		}()
	}
	wg.Wait()
}
