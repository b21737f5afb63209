package mcp

import (
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// pollRetry is how long a client whose stream morph closed waits before
// it resumes (the SSE retry field).
const pollRetry = 500 * time.Millisecond

// pollVersion is the first protocol version whose request streams start
// with an event id (the SDK's priming event, SEP-1699): a stream of an
// older request has nothing a client could resume from, and closing it
// would lose the answer.
const pollVersion = "2025-11-25"

// poll closes a tool call's SSE stream every HTTPOptions.SSEPollAfter
// while the call runs, when the request is one to poll (over HTTP, events
// kept, protocol pollVersion or later by its header), and is what stops it.
// A stream not connected at the time (the client has not resumed yet) is
// not closed; the next tick tries again.
func (s *Server) poll(extra *sdk.RequestExtra) (stop func()) {
	after := time.Duration(s.pollAfter.Load())
	if after <= 0 || extra == nil || extra.CloseSSEStream == nil || extra.Header.Get("Mcp-Protocol-Version") < pollVersion {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(after)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				extra.CloseSSEStream(sdk.CloseSSEStreamArgs{RetryAfter: pollRetry})
			}
		}
	}()
	return func() { close(done) }
}
