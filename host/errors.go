package host

import (
	"errors"
	"fmt"

	"github.com/morphhost/morph/host/internal/extism"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/sandbox"
	"github.com/morphhost/morph/host/internal/wasmrt"
	"github.com/morphhost/morph/internal/safetext"
)

// Kinds of plugin failure, told apart with errors.Is on an *Error. They are
// package guest's values, which the loaders return, under the same names.
var (
	// ErrTimeout: the call outran its deadline, or its caller's; the
	// instance was discarded.
	ErrTimeout = guest.ErrTimeout
	// ErrCanceled: the caller gave up (its context was canceled: a run that
	// stopped, a signal) before the call ended; the instance was discarded.
	ErrCanceled = guest.ErrCanceled
	// ErrTrap: the guest trapped (unreachable, out-of-bounds access, stack
	// overflow, exit); the message holds the wasm stack. The instance was discarded.
	ErrTrap = guest.ErrTrap
	// ErrInputTooLarge: the input exceeds the plugin's max input bytes.
	ErrInputTooLarge = guest.ErrInputTooLarge
	// ErrOutputTooLarge: the guest answered more than the plugin's max output bytes.
	ErrOutputTooLarge = guest.ErrOutputTooLarge
	// ErrBadOutput: the guest's output is not the export's JSON payload, or
	// points outside its memory.
	ErrBadOutput = guest.ErrBadOutput
	// ErrABIMismatch: the module lacks a supported ABI marker or a required
	// export, or an export has the wrong signature.
	ErrABIMismatch = guest.ErrABIMismatch
	// ErrGuest: the guest reported an error through the ABI (see abi.ErrorFlag).
	ErrGuest = guest.ErrGuest
	// ErrLoad: the module could not be read, verified or compiled.
	ErrLoad = guest.ErrLoad
	// ErrClosed: the plugin was closed.
	ErrClosed = guest.ErrClosed
	// ErrNotGranted: the plugin asked for a capability it was not granted:
	// at load, with Grants.Ungranted = UngrantedError (the *Error wraps a
	// *CapabilityError naming them), or in a call (http_request without
	// allowed hosts), where the guest gets the message as an error result.
	ErrNotGranted = sandbox.ErrNotGranted
)

// ErrSessionLimit: a new session's call found the plugin's
// Limits.MaxSessions sessions open (session isolation) and none ended or
// expired within Limits.SessionWait. The message names the setting to
// raise (max_sessions); no open session lost its instance.
var ErrSessionLimit = errors.New("session limit reached")

// Failures of an HTTP request a guest made, told apart with errors.Is on
// the error of the plugin's HTTP grant (package sandbox); the guest gets
// the message.
var (
	// ErrHostNotAllowed: the URL's host, or that of a redirect hop, is not
	// one of the plugin's allowed hosts. The request (or the hop) was not sent.
	ErrHostNotAllowed = sandbox.ErrHostNotAllowed
	// ErrTooManyRedirects: the response redirected more often than the
	// plugin's redirect limit.
	ErrTooManyRedirects = sandbox.ErrTooManyRedirects
	// ErrResponseTooLarge: the response, headers and body together, is
	// over the plugin's size limit; nothing of it reaches the guest.
	ErrResponseTooLarge = sandbox.ErrResponseTooLarge
)

// StackLimitError ends a call whose guest would have taken its call stack
// past the plugin's Limits.MaxStackBytes (either loader): the call
// fails with ErrTrap, wrapping it, and errors.As finds it.
type StackLimitError struct {
	Limit int // the plugin's MaxStackBytes
	trap  error
}

// Error names the limit and the setting that raises it, with the guest's
// stack trace as the runtime reported it.
func (e *StackLimitError) Error() string { return e.trap.Error() }

// Unwrap returns the trap as the runtime reported it.
func (e *StackLimitError) Unwrap() error { return e.trap }

// stackLimited is err with the native loader's stack-limit trap in it told
// as a StackLimitError, the type of this package's API.
func stackLimited(err error) error {
	var se *wasmrt.StackLimitError
	if !errors.As(err, &se) {
		return err
	}
	return &StackLimitError{Limit: se.Limit, trap: err}
}

// LinkedDepthError ends a call of an Extism plugin whose calls through its
// linked modules ([plugins.modules]) nested deeper than its Limit,
// Limits.MaxLinkedDepth (a recursion through them): the call fails with
// ErrTrap, wrapping it, and errors.As finds it.
type LinkedDepthError = extism.LinkedDepthError

// MemoryLimitError refuses an Extism plugin whose modules (its own, those
// of [plugins.modules] and Extism's kernel) would hold more memory than its
// memory_mb (LimitMiB) together: Load fails with ErrLoad when their
// memories declare more than that at least (Declared names each), wrapping
// it, and errors.As finds it. (An instance holding more once initialized
// would fail with ErrTrap, wrapping it, the call that made it counted in
// Stats.Faults; Load's check and the arena's bound on growth leave no way
// there.)
type MemoryLimitError = extism.MemoryLimitError

// ModuleMemory is what one module's memory declares at least, as
// MemoryLimitError.Declared lists them.
type ModuleMemory = extism.ModuleMemory

// Error is a plugin failure. It names the plugin and the export, and
// matches one of the Err* kinds under errors.Is.
type Error struct {
	Plugin string
	Export string // empty for load-time errors
	Kind   error  // one of the Err* values above
	Msg    string
	Err    error // the underlying cause, if any
}

// Error reads "plugin <name> export <export>: <kind>: <msg>: <cause>". The
// plugin's name, the message and the cause may hold text a guest wrote (its
// manifest, its error message, a trap's stack of its function names): they
// are escaped (safetext), so that the error can be shown to a person.
func (e *Error) Error() string {
	where := "plugin " + quote(e.Plugin)
	if e.Export != "" {
		where += " export " + e.Export
	}
	msg := e.Kind.Error()
	if e.Msg != "" {
		msg += ": " + safetext.Escape(e.Msg)
	}
	if e.Err != nil {
		msg += ": " + safetext.Escape(e.Err.Error())
	}
	return where + ": " + msg
}

// PluginName returns the plugin's name; engine.PluginError uses it not to
// name the plugin twice.
func (e *Error) PluginName() string { return e.Plugin }

// Is reports whether target is e's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

func quote(s string) string { return fmt.Sprintf("%q", s) }

// boundedErr is a failure's cause whose text is cut to a plugin's
// Limits.MaxErrorBytes: a trap's message holds a wasm stack trace of names
// the guest chose, megabytes of them if it likes, and the text of an error
// goes to logs, terminals and the model. errors.Is and errors.As see the
// cause.
type boundedErr struct {
	err  error
	text string
}

func (e *boundedErr) Error() string { return e.text }
func (e *boundedErr) Unwrap() error { return e.err }

// bound is err with its text escaped and cut to max bytes (nil stays nil).
func bound(err error, max int) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if len(text) <= max && safetext.Escape(text) == text {
		return err
	}
	return &boundedErr{err: err, text: safetext.Truncate(safetext.Escape(text), max)}
}
