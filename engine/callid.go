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
// where the host retries it (package temporal: a worker lost in the
// middle of the call, its result never recorded), and no other call's, so
// that a tool whose call has effects outside it (an append, a payment, a
// message sent) can do them once per ID. The ID is opaque: compare it, do
// not parse it.
//
// In a turn the engine runs, it is the session's ID, a random number of
// the turn, the turn's number, the step's and the call's within the step
// ("<session>/<nonce>/<turn>/<step>/<call>"): the nonce keeps it unique
// when a session's turns are numbered from 1 again (a host that resumes a
// session by its ID, a pipeline run resumed). Engine.CallTool's is the
// same, of turn 1 and step 1, unless its context has an ID already.
func CallID(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}

// callID is the ID of the call-th tool call of step in r, unless r's
// context has one.
func (r *run) callID(step, call int) string {
	if id := CallID(r.ctx); id != "" {
		return id
	}
	if r.nonce == "" {
		r.nonce = rand.Text()[:10]
	}
	return fmt.Sprintf("%s/%s/%d/%d/%d", r.SessionID, r.nonce, r.Turn, step, call)
}
