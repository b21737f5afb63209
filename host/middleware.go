package host

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/guest"
)

// middleware is the plugin as session middleware for the engine: an
// *engine.Funcs named after the plugin, wanting the session history when
// its manifest asks for it, with a JSON hook (engine.JSONHook) for each
// middleware hook the plugin implements and has enabled (Config.Hooks). It
// is nil when there is none, outside session isolation. It is only part of
// a plugin (extension gives all of it).
//
// Each hook is one call of the hook's export on a pooled instance, with
// the plugin's limits, of the payload the engine encoded once for every
// plugin of the event. A failure is returned as the host's typed *Error
// (ErrTimeout, ErrTrap, ErrGuest, ErrBadOutput, ...: see errors.Is), never
// a panic; the engine isolates it (it logs and counts it, and applies the
// middleware's policy), so a failing plugin never ends a session. An
// observing hook's answer is ignored (it must still be JSON: anything else
// is ErrBadOutput); a mutating hook's empty answer is its zero payload,
// which changes nothing.
//
// In session isolation it also ends sessions: engine.Session.Close calls
// its SessionEnd, which releases the session's instances (EndSession). A
// plugin in session isolation without middleware hooks (a build_prompt
// plugin configured so) returns a middleware with that alone.
func (p *Plugin) middleware() engine.Middleware {
	f := &engine.Funcs{ID: p.name, History: p.manifest.History, Bounded: true}
	n := 0
	for _, h := range p.hooks {
		export, ok := abi.MiddlewareExports[h]
		if !ok {
			continue
		}
		if err := f.SetJSON(h, p.jsonHook(export)); err != nil {
			// abi has a middleware hook this engine does not call yet: the
			// plugin's implementation of it is never called.
			p.log.Warn("plugin implements a middleware hook the engine does not call", "plugin", p.name, "hook", h, "err", err)
			continue
		}
		n++
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

// jsonHook calls a middleware hook's export with the engine's encoding of
// its payload, decoding its answer into the engine's answer (checking an
// observing hook's is JSON: answer nil).
func (p *Plugin) jsonHook(export string) engine.JSONHook {
	return func(ctx context.Context, payload []byte, answer any) error {
		return p.CallFunc(ctx, export, payload, func(view []byte) error {
			if len(view) == 0 {
				return nil
			}
			if answer == nil {
				return guest.DecodeJSON(view, p.limits.MaxJSONDepth, new(json.RawMessage))
			}
			return guest.DecodeJSON(view, p.limits.MaxJSONDepth, answer)
		})
	}
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
