package host

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// The promise of session isolation (Config.Isolation, SPEC.md 10.6): an
// instance belongs to its session until the session ends or expires, at
// any concurrency; the limit on open sessions refuses new ones and takes
// no open session's instance; a session that loses its instance and goes
// on is told, loudly. The fixture is mw_counter.wat: its before_run answers
// the system prompt "calls: N", N counting its instance's calls, plus 1000
// once it is told it replaces a lost one.

const destroyedLine = "mw_counter: instance destroyed"

// counterSessions loads mw_counter.wat with limits, and returns it, an
// engine it is a plugin of (with opts), and the log its plugins write.
func counterSessions(t *testing.T, limits Limits, opts ...engine.Option) (*Plugin, *engine.Engine, *syncBuffer) {
	t.Helper()
	l, logs := newLoggedLoader(t)
	p := load(t, l, Config{Path: fixture(t, "mw_counter"), Limits: limits})
	if p.Isolation() != IsolationSession {
		t.Fatalf("mw_counter's isolation is %q, want the default of a middleware plugin, session", p.Isolation())
	}
	opts = append(opts, engine.WithExtenders(p.Extender(engine.MiddlewareConfig{})))
	return p, engine.New(finalModel{}, nil, opts...), logs
}

// sessionsOf is p's SessionStatus.
func sessionsOf(t *testing.T, p *Plugin) SessionStatus {
	t.Helper()
	st, ok := p.Sessions()
	if !ok {
		t.Fatalf("plugin in isolation %q has no session status", p.Isolation())
	}
	return st
}

// TestSessionsOwnTheirInstances is issue 24's measurement, which found 562
// of 600 sessions with their instance replaced mid-conversation: 2,000
// sessions open at once, each running several turns, interleaved with all
// the others' on several goroutines, each turn in a new order; every
// session counts 1, 2, 3 on an instance of its own. Closing them releases
// every instance, each with morph_destroy.
func TestSessionsOwnTheirInstances(t *testing.T) {
	const sessions, workers = 2000, 8
	p, e, logs := counterSessions(t, Limits{})
	all := make([]*engine.Session, sessions)
	for i := range all {
		all[i] = e.NewSession(fmt.Sprintf("s%d", i))
	}
	var failed atomic.Int32
	for round, step := range []int{1, 7, 13} { // coprime with 2,000: each round visits every session once, in another order
		want := fmt.Sprintf("calls: %d", round+1)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := int(next.Add(1) - 1); k < sessions && failed.Load() < 10; k = int(next.Add(1) - 1) {
					s := all[k*step%sessions]
					final, rc, err := s.RunTurn(context.Background(), "t", engine.RunOptions{})
					switch {
					case err != nil:
						failed.Add(1)
						t.Errorf("turn %d of %s: %v", round+1, s.ID(), err)
					case final == nil:
						failed.Add(1)
						t.Errorf("turn %d of %s: no final answer", round+1, s.ID())
					case rc.SystemPrompt != want:
						failed.Add(1)
						t.Errorf("turn %d of %s: system prompt %q, want %q", round+1, s.ID(), rc.SystemPrompt, want)
					}
				}
			}()
		}
		wg.Wait()
		if failed.Load() > 0 {
			t.FailNow()
		}
	}
	// One instance a session (the first took describe's), none replaced.
	st := p.Stats()
	checkCount(t, "Instantiated (one per session)", st.Instantiated, sessions)
	checkCount(t, "Discarded", st.Discarded, 0)
	checkCount(t, "Replaced", st.Replaced, 0)
	checkCount(t, "Refused", st.Refused, 0)
	checkCount(t, "open sessions", sessionsOf(t, p).Open, sessions)
	checkCount(t, "idle instances (one a session)", p.Memory().Instances, sessions)
	for _, s := range all {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	p.evicting.Wait()
	if ss := sessionsOf(t, p); ss.Open != 0 || p.Memory().Instances != 0 {
		t.Fatalf("after closing every session: %+v, %d idle instances; want none", ss, p.Memory().Instances)
	}
	if got := len(linesWith(logs.String(), destroyedLine)); got != sessions {
		t.Fatalf("%d instances destroyed, want %d: one per closed session", got, sessions)
	}
}

// beforeRun is mw_counter's answer to a call of session ctxs[i]: its
// system prompt.
func beforeRun(ctx context.Context, p *Plugin) (string, error) {
	out, err := invoke[abi.BeforeRunOutput](ctx, p, abi.ExportBeforeRun, abi.BeforeRunInput{SessionID: engine.RunContext(ctx).SessionID, Turn: 1})
	return out.SystemPrompt, err
}

// waitFor polls cond until it holds, failing t after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
	}
}

// waiting says whether a new session waits for a place in p.
func waiting(p *Plugin) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.vacancy != nil
}

// TestSessionLimitIsAdmission: past MaxSessions, a new session waits for
// one to end, for SessionWait at most, then is refused with ErrSessionLimit
// naming the plugin and the key to raise; the open sessions keep their
// instances throughout.
func TestSessionLimitIsAdmission(t *testing.T) {
	ctxs := sessionContexts(t, 4)
	expect := func(p *Plugin, i int, want string) {
		t.Helper()
		if got, err := beforeRun(ctxs[i], p); err != nil || got != want {
			t.Fatalf("session s%d: %q, %v; want %q", i, got, err, want)
		}
	}
	t.Run("refused", func(t *testing.T) {
		p, _, _ := counterSessions(t, Limits{MaxSessions: 2, SessionWait: 50 * time.Millisecond})
		expect(p, 0, "calls: 1")
		expect(p, 1, "calls: 1")
		_, err := beforeRun(ctxs[2], p)
		checkPluginErr(t, "a third session", err, ErrSessionLimit, "mw-counter", "max_sessions")
		checkCount(t, "Refused", p.Stats().Refused, 1)
		checkCount(t, "Sessions' Refused", sessionsOf(t, p).Refused, 1)
		expect(p, 0, "calls: 2") // the open sessions' instances are theirs still
		expect(p, 1, "calls: 2")
	})
	t.Run("canceled while waiting", func(t *testing.T) {
		p, _, _ := counterSessions(t, Limits{MaxSessions: 1, SessionWait: time.Minute})
		expect(p, 0, "calls: 1")
		ctx, cancel := context.WithCancel(ctxs[1])
		done := make(chan error, 1)
		go func() { _, err := beforeRun(ctx, p); done <- err }()
		waitFor(t, "the new session to wait", func() bool { return waiting(p) })
		cancel()
		if err := <-done; !errors.Is(err, ErrCanceled) {
			t.Fatalf("a new session whose caller gave up: %v, want ErrCanceled", err)
		}
	})
	t.Run("admitted when one ends", func(t *testing.T) {
		p, _, logs := counterSessions(t, Limits{MaxSessions: 2, SessionWait: time.Minute})
		expect(p, 0, "calls: 1")
		expect(p, 1, "calls: 1")
		done := make(chan error, 1)
		go func() {
			got, err := beforeRun(ctxs[2], p)
			if err == nil && got != "calls: 1" {
				err = fmt.Errorf("prompt %q, want a fresh instance's", got)
			}
			done <- err
		}()
		waitFor(t, "the new session to wait", func() bool { return waiting(p) })
		p.EndSession("s0")
		if err := <-done; err != nil {
			t.Fatalf("the waiting session, once s0 ended: %v", err)
		}
		expect(p, 1, "calls: 2")
		p.evicting.Wait()
		st := p.Stats()
		checkCount(t, "Refused", st.Refused, 0)
		checkCount(t, "Replaced", st.Replaced, 0)
		if n := len(linesWith(logs.String(), destroyedLine)); n != 1 {
			t.Errorf("%d instances destroyed, want s0's; log:\n%s", n, logs.String())
		}
	})
}

// TestSessionEndReleases: closing an engine session releases its instance
// (morph_destroy, then it is gone from the plugin's memory and sessions);
// the others go on. Engine.Run closes the session it makes.
func TestSessionEndReleases(t *testing.T) {
	p, e, logs := counterSessions(t, Limits{})
	a, b := e.NewSession("a"), e.NewSession("b")
	turn(t, a)
	if got := turn(t, a); got != "calls: 2" {
		t.Fatalf("a's second turn: %q", got)
	}
	turn(t, b)
	if ss := sessionsOf(t, p); ss.Open != 2 || p.Memory().Instances != 2 {
		t.Fatalf("%+v, %d idle instances; want 2 of each", ss, p.Memory().Instances)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.evicting.Wait()
	checkCount(t, "after closing a: open sessions", sessionsOf(t, p).Open, 1)
	checkCount(t, "after closing a: idle instances", p.Memory().Instances, 1)
	if n := len(linesWith(logs.String(), destroyedLine)); n != 1 {
		t.Errorf("after closing a: %d instances destroyed, want a's; log:\n%s", n, logs.String())
	}
	if _, _, err := a.RunTurn(context.Background(), "t", engine.RunOptions{}); !errors.Is(err, engine.ErrSessionClosed) {
		t.Fatalf("a turn of a closed session: %v", err)
	}
	if got := turn(t, b); got != "calls: 2" {
		t.Fatalf("b after a closed: %q", got)
	}
	// The same id again is a new session: a fresh instance, with nothing to tell.
	if got := turn(t, e.NewSession("a")); got != "calls: 1" {
		t.Fatalf("a new session a: %q", got)
	}
	if _, _, err := e.Run(context.Background(), "t", engine.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	p.evicting.Wait()
	ss := sessionsOf(t, p)
	checkCount(t, "after a Run: open sessions (its own closed)", ss.Open, 2)
	checkCount(t, "after a Run: Replaced", ss.Replaced, 0)
	if n := len(linesWith(logs.String(), destroyedLine)); n != 2 {
		t.Errorf("after a Run: %d instances destroyed, want a's and the Run's; log:\n%s", n, logs.String())
	}
}

// TestSessionExpiryIsLoud: a session that calls again after it expired
// (no call for SessionIdle) runs on a fresh instance, and everyone hears of
// it: the plugin first (morph_instance_replaced: mw_counter's count jumps
// by 1000), the run's observers (a warning event naming the plugin), the
// operator (Stats.Replaced, SessionStatus.Replaced).
func TestSessionExpiryIsLoud(t *testing.T) {
	var mu sync.Mutex
	var warnings []engine.Event
	p, e, logs := counterSessions(t, Limits{SessionIdle: time.Minute}, engine.WithEventHandler(func(ev engine.Event) {
		if ev.Kind == engine.EventWarning {
			mu.Lock()
			warnings = append(warnings, ev)
			mu.Unlock()
		}
	}))
	clock := installClock(p)
	a := e.NewSession("a")
	turn(t, a)
	clock.add(59 * time.Second)
	if got := turn(t, a); got != "calls: 2" {
		t.Fatalf("within session_idle: %q", got)
	}
	clock.add(61 * time.Second)
	if got := turn(t, a); got != "calls: 1001" {
		t.Fatalf("after session_idle: %q, want a fresh instance told it replaces a lost one", got)
	}
	if got := turn(t, a); got != "calls: 1002" {
		t.Fatalf("the turn after: %q, want the fresh instance kept", got)
	}
	p.evicting.Wait()
	st := p.Stats()
	checkCount(t, "Replaced", st.Replaced, 1)
	checkCount(t, "Sessions' Replaced", sessionsOf(t, p).Replaced, 1)
	checkCount(t, "Faults", st.Faults, 0)
	if got := len(linesWith(logs.String(), destroyedLine)); got != 1 {
		t.Fatalf("%d instances destroyed, want the expired one", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 1 {
		t.Fatalf("warnings %+v, want one", warnings)
	}
	w := warnings[0]
	if w.Plugin != "mw-counter" {
		t.Errorf("the warning's Plugin = %q, want mw-counter", w.Plugin)
	}
	if w.SessionID != "a" {
		t.Errorf("the warning's SessionID = %q, want a", w.SessionID)
	}
	for _, want := range []string{"fresh instance", abi.ReplacedIdle} {
		if !strings.Contains(w.Message, want) {
			t.Errorf("the warning's Message = %q, want it to say %q", w.Message, want)
		}
	}
}

// A session whose instance was discarded after a fault goes on, on a fresh
// instance, told so (reason "discarded"), and counted.
func TestSessionDiscardIsLoud(t *testing.T) {
	p, _, _ := counterSessions(t, Limits{})
	ctx := sessionContexts(t, 1)[0]
	if got, err := beforeRun(ctx, p); err != nil || got != "calls: 1" {
		t.Fatalf("%q, %v", got, err)
	}
	// What CallFunc does with an instance a call left poisoned.
	inst, told, err := p.acquire(ctx, p.shards.local())
	if err != nil || told != "" {
		t.Fatalf("acquire: %v, told %q", err, told)
	}
	p.slots.give(p.shards.local())
	p.retire(inst, true)
	if got, err := beforeRun(ctx, p); err != nil || got != "calls: 1001" {
		t.Fatalf("after the discard: %q, %v; want a fresh instance told it replaces a lost one", got, err)
	}
	if st := p.Stats(); st.Replaced != 1 {
		t.Fatalf("stats %+v, want the replacement counted", st)
	}
}

// A session that made calls of the plugin in another process (a Temporal
// worker's, WithSessionCalls counting them) and has no instance here runs
// on a fresh one, told so once (abi.ReplacedMoved: mw_counter's count jumps
// by 1000), warned of and counted; a session whose earlier calls were of
// another plugin, or one served here already, is not told. A session that
// comes back with more calls than were served here went on elsewhere: its
// instance here is stale, released (morph_destroy), and the call runs on a
// fresh one, told.
func TestSessionMovedIsTold(t *testing.T) {
	p, _, logs := counterSessions(t, Limits{})
	ctx := context.Background()
	of := func(id string, calls map[string]int) context.Context {
		return WithSessionCalls(engine.WithSession(ctx, id, 2), calls)
	}
	for i, c := range []struct {
		ctx  context.Context
		want string
	}{
		{of("other", map[string]int{"another-plugin": 3}), "calls: 1"},
		{of("moved", map[string]int{p.Name(): 2}), "calls: 1001"},
		{of("moved", map[string]int{p.Name(): 3}), "calls: 1002"},
		{of("other", map[string]int{p.Name(): 1, "another-plugin": 3}), "calls: 2"},
		{of("moved", map[string]int{p.Name(): 4}), "calls: 1003"}, // the next call: nothing served elsewhere
		{of("moved", map[string]int{p.Name(): 6}), "calls: 1001"}, // calls 4 and 5 were served elsewhere
		{of("moved", map[string]int{p.Name(): 7}), "calls: 1002"},
	} {
		if got, err := beforeRun(c.ctx, p); err != nil || got != c.want {
			t.Errorf("call %d: %q, %v; want %q", i+1, got, err, c.want)
		}
	}
	if st := sessionsOf(t, p); st.Replaced != 2 || st.Open != 2 {
		t.Errorf("sessions %+v; want 2 open, 2 replaced", st)
	}
	if n := strings.Count(logs.String(), `reason=moved`); n != 2 {
		t.Errorf("%d warnings of a moved session, want 2:\n%s", n, logs.String())
	}
	waitFor(t, "the stale instance's morph_destroy", func() bool { return strings.Count(logs.String(), destroyedLine) == 1 })
}

// The counts WithSessionCalls carries come from outside the process (a
// Temporal workflow's input, CallSession.Calls), so they may be forged: a
// nil map, a negative count, math.MaxInt (one past it must not overflow),
// math.MinInt, 100,000 counts of plugins that do not exist. None panics;
// the session they come with is told at most once that it moved (the first
// count past what was served here), keeps its instance after, and no other
// session loses its instance.
func TestSessionForgedCalls(t *testing.T) {
	p, _, _ := counterSessions(t, Limits{})
	ctx := context.Background()
	of := func(id string, calls map[string]int) context.Context {
		return WithSessionCalls(engine.WithSession(ctx, id, 2), calls)
	}
	many := make(map[string]int, 100_000)
	for i := range 100_000 {
		many[fmt.Sprintf("plugin-%d", i)] = math.MaxInt - i
	}
	for i, c := range []struct {
		ctx  context.Context
		want string
	}{
		{of("victim", nil), "calls: 1"},
		{of("forged", nil), "calls: 1"},
		{of("forged", map[string]int{p.Name(): -5}), "calls: 2"},
		{of("forged", many), "calls: 3"},
		{of("forged", map[string]int{p.Name(): math.MaxInt}), "calls: 1001"}, // moved: the count is past the 3 served here
		{of("forged", map[string]int{p.Name(): math.MaxInt}), "calls: 1002"}, // the same count again: not moved
		{of("forged", map[string]int{p.Name(): math.MinInt}), "calls: 1003"},
		{of("forged", map[string]int{p.Name(): math.MaxInt - 1}), "calls: 1004"},
		{of("victim", map[string]int{"another-plugin": math.MaxInt}), "calls: 2"},
	} {
		if got, err := beforeRun(c.ctx, p); err != nil || got != c.want {
			t.Errorf("call %d: %q, %v; want %q", i+1, got, err, c.want)
		}
	}
	if st := sessionsOf(t, p); st.Replaced != 1 || st.Open != 2 {
		t.Errorf("sessions %+v; want 2 open, 1 replaced", st)
	}
}
