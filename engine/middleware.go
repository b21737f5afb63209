package engine

import (
	"context"
	"time"
)

// Middleware is session middleware: a named value that implements any
// subset of the *Hook interfaces below. The engine calls the hooks of every
// middleware in order (WithMiddleware values as given, then plugins'
// middleware in load order) and isolates each: an error, a panic or a timeout in one
// never interrupts the session; it is logged with the middleware's name,
// counted, and handled by the middleware's Policy.
//
// Payloads are snapshots: a middleware cannot change engine state through
// them, only through the outputs of the mutating hooks.
type Middleware interface {
	Name() string
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
