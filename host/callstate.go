package host

import (
	"context"
	"crypto/rand"
	"time"
)

// callState is what the host functions of one instance know of the call it
// runs: its deadline and its caller's cancellation, and the instance's log
// budget. The goroutine that runs a call sets them before it enters the
// guest (an instance serves one call at a time), and the host functions the
// guest calls, WASI's included, read them: each returns or fails by the
// deadline, however long the guest asked it to block or work.
type callState struct {
	deadline time.Time
	done     <-chan struct{} // the caller's context's Done; nil: never
	closing  context.Context // done when the plugin closes (see Plugin.Close)
	log      *logWriter
}

// newCallState is the state of a new instance of p.
func newCallState(p *Plugin) *callState {
	s := &callState{closing: p.closing}
	s.log = newLogWriter(p, s)
	return s
}

// begin readies s for a call ending at deadline, or when ctx is done, and
// returns ctx carrying s for the host functions (see stateOf).
func (s *callState) begin(ctx context.Context, deadline time.Time) context.Context {
	s.deadline, s.done = deadline, ctx.Done()
	s.log.refill()
	return context.WithValue(ctx, callStateKey{}, s)
}

// callStateKey is the context key of a call's *callState.
type callStateKey struct{}

// stateOf is the state of the call ctx belongs to, or nil outside a call.
func stateOf(ctx context.Context) *callState {
	s, _ := ctx.Value(callStateKey{}).(*callState)
	return s
}

// expired reports why the call must end now, if it must: its deadline
// passed, its caller gave up, or the plugin is closing.
func (s *callState) expired() error {
	select {
	case <-s.done:
		return context.Canceled
	case <-s.closing.Done():
		return ErrClosed
	default:
	}
	if !time.Now().Before(s.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// sleep is the instance's nanosleep, which WASI's poll_oneoff calls for a
// clock subscription (sched_yield does not sleep): it sleeps as asked but
// ends the call, as a panic that wazero returns from it, when the deadline
// or the caller's cancellation comes first. Returning early instead would
// let a guest loop on 30-second sleeps that each take no time, and count the
// call a success.
func (s *callState) sleep(ns int64) {
	d := time.Duration(ns)
	stop := context.DeadlineExceeded
	if left := time.Until(s.deadline); d >= left {
		d = max(left, 0)
	} else {
		stop = nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.done:
		stop = context.Canceled
	case <-s.closing.Done():
		stop = ErrClosed
	}
	if stop != nil {
		panic(stop)
	}
}

// randChunk is how many random bytes the instance's random source gives at
// a time, checking the deadline before each: WASI's random_get fills a
// buffer as large as the guest asks (its whole memory) in one call.
const randChunk = 64 << 10

// randReader is the instance's random source: the host's CSPRNG, read in
// chunks with the call's deadline checked before each.
type randReader struct{ s *callState }

func (r randReader) Read(p []byte) (int, error) {
	if err := r.s.expired(); err != nil {
		panic(err)
	}
	return rand.Read(p[:min(len(p), randChunk)])
}
