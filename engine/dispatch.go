package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Defaults of MiddlewareConfig.
const (
	DefaultHookTimeout     = 2 * time.Second
	DefaultQuarantineAfter = 5
	DefaultQuarantineFor   = 30 * time.Second
	MaxQuarantineFor       = 10 * time.Minute
)

// Hook call outcomes, as in Event.Outcome.
const (
	OutcomeOK          = "ok"
	OutcomeError       = "error"
	OutcomePanic       = "panic"
	OutcomeTimeout     = "timeout"
	OutcomeQuarantined = "quarantined" // not called: the middleware is in quarantine
)

// ErrHookTimeout marks a middleware hook that outran its deadline.
var ErrHookTimeout = errors.New("middleware hook timed out")

// MiddlewareError is a middleware failure that ended a turn (a fail-closed
// before_run); it names the middleware and the hook.
type MiddlewareError struct {
	Middleware string
	Hook       string
	Err        error
}

func (e *MiddlewareError) Error() string {
	return fmt.Sprintf("middleware %q %s failed (fail_closed): %v", e.Middleware, e.Hook, e.Err)
}

// Unwrap returns the hook's error.
func (e *MiddlewareError) Unwrap() error { return e.Err }

// WithMiddleware appends m to the middleware chain. cfg, if given, sets
// how it is run.
func WithMiddleware(m Middleware, cfg ...MiddlewareConfig) Option {
	return func(e *Engine) { e.middleware = append(e.middleware, newMW(m, cfg)) }
}

// mw is one middleware in the chain, with its run settings and health.
type mw struct {
	f    *Funcs
	orig Middleware // as given, for io.Closer
	cfg  MiddlewareConfig

	mu          sync.Mutex
	calls       uint64
	faults      uint64
	quarantines uint64
	consecutive int
	level       int       // quarantines in a row, for the doubling backoff
	until       time.Time // quarantined until; zero when not
	lat         []time.Duration
	latNext     int
}

// latencyWindow is how many recent call durations the percentiles use.
const latencyWindow = 1024

func newMW(m Middleware, cfg []MiddlewareConfig) *mw {
	c := MiddlewareConfig{}
	if len(cfg) > 0 {
		c = cfg[0]
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultHookTimeout
	}
	if c.QuarantineAfter <= 0 {
		c.QuarantineAfter = DefaultQuarantineAfter
	}
	if c.QuarantineFor <= 0 {
		c.QuarantineFor = DefaultQuarantineFor
	}
	return &mw{f: funcsOf(m), orig: m, cfg: c}
}

// MiddlewareInfo is a middleware an engine runs, with its configuration.
type MiddlewareInfo struct {
	Funcs  *Funcs
	Config MiddlewareConfig
}

// Middleware returns the middleware the engine runs, in call order, once
// Initialize has run: for a host that runs them on another engine's behalf
// (package temporal's workers, for the engine of a workflow, whose
// middleware hooks are activities).
func (e *Engine) Middleware() []MiddlewareInfo {
	out := make([]MiddlewareInfo, len(e.middleware))
	for i, m := range e.middleware {
		out[i] = MiddlewareInfo{Funcs: m.f, Config: m.cfg}
	}
	return out
}

// chain is the middleware in call order.
func (e *Engine) chain() []*mw { return e.middleware }

// callMiddleware runs fn(ctx, arg), one hook of m, in isolation: quarantine
// check, deadline, panic recovery, accounting, quarantine on repeated
// faults, and a timing event. step is the step the hook's payload names,
// for the events. ran is false when the hook was skipped for quarantine.
// The hook and its argument come apart, not as one closure, so that a
// Bounded call allocates none.
func callMiddleware[T any](e *Engine, ctx context.Context, r *run, m *mw, hook string, step int, fn func(context.Context, T) error, arg T) (ran bool, err error) {
	if !m.admit(e, r, hook, step) {
		e.emit(ctx, r, Event{Kind: EventHook, Step: step, Hook: hook, Plugin: m.f.ID, Outcome: OutcomeQuarantined})
		return false, nil
	}
	// One clock read starts the call (its deadline and its duration) and
	// one of the monotonic clock alone (time.Since) ends it (its duration,
	// and its event's Elapsed): on a small guest a read of both clocks
	// (time.Now) is a tenth of the call.
	start := time.Now()
	deadline := start.Add(m.cfg.Timeout)
	ctx, span := e.tel.startHook(ctx, m.f.ID, hook)
	if m.f.Bounded {
		// No context.WithTimeout: its timer, its channel and its link into
		// the run's context cost more than a small guest's call, and the
		// hook returns by its deadline on its own. The deadline goes down as
		// a value instead (BoundedCall), on a context the run reuses.
		err = recovered(r.bounded(ctx, deadline), fn, arg)
	} else {
		a := arg // captured by the watchdog's goroutine: on the heap, on this path only
		err = e.watched(ctx, m, deadline, func(ctx context.Context) error { return recovered(ctx, fn, a) })
	}
	d := time.Since(start)
	end := start.Add(d)
	outcome := OutcomeOK
	switch {
	case err == nil:
	case errors.Is(err, errPanic):
		outcome = OutcomePanic
	case errors.Is(err, ErrHookTimeout) || errors.Is(err, context.DeadlineExceeded):
		outcome = OutcomeTimeout
	default:
		outcome = OutcomeError
	}
	if err != nil {
		err = fmt.Errorf("middleware %q %s: %w", m.f.ID, hook, err)
	}
	span.end(outcome, err)
	e.emitAt(ctx, r, Event{Kind: EventHook, Step: step, Hook: hook, Plugin: m.f.ID, Duration: d, Outcome: outcome, Err: err}, end)
	m.record(e, ctx, r, hook, step, d, err)
	return true, err
}

// watched runs a hook that may ignore its context on a goroutine of its
// own, abandoning it at deadline.
func (e *Engine) watched(ctx context.Context, m *mw, deadline time.Time, fn func(ctx context.Context) error) error {
	hctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	done := make(chan error, 1) // buffered: an abandoned hook can still finish
	go func() { done <- fn(hctx) }()
	select {
	case err := <-done:
		return err
	case <-hctx.Done():
		return fmt.Errorf("%w after %s", ErrHookTimeout, m.cfg.Timeout)
	}
}

// BoundedCall is a Bounded middleware's hook call as the engine makes it,
// which the hook finds in its context (BoundedCallOf): the call's deadline,
// which the engine arms no timer for. It is valid during the call only.
type BoundedCall struct {
	deadline time.Time
}

// encoded is an event's payload as JSON, encoded for the first JSON hook
// the event goes to (encodeOnce); the engine resets it when the payload
// changes (a mutating hook's rewrite).
type encoded struct {
	raw  []byte
	err  error
	done bool
}

// boundedCallKey is the context key of a *BoundedCall.
type boundedCallKey struct{}

// boundedCalls is a run's context for its Bounded hook calls: the
// caller's, carrying the run's one BoundedCall. The run keeps it from call
// to call, so a call allocates nothing for it, and a plugin's instance is
// handed the same context each time (package host then reuses its own call
// state). It is a context.WithValue, not a type of its own, so that values
// are looked up by the context package's own walk, which passes a
// context.WithoutCancel (endTurn's) without allocating.
type boundedCalls struct {
	parent, ctx context.Context
	call        BoundedCall
}

// bounded readies the run's BoundedCall for a call ending at deadline and
// returns its context over parent. Hooks run one at a time on the run's
// goroutine, and a Bounded hook returns before the next is called, so the
// one BoundedCall serves them all in turn.
func (r *run) bounded(parent context.Context, deadline time.Time) context.Context {
	b := &r.bounds
	if b.ctx == nil || b.parent != parent { // the run's context, or endTurn's detached one
		b.parent, b.ctx = parent, context.WithValue(parent, boundedCallKey{}, &b.call)
	}
	b.call = BoundedCall{deadline: deadline}
	return b.ctx
}

// event readies the run's shared payload encodings for a new event and
// returns them: without the history and with it.
func (r *run) event() *[2]encoded {
	r.encoded = [2]encoded{}
	return &r.encoded
}

// BoundedCallOf is the Bounded middleware hook call ctx was given for, or
// nil outside one.
func BoundedCallOf(ctx context.Context) *BoundedCall {
	c, _ := ctx.Value(boundedCallKey{}).(*BoundedCall)
	return c
}

// Deadline is when the call must have returned: its start and the
// middleware's MiddlewareConfig.Timeout. The hook's context does not end at
// it (its own deadline is the run's): the hook enforces it.
func (c *BoundedCall) Deadline() time.Time { return c.deadline }

// errPanic is a hook's, a middleware's or a tool's panic, recovered; the
// error names which.
var errPanic = errors.New("panicked")

// recovered runs fn(ctx, arg), turning a panic into its error.
func recovered[T any](ctx context.Context, fn func(context.Context, T) error, arg T) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errPanic, p)
		}
	}()
	return fn(ctx, arg)
}

// errQuarantined is a fail-closed middleware's failure while it is in
// quarantine: skipping it would open what it guards.
var errQuarantined = errors.New("in quarantine after repeated faults")

// admit says whether m may be called now, releasing it from a quarantine
// that has run out.
func (m *mw) admit(e *Engine, r *run, hook string, step int) bool {
	m.mu.Lock()
	if m.until.IsZero() {
		m.mu.Unlock()
		return true
	}
	if e.now().Before(m.until) {
		m.mu.Unlock()
		return false
	}
	m.until, m.consecutive = time.Time{}, 0
	m.mu.Unlock()
	e.emit(r.ctx, r, Event{Kind: EventRelease, Step: step, Hook: hook, Plugin: m.f.ID,
		Message: fmt.Sprintf("middleware %q re-enabled after its quarantine", m.f.ID)})
	return true
}

func (m *mw) record(e *Engine, ctx context.Context, r *run, hook string, step int, d time.Duration, err error) {
	m.mu.Lock()
	m.calls++
	if len(m.lat) < latencyWindow {
		m.lat = append(m.lat, d)
	} else {
		m.lat[m.latNext] = d
		m.latNext = (m.latNext + 1) % latencyWindow
	}
	// A call that was already running when the quarantine began reports
	// late: it is counted, but neither re-quarantines the middleware (which
	// would double the period with no release between) nor resets it.
	inQuarantine := !m.until.IsZero()
	if err == nil {
		if !inQuarantine {
			m.consecutive, m.level = 0, 0
		}
		m.mu.Unlock()
		return
	}
	m.faults++
	if inQuarantine {
		m.mu.Unlock()
		return
	}
	m.consecutive++
	quarantine := m.consecutive >= m.cfg.QuarantineAfter
	var period time.Duration
	if quarantine {
		period = min(m.cfg.QuarantineFor<<m.level, MaxQuarantineFor)
		m.level++
		m.quarantines++
		m.until = e.now().Add(period)
	}
	m.mu.Unlock()
	if quarantine {
		e.tel.quarantined(ctx, m.f.ID, hook)
		e.emit(ctx, r, Event{Kind: EventQuarantine, Step: step, Hook: hook, Plugin: m.f.ID, Err: err,
			Message: fmt.Sprintf("middleware %q quarantined for %s after %d consecutive faults", m.f.ID, period, m.cfg.QuarantineAfter)})
	}
}

// MiddlewareStats are one middleware's counters since the engine was built.
type MiddlewareStats struct {
	Name        string
	Calls       uint64 // hook calls made (skipped ones not counted)
	Faults      uint64 // calls that failed, panicked or timed out
	Quarantines uint64
	Quarantined bool          // disabled right now
	P50, P99    time.Duration // over the last 1024 calls
}

// MiddlewareStats returns the counters of every middleware, in call order.
// During Initialize it waits for it, which adds the plugins' middleware.
func (e *Engine) MiddlewareStats() []MiddlewareStats {
	e.life.mu.Lock()
	chain := e.chain()
	e.life.mu.Unlock()
	return e.statsOf(chain)
}

// statsOf returns the counters of the middleware in chain.
func (e *Engine) statsOf(chain []*mw) []MiddlewareStats {
	var out []MiddlewareStats
	for _, m := range chain {
		m.mu.Lock()
		s := MiddlewareStats{Name: m.f.ID, Calls: m.calls, Faults: m.faults, Quarantines: m.quarantines,
			Quarantined: !m.until.IsZero() && e.now().Before(m.until)}
		lat := slices.Clone(m.lat)
		m.mu.Unlock()
		slices.Sort(lat)
		if n := len(lat); n > 0 {
			s.P50, s.P99 = lat[(n-1)*50/100], lat[(n-1)*99/100]
		}
		out = append(out, s)
	}
	return out
}

// Quarantine is the part of a middleware's health that decides its
// quarantine: its faults in a row, its backoff level (quarantines in a
// row) and the end of its quarantine by the engine's clock (zero when it
// is not in one). An engine keeps it for as long as it lives; a host that
// runs one session on several engines in turn (package temporal's session
// workflow, across a continue-as-new) carries it from one to the next with
// Quarantines and RestoreQuarantines, so that a middleware quarantined on
// the first is still quarantined on the next. The counters of
// MiddlewareStats are not part of it: they describe one engine.
type Quarantine struct {
	Middleware  string // the middleware's ID
	Consecutive int
	Level       int
	Until       time.Time
}

// Quarantines returns the quarantine state of every middleware, in call
// order, once Initialize has run.
func (e *Engine) Quarantines() []Quarantine {
	e.life.mu.Lock()
	chain := e.chain()
	e.life.mu.Unlock()
	out := make([]Quarantine, 0, len(chain))
	for _, m := range chain {
		m.mu.Lock()
		out = append(out, Quarantine{Middleware: m.f.ID, Consecutive: m.consecutive, Level: m.level, Until: m.until})
		m.mu.Unlock()
	}
	return out
}

// RestoreQuarantines sets the quarantine state of the engine's middleware
// from states (as Quarantines returned them, on this engine or another of
// the same configuration), by middleware ID, once Initialize has run: a
// state whose middleware the engine does not run is ignored, and a
// middleware without a state keeps its own.
func (e *Engine) RestoreQuarantines(states []Quarantine) {
	e.life.mu.Lock()
	chain := e.chain()
	e.life.mu.Unlock()
	for _, s := range states {
		for _, m := range chain {
			if m.f.ID == s.Middleware {
				m.mu.Lock()
				m.consecutive, m.level, m.until = s.Consecutive, s.Level, s.Until
				m.mu.Unlock()
			}
		}
	}
}
