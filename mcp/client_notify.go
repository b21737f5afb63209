package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

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
	q   chan func()     // what is forwarded to n, sent in order by the call's own goroutine (forward)
}

// forwardQueueLen bounds the notifications waiting to be forwarded to one
// call's caller; past it they are dropped and counted
// (ServerStats.ForwardsDropped). The goroutine that reads the server's
// messages only hands them over, never waits for a caller that does not
// read (a notifier's send may take notifyTimeout), which would stall every
// answer of the server's, for every caller.
const forwardQueueLen = 64

// forwardFlushBound is how long a call's end waits for what was queued
// for its caller to be sent (its progress before its answer).
const forwardFlushBound = 5 * time.Second

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
		q, flushed := make(chan func(), forwardQueueLen), make(chan struct{})
		go func() {
			defer close(flushed)
			for send := range q {
				send()
			}
		}()
		f.by[token] = followed{n: n, ctx: ctx, q: q}
		if n.ProgressToken() != nil {
			p.SetProgressToken(token)
		}
		return func() {
			srv.mu.Lock()
			f.calls--
			delete(f.by, token)
			close(q) // under mu: forward sends under it
			srv.mu.Unlock()
			select {
			case <-flushed:
			case <-time.After(forwardFlushBound): // a caller that does not read: the rest goes on, or not, without the call
			}
		}
	}
	return func() {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		f.calls--
	}
}

// forward queues send for the caller of the call whose token is token, if
// it is in flight, without waiting: when the queue is full send is
// dropped and counted. It reports whether the call was found.
func (srv *server) forward(token string, send func(n engine.CallNotifier)) bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	call, ok := srv.following.by[token]
	if !ok {
		return false
	}
	select {
	case call.q <- func() { send(call.n) }:
	default:
		srv.forwardsDropped.Add(1)
	}
	return true
}

// progress is a server's notifications/progress: counted, and passed to
// the caller of the call whose token it carries, if it is in flight.
func (srv *server) progress(_ context.Context, p *sdk.ProgressNotificationParams) {
	srv.notifications.Add(1)
	token, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	srv.forward(token, func(n engine.CallNotifier) {
		if n.ProgressToken() != nil {
			n.Progress(p.Progress, p.Total, p.Message)
		}
	})
}

// forwardLog passes a server's log message to the caller of the one call
// in flight, when the entry forwards logs (ForwardLogs), there is exactly
// one call and its caller takes notifications. A log message names no
// call: with two calls in flight it could be either's, and even with one
// it may be about another's (sent after that call's answer, or by a job of
// the server's): morph multiplexes its callers onto one session with the
// server, so forwarding is for an entry whose callers are one party.
func (srv *server) forwardLog(p *sdk.LoggingMessageParams) {
	if !srv.cfg.ForwardLogs {
		return
	}
	srv.mu.Lock()
	token := ""
	if srv.following.calls == 1 {
		for t := range srv.following.by {
			token = t
		}
	}
	srv.mu.Unlock()
	if token == "" {
		return
	}
	data, err := json.Marshal(p.Data)
	if err != nil || len(data) > maxForwardedLogBytes {
		data, _ = json.Marshal(fmt.Sprintf("(log data of %d bytes not forwarded, over %d)", len(data), maxForwardedLogBytes))
	}
	srv.forward(token, func(n engine.CallNotifier) { n.Log(string(p.Level), p.Logger, data) })
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
