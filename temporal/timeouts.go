package temporal

import (
	"context"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/pipeline"
)

// ActivityTimeout is the operator's bound on every activity (morph worker
// --activity-timeout): an activity whose call has a bound of its own (see
// Timeouts) gets that bound, but never more than ActivityTimeout; one
// whose call has none (a model client that states none, a tool or hook
// of the embedding host) gets ActivityTimeout. Past its timeout, Temporal
// gives the activity to another worker; a worker that died is seen sooner,
// after the heartbeat timeout, by an activity whose timeout is longer (see
// Timeouts). The workers read it when they answer Setup, so that the
// workflow's history holds the values used; the workers of a queue
// should agree on it, as on their configuration.
var ActivityTimeout = 10 * time.Minute

// Timeouts are the StartToCloseTimeout of a workflow's activities, each
// what bounds its call on the worker, plus activityMargin, and at most
// ActivityTimeout:
//   - a model call (Chat): the model client's bound, its retries and
//     their waits included (openai.Client.CallBound), so that Temporal
//     never gives up on a call the client is still retrying;
//   - an engine hook, a WebAssembly tool or stage handler: its plugin's
//     bound on one call (host.Details.CallBound, three of its timeouts:
//     a fresh instance, the call, a description of changed tools). One
//     plugin serves each engine hook (the engine does not chain them);
//   - a middleware hook: the engine's deadline on it
//     (engine.MiddlewareConfig.Timeout, its plugin's timeout and a
//     little);
//   - a built-in tool: builtinToolBound.
//
// Every activity whose timeout is longer than Heartbeat (the worker's
// [temporal] heartbeat_timeout) has Heartbeat as its heartbeat timeout:
// its worker heartbeats while it runs (attempts), so that a lost worker's
// call is taken up by another after Heartbeat rather than after the
// call's timeout, minutes for a model call.
//
// The worker computes them in Setup and the workflow reads them from its
// result, so that a replay schedules its activities as the first run did.
// A call absent from them (a tool a plugin added since) gets
// ActivityTimeout.
type Timeouts struct {
	Heartbeat  time.Duration
	Chat       time.Duration
	Hooks      map[string]time.Duration // engine hooks, by abi name
	Middleware map[string]time.Duration // by middleware ID
	Tools      map[string]time.Duration // by tool name
	Stages     map[string]time.Duration // stage handlers, by type
	// LostAttempts is the worker's [temporal] lost_attempts: how many
	// attempts each call may have, each after the one before was lost
	// (retryPolicy). Zero, from a worker older than it, is
	// config.DefaultLostAttempts, what such a worker's workflows used.
	LostAttempts int
}

const (
	// activityMargin is added to each call's bound for the activity's own
	// work around the call: decoding its input and encoding its output
	// (payloads of up to a few MiB), waiting for the plugin's free
	// instance, a loaded worker's scheduling and garbage collection.
	// These take milliseconds; a second covers a worker under load, and
	// is what a lost worker costs on top of its call's bound.
	activityMargin = time.Second
	// builtinToolBound bounds a built-in tool's call. The built-in tools
	// compute in memory (calc evaluates one expression of bounded size,
	// in microseconds) and state no bound: this one is far above what
	// they take, on any worker.
	builtinToolBound = 10 * time.Second
	// setupTimeout is the Setup activity's: it describes the worker's
	// engine, loaded already, in milliseconds.
	setupTimeout = 10 * time.Second
)

// retryPolicy is the engine's rules on Temporal: a call's own failure is
// its answer, which the engine handles (every activity returns it
// non-retryable, see nonRetryable), so Temporal runs a call again only
// when an attempt was lost (timed out, its heartbeat missed, its worker
// stopping: lostAttempt), at most attempts in all ([temporal]
// lost_attempts; config.DefaultLostAttempts when attempts is not
// positive). More lost in a row is no longer a lost worker but a call
// that kills its worker, or an outage, and the call fails with a
// *CallError, which ends its turn. An attempt of a call whose result (or
// own failure) is journaled answers the record without calling, so the
// attempts after a loss cost a journal read. The first retry comes almost
// at once (the timeout has waited already), the next ones at most
// retryBackoff apart, so that a queue without a worker for a while is not
// given up on at once: the default ten ride out a few workers killed in
// a row, or a starved one, for about half a minute of backoff in all.
func retryPolicy(attempts int) temporal.RetryPolicy {
	if attempts <= 0 {
		attempts = config.DefaultLostAttempts
	}
	return temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumInterval: retryBackoff, MaximumAttempts: int32(attempts)}
}

// retryBackoff is the longest wait between two attempts of a call.
const retryBackoff = 10 * time.Second

// withTimeout is ctx with the options of one activity call: its
// StartToCloseTimeout d (ActivityTimeout when d is not positive: a call
// Timeouts does not know, or a Setup answered by a worker from before
// Timeouts), ctx's retry policy (withHeartbeat's; the default retryPolicy
// before the worker's Setup is known, for Setup itself), and ctx's
// heartbeat timeout only if d is longer: a shorter call's own timeout
// sees its worker lost as soon.
func withTimeout(ctx workflow.Context, d time.Duration) workflow.Context {
	if d <= 0 {
		d = ActivityTimeout
	}
	opts := workflow.GetActivityOptions(ctx)
	if opts.HeartbeatTimeout >= d {
		ctx = workflow.WithHeartbeatTimeout(ctx, 0)
	}
	if opts.RetryPolicy == nil {
		ctx = workflow.WithRetryPolicy(ctx, retryPolicy(0))
	}
	return workflow.WithStartToCloseTimeout(ctx, d)
}

// withHeartbeat is the workflow context ctx, whose activities are those of
// a worker that answered s, with s's heartbeat timeout and retry policy
// (its lost_attempts): every context of the workflow's engine and runner
// derives from it.
func withHeartbeat(ctx workflow.Context, s Setup) workflow.Context {
	return workflow.WithRetryPolicy(workflow.WithHeartbeatTimeout(ctx, s.Timeouts.Heartbeat), retryPolicy(s.Timeouts.LostAttempts))
}

// heartbeat records heartbeats of ctx's activity every interval, from one
// interval after it is called until the function it returns is called,
// which waits for a heartbeat being sent. An attempt shorter than every
// sends none, and no heartbeat is cut short: the SDK logs a heartbeat
// whose context was canceled as a failure, and takes a heartbeat that
// failed for the attempt's loss.
func heartbeat(ctx context.Context, every time.Duration) (stop func()) {
	stopped, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				activity.RecordHeartbeat(ctx)
			case <-stopped:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { close(stopped); <-done }
}

// callBounder is a model client that says how long a call of it runs
// (openai.Client).
type callBounder interface{ CallBound() time.Duration }

// timeouts are the Timeouts of the activities of a's engine and model
// client, hooks the engine hooks it has set.
func (a *Activities) timeouts(hooks []string) Timeouts {
	e := a.rt.Engine
	// each plugin's bound on a call, by name: from Plugins, not e.Status(),
	// which reads every plugin's memory
	plugins := map[string]time.Duration{}
	for _, p := range a.rt.Plugins() {
		if d, ok := p.Details.(*host.Details); ok {
			plugins[p.Name] = d.CallBound
		}
	}
	tc := a.cfg.Temporal.WithDefaults()
	t := Timeouts{Heartbeat: tc.HeartbeatTimeout, LostAttempts: tc.LostAttempts, Hooks: map[string]time.Duration{}, Middleware: map[string]time.Duration{}, Tools: map[string]time.Duration{},
		Stages: map[string]time.Duration{}}
	var chat time.Duration // the scripted client's: none
	if c, ok := a.client.(callBounder); ok {
		chat = c.CallBound()
	}
	t.Chat = bounded(chat)
	tools, owners := a.plugins(hooks)
	for _, hook := range hooks {
		t.Hooks[hook] = bounded(plugins[owners[hook]]) // the host's: none
	}
	for _, m := range e.Middleware() {
		t.Middleware[m.Funcs.ID] = bounded(m.Config.Timeout)
	}
	for _, name := range e.Registry().Names() {
		var d time.Duration // the host's: none
		if src, _ := e.Registry().Source(name); src == engine.SourceBuiltin {
			d = builtinToolBound
		} else if plugin, ok := tools[name]; ok {
			d = plugins[plugin]
		}
		t.Tools[name] = bounded(d)
	}
	for _, h := range a.rt.StageHandlers() {
		t.Stages[h.Type()] = bounded(plugins[strings.TrimPrefix(h.Type(), pipeline.TypeWasmPrefix)])
	}
	return t
}

// bounded is the timeout of an activity whose call d bounds (0: nothing
// does): d and activityMargin, at most ActivityTimeout.
func bounded(d time.Duration) time.Duration {
	if d <= 0 {
		return ActivityTimeout
	}
	return min(d+activityMargin, ActivityTimeout)
}

// plugins are the plugins that serve a's engine's tools, by tool name,
// and the engine hooks hooks, by hook: Setup's ToolPlugins and
// HookPlugins. The host's tools and hooks, and the built-in tools, are in
// neither.
func (a *Activities) plugins(hooks []string) (tools, hookPlugins map[string]string) {
	e := a.rt.Engine
	tools, hookPlugins = map[string]string{}, map[string]string{}
	reg := e.Registry()
	for _, name := range reg.Names() {
		src, _ := reg.Source(name)
		if plugin, ok := strings.CutPrefix(src, engine.PluginSource("")); ok {
			tools[name] = plugin
		}
	}
	owners := e.EngineHooks().Owners
	for _, hook := range hooks {
		if owners[hook] != "" {
			hookPlugins[hook] = owners[hook]
		}
	}
	return tools, hookPlugins
}
