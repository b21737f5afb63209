package guest

import (
	"context"
	"crypto/rand"
	"log/slog"
	"reflect"
	"time"
)

// CallState is what the host functions of one instance know of the call it
// runs: its deadline and its caller's cancellation, and the instance's log
// budget. The goroutine that runs a call sets them before it enters the
// guest (an instance serves one call at a time), and the host functions the
// guest calls, WASI's included, read them: each returns or fails by the
// deadline, however long the guest asked it to block or work.
type CallState struct {
	deadline time.Time
	done     <-chan struct{} // the caller's context's Done; nil: never
	closing  context.Context // done when the plugin closes (Env.Closing)
	log      *LogWriter
	// toolsChanged: the guest said, during the call, that its tool list
	// changed (MCP's notify_tool_list_changed).
	toolsChanged bool
	// filesChanged names the first WASI function the guest called that
	// changes its table of open files (a host snapshot does not hold it),
	// "" while none.
	filesChanged string
	// imageRefused is why an image of the instance would not stand for
	// another's initialization, beside filesChanged (RefuseImage).
	imageRefused string
	ctx          *callContext // the last call's context, which Begin reuses for the same caller's context
}

// MarkToolsChanged records that the guest said its tool list changed.
func (s *CallState) MarkToolsChanged() { s.toolsChanged = true }

// TakeToolsChanged reports whether the guest said, since the last take,
// that its tool list changed.
func (s *CallState) TakeToolsChanged() bool {
	changed := s.toolsChanged
	s.toolsChanged = false
	return changed
}

// FilesChanged names the first WASI function the instance called that
// opens, closes or renumbers a file descriptor (path_open, fd_close, ...),
// "" when it has called none: its open files are then the ones it was
// given, the same in every instance of its plugin.
func (s *CallState) FilesChanged() string { return s.filesChanged }

// RefuseImage records that what the instance did while initializing must
// be done by every instance, and why (an Extism guest's http_request: each
// instance makes its own requests); the first reason is kept.
func (s *CallState) RefuseImage(why string) {
	if s.imageRefused == "" {
		s.imageRefused = why
	}
}

// ImageRefused is the reason RefuseImage recorded, "" when none.
func (s *CallState) ImageRefused() string { return s.imageRefused }

// NewCallState is the state of a new instance of a plugin that logs to
// log() within maxLogBytes per call, and closes when closing is done.
func NewCallState(log func() *slog.Logger, maxLogBytes int, closing context.Context) *CallState {
	s := &CallState{closing: closing}
	s.log = &LogWriter{log: log, state: s, max: maxLogBytes, budget: maxLogBytes}
	return s
}

// Begin readies s for a call ending at deadline, or when ctx is done, and
// returns ctx carrying s for the host functions (see StateOf).
//
// The context it returns is the last call's when ctx is the same: a call
// then allocates nothing, and so triggers no garbage collection, which all
// cores share (with a context.WithValue per call, pooled calls to a small
// guest were slower on two cores than on one). Nothing in it changes from
// call to call, so a host function that kept it sees what it saw. An idle
// instance keeps its last caller's context alive until its next call.
func (s *CallState) Begin(ctx context.Context, deadline time.Time) context.Context {
	s.deadline, s.done = deadline, ctx.Done()
	s.log.refill()
	if s.ctx == nil || !sameContext(s.ctx.Context, ctx) {
		s.ctx = &callContext{Context: ctx, state: s}
	}
	return s.ctx
}

// callContext is a call's context: its caller's, carrying its CallState.
type callContext struct {
	context.Context
	state *CallState
}

// callStateKey is the context key of a call's *CallState.
type callStateKey struct{}

// Value is the call's CallState under callStateKey, else the caller's value.
func (c *callContext) Value(key any) any {
	if _, ok := key.(callStateKey); ok {
		return c.state
	}
	return c.Context.Value(key)
}

// sameContext reports whether a and b are the same context, without the
// panic of == on two values of a type that is not comparable.
func sameContext(a, b context.Context) bool {
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// StateOf is the state of the call ctx belongs to, or nil outside a call.
func StateOf(ctx context.Context) *CallState {
	s, _ := ctx.Value(callStateKey{}).(*CallState)
	return s
}

// Log is the instance's log: its stdout and stderr, and its log calls.
func (s *CallState) Log() *LogWriter { return s.log }

// Expired reports why the call must end now, if it must: its deadline
// passed, its caller gave up, or the plugin is closing.
func (s *CallState) Expired() error {
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

// CallContext is ctx ending at the call's deadline and at the plugin's
// Close too, for a host function that blocks (http_request). Nothing else
// in a native call watches the context: a context.WithTimeout per call (a
// runtime timer started and stopped) cost more than a third of a
// microsecond, a tenth of a small call, so the deadline is a value of the
// call's CallState.
func CallContext(ctx context.Context) (context.Context, context.CancelFunc) {
	s := StateOf(ctx)
	if s == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithDeadline(ctx, s.deadline)
	stop := context.AfterFunc(s.closing, cancel)
	return ctx, func() { stop(); cancel() }
}

// sleep is the instance's nanosleep, which WASI's poll_oneoff calls for a
// clock subscription (sched_yield does not sleep): it sleeps as asked but
// ends the call, as a panic that wazero returns from it, when the deadline
// or the caller's cancellation comes first. Returning early instead would
// let a guest loop on 30-second sleeps that each take no time, and count the
// call a success.
func (s *CallState) sleep(ns int64) {
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
type randReader struct{ s *CallState }

func (r randReader) Read(p []byte) (int, error) {
	if err := r.s.Expired(); err != nil {
		panic(err)
	}
	return rand.Read(p[:min(len(p), randChunk)])
}
