package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// sessionGuests are the guests of the session benchmarks (issue 16): the
// WAT middleware fixture, the Rust example, and the Go example in both its
// builds. Each implements on_turn_start, a middleware hook, which is what
// puts a plugin in session isolation by default. steps are the live
// sessions at which the resident memory is read: standard Go's instances
// are some 5 MiB each, so its ramp stops at 200 on a machine others share.
var sessionGuests = []struct {
	name  string
	wasm  func(testing.TB) string
	steps []int
}{
	{"wat-middleware", func(b testing.TB) string { return fixture(b, "mw_observe") }, []int{10, 100, 1000}},
	{"rust-hooks", rustHooksWasm, []int{10, 100, 1000}},
	{"go-hooks-tinygo", goHooksTinyGo.wasm, []int{10, 100, 1000}},
	{"go-hooks", goHooksStd.wasm, []int{10, 50, 200}},
}

// turnStart is an on_turn_start input of about n bytes.
func turnStart(n int) []byte {
	in, err := json.Marshal(abi.TurnStart{SessionID: "s", Turn: 1, Input: string(bytes.Repeat([]byte("x"), n-40))})
	if err != nil {
		panic(err)
	}
	return in
}

// sessionContexts returns n contexts as the engine gives hooks, one per
// session ("s0", "s1", ...): a call on one draws from that session's
// instances.
func sessionContexts(tb testing.TB, n int) []context.Context {
	var ctxs []context.Context
	capture := engine.WithHook(abi.HookBuildPrompt, func(ctx context.Context, _ any) (any, error) {
		ctxs = append(ctxs, ctx)
		return &abi.PromptOutput{SystemPrompt: "x"}, nil
	})
	e := engine.New(finalModel{}, nil, capture)
	for i := range n {
		if _, _, err := e.NewSession("s"+strconv.Itoa(i)).RunTurn(context.Background(), "t", engine.RunOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	return ctxs
}

// residentBytes is the process's resident set after two garbage
// collections and returning the freed heap to the system
// (debug.FreeOSMemory), so that what it counts is what is live: Go's heap
// in use, the linear memories' touched pages, wazero's own mappings. It is
// smaps_rollup's Pss, not its Rss: Rss counts a page once for each mapping
// of it, and a snapshot's image (package memory) is mapped once per
// instance; Pss counts each page once, which for a process alone is what it
// holds.
func residentBytes(tb testing.TB) uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/smaps_rollup")
	if err != nil {
		tb.Skipf("no resident set to read: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		var kb uint64
		if n, _ := fmt.Sscanf(s.Text(), "Pss: %d kB", &kb); n == 1 {
			return kb << 10
		}
	}
	tb.Fatalf("no Pss in /proc/self/smaps_rollup: %v", s.Err())
	return 0
}

// heapBytes is Go's heap in use after a collection: the part of
// residentBytes that is Go's bookkeeping (morph's and wazero's), not the
// linear memories, which live outside the heap (package memory).
func heapBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkSessions reproduces issue 16's table for each guest, in session
// isolation with two 1 KB on_turn_start calls per session:
//
//   - resident: the memory a live, idle session costs. The sessions' run
//     contexts are made first; then sessions are opened (two calls each,
//     their instances kept idle) up to each of the guest's steps, and the
//     process's resident set read at each (residentBytes: after GC, the
//     freed heap given back). KiB/session is the slope between the first and
//     the last step, so that what the process holds anyway (the runtime, the
//     compiled module, the contexts) cancels out; heap-KiB/session is the
//     same slope of Go's heap in use, the part of it that is Go-side
//     bookkeeping. The plugin and its sessions stay alive, in this
//     process, throughout. Every step is logged (-v) to check the slope is
//     a line.
//   - new-instance: a new instance as a session's first call pays it
//     (benchNewInstance), from the plugin's snapshot; new-instance-nosnapshot
//     the same with snapshot = false: instantiate + _initialize.
//   - call-isolation: a 1 KB on_turn_start in isolation "call": a fresh
//     instance per call.
//
// Times on a shared machine drift; the resident figures do not (they are
// counts of pages), and are the ones to compare across runs.
func BenchmarkSessions(b *testing.B) {
	in := turnStart(1 << 10)
	export := abi.MiddlewareExports["on_turn_start"]
	for _, g := range sessionGuests {
		b.Run(g.name, func(b *testing.B) {
			path := g.wasm(b)
			b.Run("resident", func(b *testing.B) {
				last := g.steps[len(g.steps)-1]
				ctxs := sessionContexts(b, last)
				for b.Loop() {
					perSession, perSessionHeap := sessionSlope(b, path, ctxs, g.steps, in, export)
					b.ReportMetric(perSession/1024, "KiB/session")
					b.ReportMetric(perSessionHeap/1024, "heap-KiB/session")
					b.ReportMetric(float64(1<<30)/perSession, "sessions/GiB")
				}
			})
			for _, off := range []bool{false, true} {
				name := map[bool]string{false: "new-instance", true: "new-instance-nosnapshot"}[off]
				b.Run(name, func(b *testing.B) {
					benchNewInstance(b, Config{Path: path, Isolation: IsolationSession, NoSnapshot: off})
				})
			}
			b.Run("call-isolation", func(b *testing.B) {
				p := load(b, newLoader(b), Config{Path: path, Isolation: IsolationCall})
				ctx := sessionContexts(b, 1)[0]
				for b.Loop() {
					if _, err := p.Call(ctx, export, in); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// benchNewInstance times a new instance of the plugin cfg loads, as a
// session's first call makes it: instantiation, and _initialize or the
// start from its snapshot. Closing the instances is not timed.
func benchNewInstance(b *testing.B, cfg Config) {
	p := load(b, newLoader(b), cfg)
	ctx := context.Background()
	var live []*instance
	closeAll := func() {
		for _, inst := range live {
			inst.close()
		}
		live = live[:0]
	}
	defer closeAll()
	for b.Loop() {
		inst, err := p.instantiate(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if live = append(live, inst); len(live) == 64 {
			b.StopTimer()
			closeAll()
			b.StartTimer()
		}
	}
}

// sessionSlope loads the guest at path in session isolation, opens sessions
// on ctxs up to each of steps (two calls of export with in each), and
// answers the resident bytes and Go heap bytes per session between the
// first and the last step. The plugin is closed before it returns.
func sessionSlope(b *testing.B, path string, ctxs []context.Context, steps []int, in []byte, export string) (resident, heap float64) {
	last := steps[len(steps)-1]
	p, err := newLoader(b).Load(context.Background(), Config{Path: path, Isolation: IsolationSession,
		Limits: Limits{MaxSessions: last, SessionIdle: 1 << 40}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	rss := make([]uint64, len(steps))
	heaps := make([]uint64, len(steps))
	open := 0
	for i, n := range steps {
		for ; open < n; open++ {
			for range 2 {
				if _, err := p.Call(ctxs[open], export, in); err != nil {
					b.Fatalf("session %d: %v", open, err)
				}
			}
		}
		rss[i], heaps[i] = residentBytes(b), heapBytes()
		b.Logf("%d sessions: resident %d KiB, Go heap in use %d KiB", n, rss[i]>>10, heaps[i]>>10)
	}
	if st := p.Stats(); st.Instantiated != uint64(last) || st.Discarded != 0 {
		b.Fatalf("stats %+v: want one instance per session (describe's spare taken by the first)", st)
	}
	span := float64(last - steps[0])
	return float64(int64(rss[len(rss)-1]-rss[0])) / span, float64(int64(heaps[len(heaps)-1]-heaps[0])) / span
}

// BenchmarkSessionLoad is issue 16's load test: 10,000 concurrent sessions
// of the Rust example's middleware in one plugin, in session isolation, all
// kept alive. open: 64 goroutines open the sessions (two 1 KB on_turn_start
// calls each, the first on a new instance); warm: as many calls again, each
// on a random live session's idle instance (two calls of one session at
// once take two instances, as they should: the session keeps both).
// Reported: the resident memory the sessions added (residentBytes before and
// after, as BenchmarkSessions), what Plugin.Memory says their linear
// memories hold and reserve, how long Plugin.Memory took to say so (what the
// engine's Status pays for the plugin), and the calls per second of each phase. It
// takes some seconds: run it with -benchtime 1x.
func BenchmarkSessionLoad(b *testing.B) {
	const sessions, workers = 10_000, 64
	in := turnStart(1 << 10)
	export := abi.MiddlewareExports["on_turn_start"]
	path := rustHooksWasm(b)
	ctxs := sessionContexts(b, sessions)
	for b.Loop() {
		p, err := newLoader(b).Load(context.Background(), Config{Path: path, Isolation: IsolationSession,
			Limits: Limits{MaxSessions: sessions, SessionIdle: 1 << 40}})
		if err != nil {
			b.Fatal(err)
		}
		before := residentBytes(b)
		open := concurrently(b, workers, sessions, func(i int) []context.Context { return []context.Context{ctxs[i], ctxs[i]} }, p, export, in, nil)
		after := residentBytes(b)
		start := time.Now()
		mem := p.Memory() // what the engine's Status pays for the plugin (Details.Memory)
		status := time.Since(start)
		st := p.Stats()
		checkCount(b, "Instantiated (one per session)", st.Instantiated, sessions)
		checkCount(b, "Discarded", st.Discarded, 0)
		checkCount(b, "idle instances (all)", mem.Instances, sessions)
		if b.Failed() {
			b.FailNow()
		}
		warm := concurrently(b, workers, sessions, func(i int) []context.Context {
			return []context.Context{ctxs[(i*7919)%sessions], ctxs[(i*104729+1)%sessions]} // two live sessions, spread over all
		}, p, export, in, nil)
		b.ReportMetric(float64(after-before)/(1<<20), "RSS-MiB")
		b.ReportMetric(float64(after-before)/sessions/1024, "KiB/session")
		b.ReportMetric(float64(mem.Resident)/sessions/1024, "linear-KiB/session")
		b.ReportMetric(float64(mem.Reserved)/(1<<30), "reserved-GiB")
		b.ReportMetric(float64(status.Microseconds())/1000, "memory-status-ms")
		b.ReportMetric(open, "open-calls/s")
		b.ReportMetric(warm, "warm-calls/s")
		p.Close(context.Background())
	}
}

// concurrently runs, on workers goroutines, export with in on each context
// calls(i) gives for i in [0, n), and answers the calls per second; it
// fails b with the first error a call returns, or check (if not nil)
// returns for a call's output.
func concurrently(b *testing.B, workers, n int, calls func(int) []context.Context, p *Plugin, export string, in []byte,
	check func(ctx context.Context, out []byte) error) float64 {
	next := make(chan int)
	errs := make(chan error, workers)
	start := time.Now()
	for range workers {
		go func() {
			var first error
			for i := range next { // after a failure, drained without calls
				for _, ctx := range calls(i) {
					if first == nil {
						var out []byte
						if out, first = p.Call(ctx, export, in); first == nil && check != nil {
							first = check(ctx, out)
						}
					}
				}
			}
			errs <- first
		}()
	}
	total := 0
	for i := range n {
		next <- i
		total += len(calls(i))
	}
	close(next)
	for range workers {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	return float64(total) / time.Since(start).Seconds()
}

// BenchmarkSessionsOwnTheirInstances is issue 24's promise at 10,000
// sessions: mw_counter.wat in session isolation at its default limits,
// 10,000 sessions open at once, each making a before_run call in each of
// three rounds, the rounds in different orders, on 64 goroutines; every
// call must answer its own session's count (1, then 2, then 3), or the
// benchmark fails. Reported: the resident memory the open sessions added
// (residentBytes before the first round and after it) per session, and the
// calls per second of the first round (each on a new instance) and of the
// later ones (each on its session's idle instance). Closing the sessions
// (EndSession) must release every instance. Run it with -benchtime 1x.
func BenchmarkSessionsOwnTheirInstances(b *testing.B) {
	const sessions, workers = 10_000, 64
	ctxs := sessionContexts(b, sessions)
	path := fixture(b, "mw_counter")
	in, err := json.Marshal(abi.BeforeRunInput{SessionID: "s", Turn: 1, SystemPrompt: "p"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		p, err := newLoader(b).Load(context.Background(), Config{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		before := residentBytes(b)
		var rates [3]float64
		for round, step := range []int{1, 7919, 104729} { // coprime with 10,000: every session once a round, in another order
			want := fmt.Sprintf(`{"system_prompt":"calls: %d"}`, round+1)
			rates[round] = concurrently(b, workers, sessions, func(i int) []context.Context { return []context.Context{ctxs[i*step%sessions]} },
				p, abi.ExportBeforeRun, in, func(ctx context.Context, out []byte) error {
					if string(out) != want {
						return fmt.Errorf("session %s: %s, want %s", engine.RunContext(ctx).SessionID, out, want)
					}
					return nil
				})
			if round == 0 {
				after := residentBytes(b)
				b.ReportMetric(float64(after-before)/(1<<20), "RSS-MiB")
				b.ReportMetric(float64(after-before)/sessions/1024, "KiB/session")
			}
		}
		st := p.Stats()
		ss, _ := p.Sessions()
		checkCount(b, "Instantiated (one per open session)", st.Instantiated, sessions)
		checkCount(b, "Replaced", st.Replaced, 0)
		checkCount(b, "Refused", st.Refused, 0)
		checkCount(b, "Discarded", st.Discarded, 0)
		checkCount(b, "open sessions", ss.Open, sessions)
		if b.Failed() {
			b.FailNow()
		}
		for _, ctx := range ctxs {
			p.EndSession(engine.RunContext(ctx).SessionID)
		}
		p.evicting.Wait()
		if ss, _ := p.Sessions(); ss.Open != 0 || p.Memory().Instances != 0 {
			b.Fatalf("after ending every session: %+v, %d idle instances", ss, p.Memory().Instances)
		}
		b.ReportMetric(rates[0], "new-calls/s")
		b.ReportMetric((rates[1]+rates[2])/2, "warm-calls/s")
		p.Close(context.Background())
	}
}
