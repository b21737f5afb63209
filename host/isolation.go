package host

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/guest"
)

// One path serves every isolation mode: a call takes an idle instance of
// its key from p.free, or instantiates one, and gives it back there (in
// pooled mode, which has one key, to its core's shard: see shards). The
// mode only chooses the key (poolKey): "" for pooled, the session id for
// session; in call mode no instance is kept.
//
// In session mode an instance belongs to its session (see idleList) from
// the session's first call until the session ends (EndSession, which
// engine.Session.Close calls through the plugin's middleware) or has been
// idle, no call in flight, for Limits.SessionIdle (trim, from the front of
// the sessions' idle order). Nothing else takes it: Limits.MaxSessions is
// admission control, which makes a new session wait up to
// Limits.SessionWait for an open one to end or expire, then refuses it with
// ErrSessionLimit (acquire). A session that goes on after its instance
// went (it expired, or its instance was discarded after a fault, or its
// calls were made in another process: WithSessionCalls) runs on a fresh
// instance, which it is told of (tell). A session's lookup is by its
// key, in constant time however many sessions are open. The instance
// describe ran on at load is a spare, which holds no session's state: the
// first call that finds no instance of its own session takes it (so a
// one-session run instantiates once, as in pooled mode).

// defaultIsolation is the mode of a plugin that configures none: per session
// when it has an enabled middleware hook (middleware may keep state about
// the session it observes), pooled otherwise.
func defaultIsolation(hooks []string) string {
	for _, h := range hooks {
		if _, ok := abi.MiddlewareExports[h]; ok {
			return IsolationSession
		}
	}
	return IsolationPooled
}

// poolKey is the free list a call on ctx draws from and returns to; reuse is
// false in call mode, where no instance outlives its call.
func (p *Plugin) poolKey(ctx context.Context) (key string, reuse bool) {
	switch p.mode {
	case IsolationCall:
		return "", false
	case IsolationSession:
		if rc := engine.RunContext(ctx); rc != nil {
			return rc.SessionID, true
		}
	}
	return "", true
}

// sessionCallsKey is the context key of WithSessionCalls's counts.
type sessionCallsKey struct{}

// WithSessionCalls is ctx carrying how many calls the session of ctx
// (engine.RunContext, engine.WithSession) made of each plugin, by name,
// before this call: what a host that serves one session's calls in
// several processes (package temporal's workers) counts, so that a plugin
// in session isolation that has no instance of the session, though the
// session made calls of it (on another worker, or before this one
// restarted), knows the plugin's state of the session is not here: the
// call runs on a fresh instance, which is told, loudly, as a session that
// lost its instance is (abi.ReplacedMoved). So does a session that has
// instances here whose count is past what the calls served here account
// for (it went on elsewhere, then came back): those instances are stale,
// and released.
func WithSessionCalls(ctx context.Context, calls map[string]int) context.Context {
	return context.WithValue(ctx, sessionCallsKey{}, calls)
}

// earlierCalls is the count WithSessionCalls gave ctx for plugin. The
// counts come from outside the process (a workflow's input), so they are
// clamped: a negative one is none, and the largest is math.MaxInt-1, so
// that one past it (session.expect) does not wrap to a negative, which
// would make every later call of the session "moved" and release its
// instance each time.
func earlierCalls(ctx context.Context, plugin string) int {
	calls, _ := ctx.Value(sessionCallsKey{}).(map[string]int)
	return min(max(calls[plugin], 0), math.MaxInt-1)
}

// noteCall counts the call of the session ctx carries, whose earlier
// calls' count WithSessionCalls gave, in the session's instances here,
// before anything can refuse it (an input over max_input_bytes, no free
// instance in time): the process that counted it (a Temporal workflow)
// counted it when it made it, so a call refused here must not leave the
// session's next call looking moved (see get). A session whose calls went
// on elsewhere (a count past what is expected here) is left for get to
// find. Without counts in ctx (a local engine's calls) it does nothing.
func (p *Plugin) noteCall(ctx context.Context) {
	if p.mode != IsolationSession || ctx.Value(sessionCallsKey{}) == nil {
		return
	}
	key, reuse := p.poolKey(ctx)
	if !reuse || key == "" {
		return
	}
	earlier := earlierCalls(ctx, p.name)
	p.mu.Lock()
	if ses := p.free.of(key); ses != nil && earlier <= ses.expect {
		ses.expect = max(ses.expect, earlier+1)
	}
	p.mu.Unlock()
}

// sessionsFull is get's answer for a new session while MaxSessions are
// open: vacancy is closed when one of them ends or expires.
type sessionsFull struct{ vacancy chan struct{} }

func (*sessionsFull) Error() string { return "sessions full" }

// acquire takes an instance slot and an instance for a call on ctx from the
// core of shard sh, waiting, for a new session while the plugin's
// MaxSessions sessions are open, until one ends or expires (see
// sessionWait); or it says why not (as takeSlot), with nothing held. told
// is, for a session whose state was lost, why: the call tells the instance
// first (tell).
func (p *Plugin) acquire(ctx context.Context, sh *shard) (inst *instance, told string, err error) {
	var since, deadline time.Time // of the wait for a place
	for {
		if err = p.takeSlot(ctx, sh); err != nil {
			return nil, "", err
		}
		inst, told, err = p.get(ctx, sh)
		if err == nil {
			return inst, told, nil
		}
		p.slots.give(sh)
		full, ok := err.(*sessionsFull)
		if !ok {
			return nil, "", guest.Fail(p.classify(ctx, err), "instantiate", err)
		}
		if deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = withHookDeadline(ctx) // a wait keeps a middleware hook's deadline
			defer cancel()
			since, deadline = time.Now(), p.sessionWait(ctx)
		}
		if err = p.awaitVacancy(ctx, full.vacancy, since, deadline); err != nil {
			return nil, "", err
		}
	}
}

// sessionWait is how long a new session may wait for a place: up to
// Limits.SessionWait, and no later than leaves the call its timeout before
// its caller's deadline (a middleware hook's is the plugin's timeout and a
// margin), so that the caller hears of the limit, not of its own deadline.
func (p *Plugin) sessionWait(ctx context.Context) time.Time {
	deadline := time.Now().Add(p.limits.SessionWait)
	if d, ok := ctx.Deadline(); ok && d.Add(-p.limits.Timeout).Before(deadline) {
		deadline = d.Add(-p.limits.Timeout)
	}
	return deadline
}

// awaitVacancy waits for vacancy until deadline; past it, the new session,
// waiting since then, is refused (ErrSessionLimit, counted), naming the
// setting to raise.
func (p *Plugin) awaitVacancy(ctx context.Context, vacancy chan struct{}, since, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-vacancy:
		return nil
	case <-ctx.Done():
		return guest.Fail(contextKind(ctx.Err()), "waiting for a session place", ctx.Err())
	case <-p.closing.Done():
		return guest.Fail(ErrClosed, "", nil)
	case <-timer.C:
	}
	p.stats.refused.Add(1)
	return guest.Fail(ErrSessionLimit, fmt.Sprintf("%d sessions open, the plugin's max_sessions; the new session waited %s for one to end or expire "+
		"(session_wait %s, session_idle %s): raise max_sessions in the plugin's [[plugins]] entry, or close sessions as they end",
		p.limits.MaxSessions, time.Since(since).Round(time.Millisecond), p.limits.SessionWait, p.limits.SessionIdle), nil)
}

// get takes the most recently idle instance of ctx's key, or instantiates
// one; sh is the calling core's shard (the one its slot came from), where
// pooled mode looks first. In session mode it opens the session if it is
// new, or answers *sessionsFull.
func (p *Plugin) get(ctx context.Context, sh *shard) (inst *instance, told string, err error) {
	key, reuse := p.poolKey(ctx)
	var home *shard // pooled mode's: where the instance goes back
	if p.mode == IsolationPooled {
		home = sh
		if inst, closed := home.pop(); closed {
			return nil, "", ErrClosed
		} else if inst != nil {
			return inst, "", nil
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, "", ErrClosed
	}
	evicted := p.trim()
	var ses *session // the session the instance serves: none in pooled and call modes
	switch {
	case home != nil:
		inst = p.free.find(p.free.blank) // describe's spare
	case reuse:
		earlier := earlierCalls(ctx, p.name)
		ses = p.free.of(key)
		moved := ses != nil && key != "" && earlier > ses.expect
		if moved { // its calls went on in another process: what it holds here is stale
			stale := p.free.end(ses)
			if len(stale) > 0 && len(evicted) == 0 {
				p.evicting.Add(1) // one batch with trim's: before Close waits
			}
			evicted = append(evicted, stale...)
			ses.ended = true
			ses = nil
		}
		if ses == nil {
			if p.free.open() >= p.limits.MaxSessions {
				if p.vacancy == nil {
					p.vacancy = make(chan struct{})
				}
				full := &sessionsFull{p.vacancy}
				p.mu.Unlock()
				p.evict(evicted)
				return nil, "", full
			}
			ses = p.free.opening(key)
			if ses.told = p.lost.take(key); ses.told == "" && (moved || earlier > 0) {
				ses.told = abi.ReplacedMoved
			}
		}
		ses.expect = max(ses.expect, earlier+1)
		p.free.begin(ses)
		inst = p.free.find(ses)
	}
	if inst != nil {
		if inst.ses != ses && ses != nil { // a spare: fresh to the session
			told, ses.told = ses.told, ""
		}
		p.free.take(inst)
		inst.spare = false
	} else if ses != nil {
		told, ses.told = ses.told, ""
	}
	p.mu.Unlock()
	p.evict(evicted)
	if inst == nil && home != nil {
		inst = p.shards.steal()
	}
	if inst == nil {
		if inst, err = p.instantiate(ctx); err != nil {
			if ses != nil {
				p.mu.Lock()
				if told != "" { // still to be told
					ses.told = told
				}
				p.finish(ses)
				p.mu.Unlock()
			}
			return nil, "", err
		}
		inst.reuse = reuse
	}
	inst.ses, inst.home = ses, home
	return inst, told, nil
}

// spares marks the idle instances, those describe ran on, as spares.
func (p *Plugin) spares() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free.markSpares()
}

// put gives inst back to the free list of its session, or closes it,
// without morph_destroy, in call mode and after Close; an instance whose
// session ended during its call is released (with morph_destroy).
func (p *Plugin) put(inst *instance) {
	if inst.home != nil {
		if !inst.home.push(inst) {
			inst.close()
		}
		return
	}
	p.mu.Lock()
	if p.closed || !inst.reuse {
		p.mu.Unlock()
		inst.close()
		return
	}
	var evicted []*instance
	ses := inst.ses // never nil: reuse outside pooled mode is a session's, "" included
	if ses.ended {
		evicted = []*instance{inst}
		p.evicting.Add(1) // under p.mu with the plugin open: before Close waits
	} else {
		p.free.add(ses, inst)
	}
	// The idle clock serves session mode's expiry (and describe's
	// instance, before the mode is known): a clock read costs 50-100 ns
	// here, a sixth of a small call.
	p.finish(ses)
	evicted = append(evicted, p.trim()...)
	p.mu.Unlock()
	p.evict(evicted)
}

// retire closes inst, which a call took and does not give back (it failed
// and may be poisoned, or CallDestroy destroyed it), and counts the call
// out of its session; lost says the session's state went with it, which
// the session's next fresh instance is told.
func (p *Plugin) retire(inst *instance, lost bool) {
	inst.close()
	ses := inst.ses
	if ses == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if lost && len(ses.idle) == 0 && ses.key != "" {
		ses.told = abi.ReplacedDiscarded
	}
	p.finish(ses)
}

// finish counts a call of ses out, and arms the expiry timer; p.mu is held
// and the plugin is open.
func (p *Plugin) finish(ses *session) {
	p.free.finish(ses, p.now())
	p.schedule()
}

// EndSession releases the instances of the session id, calling their
// morph_destroy (in the background, as expiry does): the session ended.
// An instance in a call is released when the call ends. It is what the
// plugin's middleware does on engine.Session.Close; a
// host that runs sessions without the engine calls it itself. A later call
// of id opens a new session. It does nothing outside session isolation.
// After Loader.Reload it ends the session in every version still open.
func (p *Plugin) EndSession(id string) {
	for _, v := range p.root.live() {
		v.endSession(id)
	}
}

// endSession is EndSession in this version.
func (p *Plugin) endSession(id string) {
	if p.mode != IsolationSession || id == "" {
		return
	}
	p.mu.Lock()
	ses := p.free.of(id)
	if p.closed || ses == nil {
		p.lost.take(id)
		p.mu.Unlock()
		return
	}
	out := p.free.end(ses)
	ses.ended = true
	p.vacate()
	if len(out) > 0 {
		p.evicting.Add(1) // under p.mu with the plugin open: before Close waits
	}
	p.mu.Unlock()
	p.evict(out)
}

// vacate wakes the new sessions waiting for a place; p.mu is held.
func (p *Plugin) vacate() {
	if p.vacancy != nil {
		close(p.vacancy)
		p.vacancy = nil
	}
}

// trim ends, in session mode, the sessions idle for Limits.SessionIdle,
// remembering them as lost (see lostSessions), and returns their instances
// for evict; p.mu is held and the plugin is open. Sessions with a call in
// flight are not in the order it walks.
func (p *Plugin) trim() []*instance {
	if p.mode != IsolationSession {
		return nil
	}
	now := p.now()
	var out []*instance
	for ses := p.free.order.head; ses != nil && now.Sub(ses.since) >= p.limits.SessionIdle; ses = p.free.order.head {
		out = append(out, p.free.end(ses)...)
		if ses.key != "" {
			p.remember(ses.key, abi.ReplacedIdle)
			p.vacate()
		}
	}
	if len(out) > 0 {
		p.evicting.Add(1) // under p.mu with the plugin open: before Close waits
	}
	return out
}

// remember remembers the session key as lost for reason (see
// lostSessions): its next call is told; p.mu is held.
func (p *Plugin) remember(key, reason string) {
	if forgot, ok := p.lost.add(key, reason, p.limits.MaxSessions); ok {
		// bounded memory, loudly: that session, if it ever calls
		// again, runs on a fresh instance untold
		p.stats.forgotten.Add(1)
		p.log.Warn("plugin forgot an expired session, past max_sessions expired since: if it calls again, its fresh instance is not told its state is gone",
			"session", forgot, "max_sessions", p.limits.MaxSessions)
	}
}

// tell tells inst, a fresh instance of session key, that the session's
// state was lost, and why: loudly (a warning, as an event of the run when
// ctx is one's, and counted in SessionStatus.Replaced) and, when the module
// exports it, through morph_instance_replaced, before the call it was
// taken for. A failure of that export that leaves the instance healthy
// (the guest reported an error) is logged and the call goes on; any other
// is the call's failure.
func (p *Plugin) tell(ctx context.Context, inst *instance, key, reason string) error {
	p.stats.replaced.Add(1)
	warning := fmt.Sprintf("plugin %q: session %q runs on a fresh instance: the one that held the plugin's state of the session is gone (%s)",
		p.name, key, reason)
	if !engine.Warn(ctx, p.name, warning) {
		p.log.WarnContext(ctx, warning, "session", key, "reason", reason)
	}
	if !p.module.Exports(abi.ExportInstanceReplaced) {
		return nil
	}
	in, _ := json.Marshal(abi.InstanceReplaced{SessionID: key, Reason: reason}) // two strings: it cannot fail
	p.shards.local().calls.Add(1)
	_, err := inst.g.Call(ctx, p.callDeadline(ctx, time.Now()), abi.ExportInstanceReplaced, in, p.limits.MaxOutputBytes)
	if err == nil {
		return nil
	}
	p.stats.faults.Add(1)
	ce := guest.AsCallError(err)
	if ce.Kind == ErrGuest {
		p.log.WarnContext(ctx, "the plugin failed to take note of its session's fresh instance; the call goes on",
			"session", key, "err", p.failure(abi.ExportInstanceReplaced, err))
		return nil
	}
	return guest.Fail(ce.Kind, abi.ExportInstanceReplaced+": "+ce.Msg, ce.Err)
}

// evict calls morph_destroy on the instances trim or EndSession removed
// and closes them, in the background, each holding an instance slot while
// its destroy runs and it closes (see Close); the plugin's closing cancels
// it.
func (p *Plugin) evict(insts []*instance) {
	if len(insts) == 0 {
		return
	}
	go func() {
		defer p.evicting.Done()
		for i, inst := range insts {
			sh := p.shards.local()
			if p.slots.take(context.Background(), sh, p.closing.Done()) != nil { // Close releases the rest
				p.mu.Lock()
				p.unevicted = append(p.unevicted, insts[i:]...)
				p.mu.Unlock()
				return
			}
			p.destroy(p.closing, []*instance{inst})
			inst.close()
			p.slots.give(sh)
		}
	}()
}

// schedule arms a timer for the expiry of the longest idle session, so
// that idle sessions expire even when no call comes; p.mu is held.
func (p *Plugin) schedule() {
	oldest := p.free.order.head
	if p.mode != IsolationSession || p.sweeper != nil || oldest == nil {
		return
	}
	d := max(oldest.since.Add(p.limits.SessionIdle).Sub(p.now()), 10*time.Millisecond)
	p.sweeper = time.AfterFunc(d, p.sweep)
}

// sweep is the timer's trim.
func (p *Plugin) sweep() {
	p.mu.Lock()
	p.sweeper = nil
	var evicted []*instance
	if !p.closed {
		evicted = p.trim()
		p.schedule()
	}
	p.mu.Unlock()
	p.evict(evicted)
}

// slots bound the instances that run at once to Limits.MaxInstances: a
// call, an eviction's morph_destroy and Close's drain each hold one. A slot
// no one holds is kept by the shard (see shards) it was given back on, or
// is free: a call takes its slot from, and gives it back to, its own core's
// shard, where a channel of tokens, its lock taken twice a call, was 18% of
// the CPU of two cores calling a small guest (BENCHMARKS.md, Pooled calls
// across cores). A take that finds none waits its turn; a give, once
// someone waits, hands the shards' slots out.
type slots struct {
	shards  *shards
	mu      sync.Mutex
	free    int             // slots no shard keeps
	waiters []chan struct{} // in arrival order: each is closed when handed a slot
	waiting atomic.Int32    // len(waiters), for give to read without s.mu
}

// take takes a slot for a call on the core of shard sh (whose give gives
// it back there), waiting for one while ctx and closing are not done; it
// returns ctx's error, or ErrClosed when closing is done.
func (s *slots) take(ctx context.Context, sh *shard, closing <-chan struct{}) (err error) {
	if sh.takeSlot() {
		return nil
	}
	s.mu.Lock()
	if len(s.waiters) == 0 {
		if s.free == 0 {
			s.free = s.shards.collect(1)
		}
		if s.free > 0 {
			s.free--
			s.mu.Unlock()
			return nil
		}
	}
	ctx, cancel := withHookDeadline(ctx)
	defer cancel()
	w := make(chan struct{})
	s.waiters = append(s.waiters, w)
	s.handOut()
	s.mu.Unlock()
	select {
	case <-w:
		return nil
	case <-closing:
		err = ErrClosed
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.waiters, w); i >= 0 {
		s.waiters = slices.Delete(s.waiters, i, i+1)
		s.waiting.Store(int32(len(s.waiters)))
	} else { // handed a slot as it gave up: it goes on
		s.free++
		s.handOut()
	}
	return err
}

// give gives back a slot take took, to the shard it took it for.
func (s *slots) give(sh *shard) {
	sh.mu.Lock()
	sh.slots++
	sh.mu.Unlock()
	if s.waiting.Load() > 0 {
		s.mu.Lock()
		s.handOut()
		s.mu.Unlock()
	}
}

// handOut frees the slots the shards keep and hands the free slots to the
// waiters in turn; s.mu is held. It sets waiting before it looks at the
// shards: a give that read waiting unset left its slot where collect finds
// it.
func (s *slots) handOut() {
	s.waiting.Store(int32(len(s.waiters)))
	s.free += s.shards.collect(math.MaxInt)
	for s.free > 0 && len(s.waiters) > 0 {
		s.free--
		close(s.waiters[0])
		s.waiters = slices.Delete(s.waiters, 0, 1)
	}
	s.waiting.Store(int32(len(s.waiters)))
}

// shards are what a plugin's calls write, one shard per P (per core), each
// with its own lock and cache lines, so that calls on different cores
// share no lock and no written cache line: pooled mode's idle instances
// (one stack a shard), the slots (see slots) and the calls counter. Under
// one lock, the free list was 39% of the CPU of two cores calling a small
// guest, most of it spinning (BENCHMARKS.md, Pooled calls across cores). A
// call finds its P's shard once (local) and gives its instance and slot
// back there. A pooled call whose shard has no idle instance takes
// describe's from p.free, else one from another shard, else instantiates.
type shards struct {
	all  []*shard
	hint sync.Pool // *shard: a P's (a sync.Pool's per-P cache is the runtime's only public per-P state)
	next atomic.Uint32
}

// shard is one core's share, padded so that no two shards share a cache
// line (nor the adjacent line the CPU prefetches).
type shard struct {
	shardState
	_ [128 - unsafe.Sizeof(shardState{})%128]byte
}

// shardState is a shard's content.
type shardState struct {
	mu     sync.Mutex
	idle   []*instance // pooled mode's idle instances, the most recently idle last
	slots  int         // instance slots it keeps (see slots)
	closed bool        // the plugin closed: push refuses
	calls  atomic.Uint64
	users  atomic.Int64 // calls that entered this version on this shard and have not left (see reload.go)
}

// init makes one shard per P, and gives each P a shard in turn.
func (s *shards) init() {
	s.all = make([]*shard, runtime.GOMAXPROCS(0))
	for i := range s.all {
		s.all[i] = new(shard)
	}
	s.hint.New = func() any { return s.all[int(s.next.Add(1))%len(s.all)] }
}

// local is the shard of the calling goroutine's P.
func (s *shards) local() *shard {
	sh := s.hint.Get().(*shard)
	s.hint.Put(sh)
	return sh
}

// calls is the calls counted on the shards.
func (s *shards) calls() uint64 {
	var n uint64
	for _, sh := range s.all {
		n += sh.calls.Load()
	}
	return n
}

// collect takes up to n of the slots the shards keep, and returns how many.
func (s *shards) collect(n int) int {
	got := 0
	s.each(func(sh *shard) bool {
		k := min(sh.slots, n-got)
		sh.slots -= k
		got += k
		return got < n
	}, s.all...)
	return got
}

// takeSlot takes one of the slots the shard keeps, false if it keeps none.
func (sh *shard) takeSlot() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.slots == 0 {
		return false
	}
	sh.slots--
	return true
}

// steal takes an idle instance from any shard, nil if none has one.
func (s *shards) steal() *instance {
	var inst *instance
	s.each(func(sh *shard) bool { inst = sh.top(true); return inst == nil }, s.all...)
	return inst
}

// pop takes the shard's most recently idle instance, nil if it has none;
// closed is true once the plugin closed.
func (sh *shard) pop() (inst *instance, closed bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.top(true), sh.closed
}

// top is the shard's most recently idle instance, taken if take; sh.mu is
// held.
func (sh *shard) top(take bool) *instance {
	n := len(sh.idle)
	if n == 0 {
		return nil
	}
	inst := sh.idle[n-1]
	if take {
		sh.idle[n-1] = nil
		sh.idle = sh.idle[:n-1]
	}
	return inst
}

// push makes inst the shard's most recently idle instance; it is false,
// and inst not kept, once the plugin closed.
func (sh *shard) push(inst *instance) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed {
		return false
	}
	sh.idle = append(sh.idle, inst)
	return true
}

// lastMemory is the linear memory of the local shard's most recently idle
// instance, else of another shard's, read under its shard's lock (a call
// may take the instance the moment it is released); ok is false when no
// shard has one.
func (s *shards) lastMemory() (bytes uint32, ok bool) {
	visit := func(sh *shard) bool {
		if last := sh.top(false); last != nil {
			bytes, ok = last.g.MemoryBytes(), true
		}
		return !ok
	}
	if s.each(visit, s.local()) {
		s.each(visit, s.all...)
	}
	return bytes, ok
}

// instances is every idle instance, in a new slice.
func (s *shards) instances() []*instance {
	var out []*instance
	s.each(func(sh *shard) bool { out = append(out, sh.idle...); return true }, s.all...)
	return out
}

// close empties every shard, closes it to push, and returns what it held.
func (s *shards) close() []*instance {
	var out []*instance
	s.each(func(sh *shard) bool {
		out = append(out, sh.idle...)
		sh.idle, sh.closed = nil, true
		return true
	}, s.all...)
	return out
}

// each calls visit on each of shs under its lock until visit returns
// false, and reports whether it went through them all.
func (s *shards) each(visit func(*shard) bool, shs ...*shard) bool {
	for _, sh := range shs {
		sh.mu.Lock()
		more := visit(sh)
		sh.mu.Unlock()
		if !more {
			return false
		}
	}
	return true
}
