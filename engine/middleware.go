package engine

import (
	"context"
	"time"

	"github.com/morphhost/morph/abi"
)

// Middleware is session middleware: a named value that implements any
// subset of the *Hook interfaces below. The engine calls the hooks of every
// middleware in order (the WithHooks value first, then WithMiddleware
// values as given) and isolates each: an error, a panic or a timeout in one
// never interrupts the session; it is logged with the middleware's name,
// counted, and handled by the middleware's Policy.
//
// Payloads are snapshots: a middleware cannot change engine state through
// them, only through the outputs of the mutating hooks.
type Middleware interface {
	Name() string
}

// TurnStartHook is called after a turn's input is recorded.
type TurnStartHook interface {
	OnTurnStart(ctx context.Context, ev abi.TurnStart) error
}

// ActionHook is called when a tool call is parsed, before the tool runs.
type ActionHook interface {
	OnAction(ctx context.Context, ev abi.Action) error
}

// ObservationHook is called after a tool's observation is written back.
type ObservationHook interface {
	OnObservation(ctx context.Context, ev abi.Observation) error
}

// FinalHook is called exactly once per turn, on every path that ends it.
type FinalHook interface {
	OnFinal(ctx context.Context, ev abi.TurnFinal) error
}

// BeforeRunHook may replace a turn's system prompt and narrow its tools.
// Several compose in order, each seeing the previous one's result.
type BeforeRunHook interface {
	BeforeRun(ctx context.Context, in abi.BeforeRunInput) (abi.BeforeRunOutput, error)
}

// AfterRunHook is told how a turn ended, after FinalHook.
type AfterRunHook interface {
	AfterRun(ctx context.Context, in abi.AfterRunInput) error
}

// BeforeToolCallHook may rewrite a tool call's input or deny the call.
// Several compose in order, each seeing the input as rewritten so far; the
// first denial ends the chain and its reason becomes the observation.
type BeforeToolCallHook interface {
	BeforeToolCall(ctx context.Context, in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error)
}

// AfterToolCallHook may rewrite a tool's output. Several compose in order,
// each seeing the output as rewritten so far.
type AfterToolCallHook interface {
	AfterToolCall(ctx context.Context, in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error)
}

// SessionEndHook is told that a session ended (Session.Close): a
// middleware that keeps something per session releases it (package host
// releases the session's instances of a plugin in session isolation,
// calling their morph_destroy). It is told once per session, whether or not
// the middleware is in quarantine, and should return promptly: Close waits
// for it.
type SessionEndHook interface {
	OnSessionEnd(ctx context.Context, sessionID string) error
}

// HistoryWanter is implemented by middleware that wants the session history
// in its payloads. Others get none, so their cost does not grow with the
// conversation.
type HistoryWanter interface {
	WantsHistory() bool
}

// Policy is what a middleware's failure means for the session.
type Policy int

const (
	// FailOpen skips a failing hook: the session goes on as if it were absent.
	FailOpen Policy = iota
	// FailClosed makes a failing BeforeToolCall deny the call, and a failing
	// BeforeRun abort the turn with an error naming the middleware. Other
	// hooks fail open.
	FailClosed
)

// MiddlewareConfig is how the engine runs one middleware. Zero fields take
// the defaults.
type MiddlewareConfig struct {
	Policy Policy
	// Timeout bounds each hook call (default 2s). A native hook that ignores
	// its context is abandoned at the deadline, left to finish on its own; a
	// Bounded one is given the deadline to keep (BoundedCall).
	Timeout time.Duration
	// QuarantineAfter consecutive faults disable the middleware (default 5).
	QuarantineAfter int
	// QuarantineFor is the first disabled period (default 30s); it doubles at
	// each quarantine in a row, up to 10 minutes.
	QuarantineFor time.Duration
}

// Funcs is a Middleware made of functions, for middleware whose hook set is
// known only at run time (a WebAssembly plugin implements the hooks its
// manifest lists). A nil field is a hook it does not implement.
type Funcs struct {
	ID      string // the middleware's name
	History bool   // WantsHistory
	// Bounded says the hooks return by their call's deadline on their own
	// (a WebAssembly plugin's host enforces it), so the engine calls them on
	// the run's goroutine instead of a watchdog goroutine of their own, and
	// arms no timer: the deadline is BoundedCallOf(ctx).Deadline(), not the
	// context's, which ends with the run. BoundedCall also has the payload's
	// JSON, encoded once for all the middleware of an event: a Bounded hook
	// that hands its payload on to a plugin's hook with its ctx (a wrapper)
	// must hand it on unchanged, or pass a context without BoundedCall.
	Bounded        bool
	TurnStart      func(ctx context.Context, ev abi.TurnStart) error
	Action         func(ctx context.Context, ev abi.Action) error
	Observation    func(ctx context.Context, ev abi.Observation) error
	Final          func(ctx context.Context, ev abi.TurnFinal) error
	BeforeRun      func(ctx context.Context, in abi.BeforeRunInput) (abi.BeforeRunOutput, error)
	AfterRun       func(ctx context.Context, in abi.AfterRunInput) error
	BeforeToolCall func(ctx context.Context, in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error)
	AfterToolCall  func(ctx context.Context, in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error)
	// SessionEnd is SessionEndHook's: not a hook of the ABI, and not in
	// Status's hooks, but what its host does when a session ends.
	SessionEnd func(ctx context.Context, sessionID string) error
}

// Name returns f.ID.
func (f *Funcs) Name() string { return f.ID }

// funcsOf is the one representation the engine dispatches on: a *Funcs as
// it is, any other Middleware through the hook interfaces it implements.
func funcsOf(m Middleware) *Funcs {
	if f, ok := m.(*Funcs); ok {
		return f
	}
	f := &Funcs{ID: m.Name()}
	if h, ok := m.(HistoryWanter); ok {
		f.History = h.WantsHistory()
	}
	if h, ok := m.(TurnStartHook); ok {
		f.TurnStart = h.OnTurnStart
	}
	if h, ok := m.(ActionHook); ok {
		f.Action = h.OnAction
	}
	if h, ok := m.(ObservationHook); ok {
		f.Observation = h.OnObservation
	}
	if h, ok := m.(FinalHook); ok {
		f.Final = h.OnFinal
	}
	if h, ok := m.(BeforeRunHook); ok {
		f.BeforeRun = h.BeforeRun
	}
	if h, ok := m.(AfterRunHook); ok {
		f.AfterRun = h.AfterRun
	}
	if h, ok := m.(BeforeToolCallHook); ok {
		f.BeforeToolCall = h.BeforeToolCall
	}
	if h, ok := m.(AfterToolCallHook); ok {
		f.AfterToolCall = h.AfterToolCall
	}
	if h, ok := m.(SessionEndHook); ok {
		f.SessionEnd = h.OnSessionEnd
	}
	return f
}

// hookNames lists the hooks f implements, in call order.
func (f *Funcs) hookNames() []string {
	var names []string
	for _, h := range []struct {
		name string
		set  bool
	}{
		{abi.HookOnTurnStart, f.TurnStart != nil}, {abi.HookBeforeRun, f.BeforeRun != nil}, {abi.HookOnAction, f.Action != nil},
		{abi.HookBeforeToolCall, f.BeforeToolCall != nil}, {abi.HookAfterToolCall, f.AfterToolCall != nil},
		{abi.HookOnObservation, f.Observation != nil}, {abi.HookOnFinal, f.Final != nil}, {abi.HookAfterRun, f.AfterRun != nil},
	} {
		if h.set {
			names = append(names, h.name)
		}
	}
	return names
}
