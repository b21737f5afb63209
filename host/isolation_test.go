package host

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// counterEngine loads counter.wat with cfg and returns an engine whose
// prompt builder it is. A turn's rc.SystemPrompt is "calls: N", N counting
// the build_prompt calls of the instance that served it.
func counterEngine(t *testing.T, cfg Config) (*Plugin, *engine.Engine) {
	t.Helper()
	cfg.Path = fixture(t, "counter")
	p := load(t, newLoader(t), cfg)
	return p, engine.New(finalModel{}, nil, engine.WithExtenders(p.Extender(engine.MiddlewareConfig{})))
}

// turn runs one turn of s and returns its system prompt.
func turn(t *testing.T, s *engine.Session) string {
	t.Helper()
	final, rc, err := s.RunTurn(context.Background(), "t", engine.RunOptions{})
	if err != nil || final == nil {
		t.Fatalf("turn of %s: final %+v err %v", s.ID(), final, err)
	}
	return rc.SystemPrompt
}

// expect checks the prompts of a sequence of turns: session name, then the
// wanted "calls: N".
func expect(t *testing.T, e *engine.Engine, steps ...string) {
	t.Helper()
	sessions := map[string]*engine.Session{}
	for i := 0; i < len(steps); i += 2 {
		s := sessions[steps[i]]
		if s == nil {
			s = e.NewSession(steps[i])
			sessions[steps[i]] = s
		}
		if got := turn(t, s); got != steps[i+1] {
			t.Fatalf("step %d, session %s: prompt %q, want %q", i/2+1, steps[i], got, steps[i+1])
		}
	}
}

func TestIsolationModes(t *testing.T) {
	t.Run("pooled", func(t *testing.T) {
		p, e := counterEngine(t, Config{Isolation: IsolationPooled})
		expect(t, e, "a", "calls: 1", "b", "calls: 2", "a", "calls: 3")
		if st := p.Stats(); st.Instantiated != 1 {
			t.Fatalf("stats %+v, want one instance", st)
		}
	})
	t.Run("session", func(t *testing.T) {
		p, e := counterEngine(t, Config{Isolation: IsolationSession})
		expect(t, e, "a", "calls: 1", "b", "calls: 1", "a", "calls: 2", "c", "calls: 1", "b", "calls: 2")
		// Outside a run: the shared session "" (describe's instance went to a).
		for _, want := range []string{"calls: 1", "calls: 2"} {
			out, err := invoke[abi.PromptOutput](context.Background(), p, abi.ExportBuildPrompt, abi.PromptInput{})
			if err != nil || out.SystemPrompt != want {
				t.Fatalf("call outside a run: %+v, %v; want %q", out, err, want)
			}
		}
		if st := p.Stats(); st.Instantiated != 4 || st.Discarded != 0 {
			t.Fatalf("stats %+v, want 4 instances: a (describe's), b, c, \"\"", st)
		}
	})
	t.Run("call", func(t *testing.T) {
		p, e := counterEngine(t, Config{Isolation: IsolationCall})
		expect(t, e, "a", "calls: 1", "a", "calls: 1", "b", "calls: 1")
		if st := p.Stats(); st.Instantiated != 4 || st.Discarded != 0 {
			t.Fatalf("stats %+v, want 4 instances (describe and 3 calls), none discarded", st)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.free.n != 0 {
			t.Fatalf("%d idle instances kept in call mode", p.free.n)
		}
	})
}

// fakeClock is a settable clock for Plugin.now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// installClock gives p a fakeClock, at the present, and returns it.
func installClock(p *Plugin) *fakeClock {
	clock := &fakeClock{t: time.Now()}
	p.mu.Lock()
	p.now = clock.now
	p.mu.Unlock()
	return clock
}

func TestIsolationSessionEviction(t *testing.T) {
	t.Run("idle ttl", func(t *testing.T) {
		p, e := counterEngine(t, Config{Isolation: IsolationSession, Limits: Limits{SessionIdle: time.Minute}})
		clock := installClock(p)
		a := e.NewSession("a")
		turn(t, a)
		clock.add(59 * time.Second)
		if got := turn(t, a); got != "calls: 2" {
			t.Fatalf("within the ttl: %q", got)
		}
		before := p.Stats()
		clock.add(61 * time.Second)
		if got := turn(t, a); got != "calls: 1" {
			t.Fatalf("after the ttl: %q, want a fresh instance", got)
		}
		p.evicting.Wait()
		// One build_prompt, and morph_destroy on the expired instance; the
		// session went on after it lost its instance: replaced, loudly.
		st := p.Stats()
		checkCount(t, "Calls made since", st.Calls-before.Calls, 2)
		checkCount(t, "Faults", st.Faults, 0)
		checkCount(t, "Instantiated since", st.Instantiated-before.Instantiated, 1)
		checkCount(t, "Replaced", st.Replaced, 1)
	})
	t.Run("idle ttl without calls", func(t *testing.T) {
		p, e := counterEngine(t, Config{Isolation: IsolationSession, Limits: Limits{SessionIdle: 20 * time.Millisecond}})
		turn(t, e.NewSession("a"))
		deadline := time.Now().Add(5 * time.Second)
		for {
			p.mu.Lock()
			n := p.free.n
			p.mu.Unlock()
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d idle instances still kept after the ttl", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

func TestIsolationConfig(t *testing.T) {
	l := newLoader(t)
	_, err := l.Load(context.Background(), Config{Name: "ctr", Path: fixture(t, "counter"), Isolation: "shared"})
	checkErr(t, "Load", err, ErrLoad, "ctr", `isolation "shared"`, "pooled, session, call")
	cases := []struct {
		fixture, isolation, want string
	}{
		{"minimal", "", IsolationPooled},
		{"counter", "", IsolationPooled},
		{"mw_observe", "", IsolationSession},
		{"mw_observe", IsolationPooled, IsolationPooled},
		{"minimal", IsolationCall, IsolationCall},
	}
	for _, c := range cases {
		p := load(t, l, Config{Path: fixture(t, c.fixture), Isolation: c.isolation})
		if got := p.Isolation(); got != c.want {
			t.Errorf("%s with isolation %q: mode %q, want %q", c.fixture, c.isolation, got, c.want)
		}
	}
	// A middleware plugin whose middleware hooks are all disabled is pooled.
	if p := load(t, l, Config{Path: fixture(t, "mw_observe"), Hooks: []string{}}); p.Isolation() != IsolationPooled {
		t.Errorf("mw_observe with no hook enabled: mode %q", p.Isolation())
	}
}

// BenchmarkIsolation is build_prompt on counter.wat with a 1 KB input in each
// mode, from inside a run of one session: pooled and session reuse a warm
// instance, call instantiates one per call.
func BenchmarkIsolation(b *testing.B) {
	// A context as the engine passes to hooks: it carries the run's session.
	var runCtx context.Context
	capture := engine.WithHook(abi.HookBuildPrompt, func(ctx context.Context, _ any) (any, error) {
		runCtx = ctx
		return &abi.PromptOutput{SystemPrompt: "x"}, nil
	})
	if _, _, err := engine.New(finalModel{}, nil, capture).NewSession("bench").RunTurn(context.Background(), "t", engine.RunOptions{}); err != nil || engine.RunContext(runCtx) == nil {
		b.Fatalf("no run context: %v", err)
	}
	in := jsonPayload(1 << 10)
	for _, mode := range IsolationModes() {
		b.Run(mode, func(b *testing.B) {
			p := load(b, newLoader(b), Config{Path: fixture(b, "counter"), Isolation: mode})
			b.ReportAllocs()
			for b.Loop() {
				if out, err := p.Call(runCtx, abi.ExportBuildPrompt, in); err != nil || len(out) == 0 {
					b.Fatalf("%q, %v", out, err)
				}
			}
		})
	}
}

// No mode lets a write leak into another instance: a fresh instance finds
// zeros where an earlier one wrote (in a data page, a page no data segment
// touches, a page it grew), however its memory was set up (package memory:
// mapped, trimmed of zero pages, started from a snapshot's image or not).
// Within a session, the write is still there. The same for an Extism
// plugin (extism_leak), whose state also has a global and a var, kept by
// its kernel outside its memory.
func TestIsolationNoLeak(t *testing.T) {
	for _, lc := range loaders {
		for _, noSnapshot := range []bool{false, true} {
			t.Run(lc.name+"/"+map[bool]string{false: "snapshot", true: "no snapshot"}[noSnapshot], func(t *testing.T) {
				isolationNoLeak(t, map[string]string{LoaderNative: "leak", LoaderExtism: "extism_leak"}[lc.name], noSnapshot)
			})
		}
	}
}

// isolationNoLeak is TestIsolationNoLeak's case: the fixture name, in every
// isolation mode, its snapshot on or off.
func isolationNoLeak(t *testing.T, name string, noSnapshot bool) {
	leakPlugin := func(t *testing.T, cfg Config) *Plugin {
		cfg.Path, cfg.NoSnapshot = fixture(t, name), noSnapshot
		p := load(t, newLoader(t), cfg)
		if st := p.Memory(); (st.Image == 0) != noSnapshot {
			t.Fatalf("memory %+v: want an image exactly when snapshots are on (no_snapshot %v)", st, noSnapshot)
		}
		return p
	}
	leakEngine := func(t *testing.T, cfg Config) *engine.Engine {
		return engine.New(finalModel{}, nil, leakPlugin(t, cfg).hookOptions()...)
	}
	t.Run("session", func(t *testing.T) {
		p := leakPlugin(t, Config{Isolation: IsolationSession})
		e := engine.New(finalModel{}, nil, engine.WithExtenders(p.Extender(engine.MiddlewareConfig{})))
		// Each session is closed, and its instance released, before the
		// next opens: the later sessions' instances may reuse the
		// addresses of the earlier ones' memories.
		for _, steps := range [][]string{{"a", "seen 0", "a", "seen 1"}, {"b", "seen 0"}, {"c", "seen 0"}, {"a", "seen 0", "a", "seen 1"}} {
			s := e.NewSession(steps[0])
			for i := 0; i < len(steps); i += 2 {
				if got := turn(t, s); got != steps[i+1] {
					t.Fatalf("session %s, turn %d: %q, want %q", steps[0], i/2+1, got, steps[i+1])
				}
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			p.evicting.Wait()
		}
	})
	t.Run("call", func(t *testing.T) {
		expect(t, leakEngine(t, Config{Isolation: IsolationCall}), "a", "seen 0", "a", "seen 0", "b", "seen 0")
	})
	t.Run("pooled", func(t *testing.T) { // one instance: the write is seen, as documented
		expect(t, leakEngine(t, Config{Isolation: IsolationPooled}), "a", "seen 0", "b", "seen 1")
	})
}
