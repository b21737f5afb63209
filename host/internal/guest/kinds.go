package guest

import (
	"errors"

	"github.com/morphhost/morph/internal/safetext"
)

// Kinds of plugin failure. A loader returns them as a call's or a load's
// kind; package host re-exports each under the same name (host.ErrTrap is
// ErrTrap), so that errors.Is on a host.Error matches either. The host's
// names are documented for users; these for the loaders that return them.
var (
	// ErrTimeout: the call outran its deadline, or its caller's.
	ErrTimeout = errors.New("plugin call timed out")
	// ErrCanceled: the caller gave up before the call ended.
	ErrCanceled = errors.New("plugin call canceled")
	// ErrTrap: the guest trapped; the host tells a trap from a timeout or a
	// cancellation by its cause.
	ErrTrap = errors.New("plugin trapped")
	// ErrInputTooLarge: the input exceeds the plugin's max input bytes.
	ErrInputTooLarge = errors.New("plugin input too large")
	// ErrOutputTooLarge: the guest answered more than maxOut bytes.
	ErrOutputTooLarge = errors.New("plugin output too large")
	// ErrBadOutput: the guest's output is not the export's payload, or
	// points outside its memory.
	ErrBadOutput = errors.New("plugin output invalid")
	// ErrABIMismatch: the module's exports do not follow the loader's
	// calling convention, or it lacks the export called.
	ErrABIMismatch = errors.New("plugin ABI mismatch")
	// ErrGuest: the guest reported an error through its calling convention.
	ErrGuest = errors.New("plugin reported an error")
	// ErrLoad: the module could not be read, verified or compiled.
	ErrLoad = errors.New("plugin load failed")
	// ErrClosed: the plugin was closed (its Env.Closing is done).
	ErrClosed = errors.New("plugin closed")
)

// CallError is a call's failure: what Instance.Call returns (as an error,
// nil when the call succeeded), and what the host's steps around a call
// (taking an instance, telling it of a lost session) return, before the
// host makes it the user's *host.Error. errors.Is matches its Kind.
type CallError struct {
	Kind error  // one of the Err* kinds above, or a host's own (host.ErrSessionLimit)
	Msg  string // what the guest said, or the host says, of it; may be ""
	Err  error  // the cause, if any: a trap's, a timeout's context error
}

// Fail is the failure of kind, with msg and the cause err (nil for none).
func Fail(kind error, msg string, err error) error {
	return &CallError{Kind: kind, Msg: msg, Err: err}
}

// Error reads "<kind>: <msg>: <cause>", each part escaped: the message and
// the cause may hold what the guest wrote.
func (e *CallError) Error() string {
	s := e.Kind.Error()
	if e.Msg != "" {
		s += ": " + safetext.Escape(e.Msg)
	}
	if e.Err != nil {
		s += ": " + safetext.Escape(e.Err.Error())
	}
	return s
}

// Is reports whether target is e's kind.
func (e *CallError) Is(target error) bool { return target == e.Kind }

// Unwrap returns the cause.
func (e *CallError) Unwrap() error { return e.Err }

// AsCallError is err as a *CallError, nil for nil. An error that is none
// (which no loader should return) is taken for a trap caused by it, whose
// kind the host then tells from that cause as any trap's.
func AsCallError(err error) *CallError {
	if err == nil {
		return nil
	}
	var ce *CallError
	if errors.As(err, &ce) {
		return ce
	}
	return &CallError{Kind: ErrTrap, Err: err}
}

// KindOf is err's kind (see AsCallError), nil for nil.
func KindOf(err error) error {
	if ce := AsCallError(err); ce != nil {
		return ce.Kind
	}
	return nil
}
