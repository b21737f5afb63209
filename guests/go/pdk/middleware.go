package pdk

import "github.com/morphhost/morph/abi"

// Session middleware (ABI v1, additive). The host calls the middleware hooks
// (registered by the functions of hooks_gen.go) of every plugin that
// registers them, in order with the other middleware, during a session's
// turns. Observing hooks (OnTurnStart, OnAction, ...) answer nothing; an
// error they return is logged by the host and changes nothing. Mutating
// hooks (BeforeRun, BeforeToolCall, ...) answer an output whose zero value
// changes nothing. The host isolates every failure: an error, a panic, a
// trap or a timeout never ends the session; what it means for the session
// (skip the hook, or deny the call) is the host's policy for the plugin.
//
// The lifecycle below is no hook of the manifest.

// OnDestroy registers fn to run when the host closes the plugin: once on
// each idle instance, through morph_destroy, before the instance is
// discarded. It is no hook of the manifest; it is a chance to log or flush
// what the instance kept. An instance discarded after a trap or a timeout,
// or busy when the host closes, is not told. A panic in fn is reported to
// the host, which logs it (built with TinyGo, the panic traps instead).
func OnDestroy(fn func()) {
	switch {
	case fn == nil:
		reg.fail("pdk.OnDestroy: nil function")
	case reg.onDestroy != nil:
		reg.fail("pdk.OnDestroy: registered twice")
	default:
		reg.onDestroy = fn
	}
}

// OnInstanceReplaced registers fn to run, through morph_instance_replaced,
// on a fresh instance of a plugin in session isolation before it serves a
// session whose earlier instance is gone (its session_idle passed, it was
// discarded after a fault, or it was served by another process): what the
// instance kept of the session is not here, and fn is the chance to say
// so or start over. It is no hook of the manifest. A panic in fn is
// reported to the host, which logs it.
func OnInstanceReplaced(fn func(abi.InstanceReplaced)) {
	switch {
	case fn == nil:
		reg.fail("pdk.OnInstanceReplaced: nil function")
	case reg.onReplaced != nil:
		reg.fail("pdk.OnInstanceReplaced: registered twice")
	default:
		reg.onReplaced = fn
	}
}

// WantHistory asks the host for the session history in the middleware
// payloads (the manifest's history). Without it they carry none, so the
// plugin's cost does not grow with the conversation.
func WantHistory() { reg.history = true }

// Requires names plugins (as the host's configuration names them) that must
// be loaded before this one; their middleware then runs first.
func Requires(names ...string) { reg.requires = append(reg.requires, names...) }
