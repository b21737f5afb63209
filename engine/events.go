package engine

import (
	"context"
	"time"

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
)

// Event is a report from a run in progress, for progress display and logs.
type Event struct {
	Kind    EventKind
	Step    int
	Action  string        // tool name, "plan", "final", "parse_error"; for EventFinal, the stop reason
	Usage   llm.Usage     // this step's model usage
	Total   llm.Usage     // the run's usage so far
	Elapsed time.Duration // since the run started
	Message string
	Err     error
}

func (e *Engine) emit(ctx context.Context, rc *Context, ev Event) {
	ev.Total = rc.Metrics.Usage()
	ev.Elapsed = time.Since(rc.Metrics.StartTime)
	if ev.Kind == EventWarning {
		e.log.WarnContext(ctx, ev.Message, "step", ev.Step, "error", ev.Err)
	} else {
		e.log.DebugContext(ctx, "morph event", "kind", ev.Kind, "step", ev.Step, "action", ev.Action,
			"tokens", ev.Usage.Total(), "cost", ev.Usage.Cost)
	}
	if e.onEvent != nil {
		e.onEvent(ev)
	}
}
