package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
)

// maxForwardedLogBytes caps the data of a server's log message forwarded
// to a caller (the caller's notifier caps how many): larger data is
// replaced by a note of its size.
const maxForwardedLogBytes = 64 << 10

// following is a server's calls in flight, for its notifications to reach
// the caller of the call they belong to (engine.CallNotifierOf of the
// call's context: `morph mcp serve`'s client, or an embedder's).
type following struct {
	next  int64
	calls int                 // calls in flight
	by    map[string]followed // the calls whose callers take notifications, by the progress token sent for them
}

// followed is a call in flight whose caller takes notifications.
type followed struct {
	n   engine.CallNotifier
	ctx context.Context // the call's: its deadline bounds a question relayed to its caller (client_ask.go)
}

// follow counts a call in and, when its caller takes notifications (the
// call's context ctx has an engine.CallNotifier), gives it a token of the
// server's own (the caller's token cannot be trusted unique among
// callers), sent as the call's progressToken when the caller has a token
// itself. done counts the call out.
func (srv *server) follow(ctx context.Context, p *sdk.CallToolParams) (done func()) {
	n := engine.CallNotifierOf(ctx)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	f := &srv.following
	f.calls++
	token := ""
	if n != nil {
		f.next++
		token = "morph-" + strconv.FormatInt(f.next, 10)
		if f.by == nil {
			f.by = map[string]followed{}
		}
		f.by[token] = followed{n: n, ctx: ctx}
		if n.ProgressToken() != nil {
			p.SetProgressToken(token)
		}
	}
	return func() {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		f.calls--
		delete(f.by, token)
	}
}

// progress is a server's notifications/progress: counted, and passed to
// the caller of the call whose token it carries, if it is in flight.
func (srv *server) progress(_ context.Context, p *sdk.ProgressNotificationParams) {
	srv.notifications.Add(1)
	token, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	srv.mu.Lock()
	n := srv.following.by[token].n
	srv.mu.Unlock()
	if n != nil && n.ProgressToken() != nil {
		n.Progress(p.Progress, p.Total, p.Message)
	}
}

// forwardLog passes a server's log message to the caller of the one call
// in flight, when there is exactly one and its caller takes notifications.
// A log message names no call: with two calls in flight it could be
// either's, and one caller must not read what may be another's.
func (srv *server) forwardLog(p *sdk.LoggingMessageParams) {
	call, _ := srv.only()
	n := call.n
	if n == nil {
		return
	}
	data, err := json.Marshal(p.Data)
	if err != nil || len(data) > maxForwardedLogBytes {
		data, _ = json.Marshal(fmt.Sprintf("(log data of %d bytes not forwarded, over %d)", len(data), maxForwardedLogBytes))
	}
	n.Log(string(p.Level), p.Logger, data)
}

// only is the one call in flight when there is exactly one and its caller
// takes notifications (else its n is nil), and how many calls are in
// flight. What a server sends unasked names no call (a log message, a
// request of its own): with two calls in flight it could be either's.
func (srv *server) only() (followed, int) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.following.calls == 1 {
		for _, c := range srv.following.by {
			return c, 1
		}
	}
	return followed{}, srv.following.calls
}
