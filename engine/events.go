package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/llm"
)

// EventKind names what an Event reports.
type EventKind string

// Event kinds.
const (
	// EventStep: one model reply was handled (Step, Action, Usage, Total, Elapsed).
	EventStep EventKind = "step"
	// EventWarning: something failed and the engine went on (a hook, a forced
	// conclusion); Message says what and what was used instead.
	EventWarning EventKind = "warning"
	// EventFinal: the run ended with a final (Action is the StopReason).
	EventFinal EventKind = "final"
	// EventHook: a middleware hook was called (Hook, Plugin, Duration,
	// Outcome, and Err when it failed).
	EventHook EventKind = "hook"
	// EventQuarantine: a middleware was disabled after repeated faults.
	EventQuarantine EventKind = "quarantine"
	// EventRelease: a quarantined middleware was enabled again.
	EventRelease EventKind = "release"
)

// Event is a report from a run in progress, for progress display and logs.
type Event struct {
	Kind EventKind
	// SessionID and Turn name the run (Context.SessionID, Context.Turn): an
	// engine's handler hears the events of all its runs, concurrent ones
	// interleaved.
	SessionID string
	Turn      int
	// Step is the step the event is of: for a hook event, and a
	// quarantine or release, the step the hook's payload names (0 for
	// the hooks before the first step, the steps taken for those at the
	// turn's end), so a hook's timing can be told apart from step to step.
	Step    int
	Action  string        // tool name, "plan", "final", "parse_error"; for EventFinal, the stop reason
	Usage   llm.Usage     // this step's model usage
	Total   llm.Usage     // the run's usage so far
	Elapsed time.Duration // since the run started
	Message string
	Err     error
	Reply   string // a parse_error step's reply as Step.Reply has it: escaped and capped

	// Hook events, and warnings about a hook: the hook, and the plugin
	// that set it (its middleware's name, or for an engine hook SourceHost
	// when the embedding host set it).
	Hook     string        // e.g. "before_tool_call"
	Plugin   string        // the middleware's name
	Duration time.Duration // of the hook call
	Outcome  string        // one of the Outcome* constants
}

// boundedError is an error whose text was cut; errors.Is and errors.As
// still reach the original.
type boundedError struct {
	err  error
	text string
}

func (b *boundedError) Error() string { return b.text }
func (b *boundedError) Unwrap() error { return b.err }

// bounded returns err with its text cut to the observation limit: it can
// quote a plugin's trap message or a model's reply.
func (e *Engine) bounded(err error) error {
	if err != nil {
		if text := err.Error(); len(text) > e.maxObs {
			return &boundedError{err, safetext.Truncate(text, e.maxObs)}
		}
	}
	return err
}

// emit logs ev, an event of run r, and hands it to the engine's event
// handler and then the run's, its message and error text cut to the
// observation limit, and its action (a step's, the tool name the model
// wrote) to maxNameBytes.
func (e *Engine) emit(ctx context.Context, r *run, ev Event) { e.emitAt(ctx, r, ev, time.Now()) }

// emitAt is emit of an event that happened at now, a clock reading the
// caller has already made.
func (e *Engine) emitAt(ctx context.Context, r *run, ev Event, now time.Time) {
	rc := r.Context
	ev.SessionID, ev.Turn = rc.SessionID, rc.Turn
	ev.Message = safetext.Truncate(ev.Message, e.maxObs)
	ev.Action = cutName(ev.Action)
	ev.Err = e.bounded(ev.Err)
	ev.Total = rc.Metrics.Usage()
	ev.Elapsed = now.Sub(rc.Metrics.StartTime)
	switch {
	case ev.Kind == EventWarning || ev.Kind == EventQuarantine || ev.Kind == EventRelease:
		e.log.WarnContext(ctx, ev.Message, "session", ev.SessionID, "turn", ev.Turn, "step", ev.Step, "plugin", ev.Plugin, "error", ev.Err)
	case ev.Kind == EventHook && ev.Err != nil:
		e.log.WarnContext(ctx, "middleware hook failed", "plugin", ev.Plugin, "hook", ev.Hook, "step", ev.Step, "outcome", ev.Outcome, "error", ev.Err)
	case ev.Kind == EventHook:
		if e.log.Enabled(ctx, slog.LevelDebug) { // asked first: the arguments would allocate on every hook call
			e.log.DebugContext(ctx, "middleware hook", "plugin", ev.Plugin, "hook", ev.Hook, "step", ev.Step, "duration", ev.Duration)
		}
	default:
		e.log.DebugContext(ctx, "morph event", "kind", ev.Kind, "step", ev.Step, "action", ev.Action,
			"tokens", ev.Usage.Total(), "cost", ev.Usage.Cost)
	}
	if e.onEvent != nil {
		e.onEvent(ev)
	}
	if r.opts.OnEvent != nil {
		r.opts.OnEvent(ev)
	}
}
