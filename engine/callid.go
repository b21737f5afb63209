package engine

import (
	"context"
	"crypto/rand"
	"fmt"
)

// callIDKey is the context key of a tool call's ID (CallID).
type callIDKey struct{}

// WithCallID is ctx carrying id as the ID of the tool call it runs. A host
// that runs a tool outside the engine's loop gives it the call's ID this
// way (package temporal: the activity's, the same on every attempt); a
// caller of Engine.CallTool may too, and the engine keeps it.
func WithCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// CallID is the ID of the tool call whose context ctx is, or "" outside
// one. It names one call of a tool: the same on each attempt of that call
// where the host makes it again, and no other call's, so that a tool whose
// call has effects outside it (an append, a payment, a message sent) can
// do them once per ID. Package temporal makes a call again when Temporal
// gave up on an attempt while the call ran and before its result was in
// the result journal: its worker died, its heartbeat came later than
// heartbeat_timeout (a live but starved worker), its timeout passed, its
// worker was stopping. The attempt given up on may still be running, so
// two attempts of one ID may run at once: dedupe atomically (create a
// file named by the ID with O_EXCL, insert under a unique key), not by a
// check and then an append. The ID is opaque: compare it, do not parse
// it.
//
// In a turn the engine runs, it is the session's ID, a nonce of the run
// (random, or a durable executor's: WithNonce), the turn's number,
// the step's and the call's within the step
// ("<session>/<nonce>/<turn>/<step>/<call>"): the nonce keeps it unique
// when a session's turns are numbered from 1 again (a host that resumes a
// session by its ID, a pipeline run resumed). Engine.CallTool's is the
// same, of turn 1 and step 1, unless its context has an ID already.
func CallID(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}

// WithNonce sets where the engine draws the unique parts of the IDs it
// makes: the ID of a session started without one (NewSession) and a
// run's call-ID nonce (CallID). By default they are random, which a
// durable executor replaying a run replaces with values of its own, drawn
// deterministically, so that the replay runs as the first run did
// (package temporal: its sessions' calls reach plugins in session
// isolation under the same session, and its tools are activities whose
// IDs are the activities'). Each call must return a value not returned
// before by the engine's source. nil sets nothing.
func WithNonce(nonce func() string) Option {
	if nonce == nil {
		return nop
	}
	return func(e *Engine) { e.nonce = nonce }
}

// randomNonce is the engine's nonce by default: 16 random characters
// (80 bits).
func randomNonce() string { return rand.Text()[:16] }

// callID is the ID of the call-th tool call of step in r, unless r's
// context has one.
func (e *Engine) callID(r *run, step, call int) string {
	if id := CallID(r.ctx); id != "" {
		return id
	}
	if r.nonce == "" {
		r.nonce = e.nonce()
	}
	return fmt.Sprintf("%s/%s/%d/%d/%d", r.SessionID, r.nonce, r.Turn, step, call)
}
