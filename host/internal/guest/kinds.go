package guest

import "errors"

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
