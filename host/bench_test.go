package host

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/host/internal/wasmrt"
	"github.com/morphhost/morph/llm"
)

// Payload sizes of the call-path benchmarks.
var benchSizes = []struct {
	name string
	n    int
}{{"100B", 100}, {"1KB", 1 << 10}, {"64KB", 64 << 10}, {"1MB", 1 << 20}}

// jsonPayload is a JSON object of exactly n bytes.
func jsonPayload(n int) []byte {
	const head, tail = `{"task":"`, `"}`
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// benchGuests are the guests of the call-path benchmarks: the WAT echo (the
// smallest possible guest: the cost is all call path), the Go example's
// build_prompt (decode the PromptInput, read a config value, encode a
// PromptOutput) in both its builds, standard Go and TinyGo, and the Rust
// example's, which does the same work. All get a
// PromptInput of the benchmark's size. wasm returns the module's path, fails
// the benchmark when it is missing, and skips the TinyGo guest when
// MORPH_SKIP_TINYGO=1.
var benchGuests = []struct {
	name string
	wasm func(testing.TB) string
}{
	{"wat-echo", func(b testing.TB) string { return fixture(b, "echo") }},
	{"go-hooks", goHooksStd.wasm},
	{"go-hooks-tinygo", goHooksTinyGo.wasm},
	{"rust-hooks", rustHooksWasm},
}

// benchCalls runs one sub-benchmark per guest and payload size: open readies
// the guest at path and returns its build_prompt call, which each
// sub-benchmark times on a PromptInput of its size.
func benchCalls(b *testing.B, open func(b *testing.B, path string) func(in []byte) ([]byte, error)) {
	for _, g := range benchGuests {
		b.Run(g.name, func(b *testing.B) {
			call := open(b, g.wasm(b))
			for _, s := range benchSizes {
				in := jsonPayload(s.n)
				b.Run(s.name, func(b *testing.B) {
					b.SetBytes(int64(s.n))
					b.ReportAllocs()
					cpu := cpuTime(b)
					for b.Loop() {
						if out, err := call(in); err != nil || len(out) == 0 {
							b.Fatalf("%d bytes, %v", len(out), err)
						}
					}
					b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
				})
			}
		})
	}
}

// BenchmarkCall is morph's call path (Plugin.Call) on a warm instance.
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	benchCalls(b, func(b *testing.B, path string) func([]byte) ([]byte, error) {
		p := load(b, newLoader(b), Config{Path: path, Limits: Limits{MaxInputBytes: 2 << 20, MaxOutputBytes: 4 << 20}})
		return func(in []byte) ([]byte, error) { return p.Call(ctx, abi.ExportBuildPrompt, in) }
	})
}

// BenchmarkBareWazero is the same exchange written directly against wazero,
// with the same sandbox settings (the instrumented module, a deadline per call
// as morph's native loader gives it,
// cached function handles, WASI and a stub host module for the Go guest):
// the floor morph's call path is measured against.
func BenchmarkBareWazero(b *testing.B) { benchBare(b, bareInstrumented) }

// BenchmarkBareWazeroNoTermination is the bare call with no way to stop the
// guest at its deadline: what the deadline enforcement costs a guest. morph
// never runs guests so (a spinning guest could not be stopped).
func BenchmarkBareWazeroNoTermination(b *testing.B) { benchBare(b, bareUnbounded) }

// BenchmarkBareWazeroCloseOnDone enforces the deadline with wazero's own
// mechanism, WithCloseOnContextDone, which morph used before package
// interrupt: an exit to Go at every loop header.
func BenchmarkBareWazeroCloseOnDone(b *testing.B) { benchBare(b, bareCloseOnDone) }

// How a bare benchmark instance is stopped at its deadline.
const (
	bareInstrumented = iota // as morph does: package interrupt
	bareUnbounded           // not at all
	bareCloseOnDone         // wazero's WithCloseOnContextDone
)

func benchBare(b *testing.B, mode int) {
	ctx := context.Background()
	benchCalls(b, func(b *testing.B, path string) func([]byte) ([]byte, error) {
		mod, alloc, fn := bareInstance(b, path, mode)
		stack := make([]uint64, 2)
		state := guest.NewCallState(slog.Default, DefaultMaxLogBytes, context.Background()) // one per instance, as morph's
		return func(in []byte) ([]byte, error) { return bareCall(ctx, mode, state, mod, alloc, fn, stack, in) }
	})
}

// BenchmarkNativeHook is the Go example's build_prompt as a native Go hook
// doing the same work on the same JSON: decode, look its "style" up in the
// plugin's config values (the guest calls config_get, which the bare
// benchmark answers "absent": here the lookup misses too), build, encode.
func BenchmarkNativeHook(b *testing.B) {
	values := map[string]string{"temperature": "0.2"}
	for _, s := range benchSizes {
		in := jsonPayload(s.n)
		b.Run("go-hooks/"+s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n))
			b.ReportAllocs()
			for b.Loop() {
				var pi abi.PromptInput
				if err := json.Unmarshal(in, &pi); err != nil {
					b.Fatal(err)
				}
				style, ok := values["style"]
				if !ok || style == "" {
					style = goHooksDefaultStyle
				}
				out, err := json.Marshal(abi.PromptOutput{SystemPrompt: pi.DefaultPrompt + "\n" + goHooksPromptSection + "\n- " + style + "\n"})
				if err != nil || len(out) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// The go-hooks example's prompt section and default style
// (examples/go-hooks/main.go), which BenchmarkNativeHook builds as it does.
const (
	goHooksPromptSection = "## House style (from go-hooks plugin)"
	goHooksDefaultStyle  = "Keep the final answer short and plain; give every number with its unit."
)

func bareInstance(b *testing.B, path string, mode int) (api.Module, api.Function, api.Function) {
	ctx := context.Background()
	wasm, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(mode == bareCloseOnDone).WithMemoryLimitPages(64*16))
	b.Cleanup(func() { r.Close(ctx) })
	if mode == bareInstrumented {
		if wasm, err = interrupt.Instrument(wasm, wasmrt.InterruptPeriod, DefaultMaxStackBytes); err != nil {
			b.Fatal(err)
		}
		if err := wasmrt.InstantiateInterrupt(ctx, r, DefaultMaxStackBytes); err != nil {
			b.Fatal(err)
		}
	}
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	_, err = r.NewHostModuleBuilder(abi.HostModule).
		NewFunctionBuilder().WithFunc(func(int32, uint32, uint32) {}).Export(abi.ImportLog).
		NewFunctionBuilder().WithFunc(func(uint32, uint32, uint32, uint32) int32 { return -1 }).Export(abi.ImportConfigGet).
		Instantiate(ctx)
	if err != nil {
		b.Fatal(err)
	}
	// Memory as morph's: a mapping reserved at its maximum, which growth never copies.
	arena := &memory.Arena{}
	b.Cleanup(arena.Release) // after r.Close: cleanups run last in, first out
	mod, err := r.InstantiateWithConfig(experimental.WithMemoryAllocator(ctx, arena), wasm,
		wazero.NewModuleConfig().WithStartFunctions("_initialize").WithSysNanotime().WithSysWalltime())
	if err != nil {
		b.Fatal(err)
	}
	return mod, mod.ExportedFunction(abi.ExportAlloc), mod.ExportedFunction(abi.ExportBuildPrompt)
}

// bareCall gives the call a deadline as its mode enforces it: the
// instance's call state, which wasmrt.CheckInterrupt reads (as morph's
// native loader does), a context deadline for close-on-done, none for the
// unbounded mode.
func bareCall(ctx context.Context, mode int, state *guest.CallState, mod api.Module, alloc, fn api.Function, stack []uint64, in []byte) ([]byte, error) {
	switch mode {
	case bareInstrumented:
		ctx = state.Begin(ctx, time.Now().Add(DefaultTimeout))
	case bareCloseOnDone:
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	stack[0] = uint64(len(in))
	if err := alloc.CallWithStack(ctx, stack); err != nil {
		return nil, err
	}
	ptr := uint32(stack[0])
	mod.Memory().Write(ptr, in)
	stack[0], stack[1] = uint64(ptr), uint64(len(in))
	if err := fn.CallWithStack(ctx, stack); err != nil {
		return nil, err
	}
	rptr, rlen, _ := abi.Unpack(stack[0])
	view, ok := mod.Memory().Read(rptr, rlen)
	if !ok {
		return nil, fmt.Errorf("out of range")
	}
	return append([]byte(nil), view...), nil
}

// BenchmarkColdStart loads each guest in a new loader whose disk cache
// already holds it: what a new process pays (compile from cache, instantiate,
// describe) before its first hook call.
func BenchmarkColdStart(b *testing.B) {
	ctx := context.Background()
	guests := append([]struct {
		name string
		wasm func(testing.TB) string
	}{{"wat-minimal", func(b testing.TB) string { return fixture(b, "minimal") }}}, benchGuests[1:]...)
	for _, g := range guests {
		b.Run(g.name, func(b *testing.B) {
			dir, path := b.TempDir(), g.wasm(b)
			warm, _ := NewLoader(LoaderOptions{CacheDir: dir})
			p, err := warm.Load(ctx, Config{Path: path})
			if err != nil {
				b.Fatal(err)
			}
			p.Close(ctx)
			warm.Close(ctx)
			b.ReportAllocs()
			for b.Loop() {
				l, err := NewLoader(LoaderOptions{CacheDir: dir})
				if err != nil {
					b.Fatal(err)
				}
				p, err := l.Load(ctx, Config{Path: path})
				if err != nil {
					b.Fatal(err)
				}
				p.Close(ctx)
				l.Close(ctx)
			}
		})
	}
}

// finalOnly answers every request with a final at once.
type finalOnly struct{}

func (finalOnly) Chat(context.Context, llm.Request) (llm.Result, error) {
	return llm.Result{Text: `{"type":"final","final":{"output":"ok"}}`}, nil
}

// BenchmarkMiddlewareHistory is one session turn after 10 and after 1,000
// messages of history, with no middleware, with a wasm middleware that does
// not ask for the history, and with one that does. The first two must cost
// the same at both lengths (beyond what the engine itself pays to send the
// history to the model).
func BenchmarkMiddlewareHistory(b *testing.B) {
	ctx := context.Background()
	l := newLoader(b)
	for _, mwName := range []string{"none", "mw_observe", "mw_observe_history"} {
		var hookTime time.Duration // what the middleware hook calls took, as the engine timed them
		opts := []engine.Option{engine.WithEventHandler(func(ev engine.Event) {
			if ev.Kind == engine.EventHook {
				hookTime += ev.Duration
			}
		})}
		if mwName != "none" {
			opts = append(opts, engine.WithExtenders(l.Extender(Config{Path: fixture(b, mwName)}, engine.MiddlewareConfig{})))
		}
		e := engine.New(finalOnly{}, nil, opts...)
		if err := e.Initialize(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close(ctx) })
		for _, n := range []int{10, 1000} {
			history := make([]llm.Message, n)
			for i := range history {
				history[i] = llm.Message{Role: []string{llm.RoleUser, llm.RoleAssistant}[i%2], Content: strings.Repeat("m", 100)}
			}
			b.Run(fmt.Sprintf("%s/%d", mwName, n), func(b *testing.B) {
				b.ReportAllocs()
				hookTime = 0
				for b.Loop() {
					if _, _, err := e.ResumeSession("bench", history).RunTurn(ctx, "q", engine.RunOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(hookTime.Nanoseconds())/float64(b.N), "hook-ns/op")
			})
		}
	}
}

// BenchmarkNewInstance is what a call pays when it needs a fresh instance
// (a new session, call isolation, a discarded instance): instantiate the
// compiled module with morph's memory and imports, run _initialize, close
// the instance and release its memory. For the WAT echo there is no
// _initialize: it is all wazero's and morph's fixed cost.
func BenchmarkNewInstance(b *testing.B) {
	ctx := context.Background()
	for _, g := range benchGuests {
		b.Run(g.name, func(b *testing.B) {
			p := load(b, newLoader(b), Config{Path: g.wasm(b)})
			b.ReportAllocs()
			for b.Loop() {
				inst, err := p.instantiate(ctx)
				if err != nil {
					b.Fatal(err)
				}
				inst.close()
			}
		})
	}
}

// BenchmarkCallParallel is BenchmarkCall's 1 KB call from GOMAXPROCS
// goroutines at once on a pooled plugin (run with -cpu 1,2): per call, the
// time should halve from one core to two, as calls on different cores
// share no lock and write no common cache line (see shards). The output is read in place (CallFunc, as the
// engine's adapters do): Call's copy allocates the output on every call, and
// the garbage collection that drives is itself shared by the cores (on the
// WAT echo, 1 KB a call made the collector and the scheduler's wake-ups it
// causes half of the profile, and two cores slower than one).
func BenchmarkCallParallel(b *testing.B) {
	ctx := context.Background()
	in := jsonPayload(1 << 10)
	for _, g := range benchGuests {
		b.Run(g.name, func(b *testing.B) {
			p := load(b, newLoader(b), Config{Path: g.wasm(b), Isolation: IsolationPooled})
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := 0
					if err := p.CallFunc(ctx, abi.ExportBuildPrompt, in, func(view []byte) error { n = len(view); return nil }); err != nil || n == 0 {
						b.Errorf("%d bytes, %v", n, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkMiddlewareTurn is what the engine costs per middleware hook call:
// one session turn (the model answers a final at once) with 0, 1 and 16
// WAT middleware plugins (guests/testdata/mw_observe.wat, on_turn_start and
// on_final, answering nothing: two hook calls per plugin a turn, all call
// path); "bare", the hook's own call (Plugin.Call of on_turn_start on the
// session's warm instance, with the turn's payload encoded once); and
// "bare16", the 32 calls a turn makes, made directly (Plugin.Call, payloads
// encoded once), on 16 plugins in turn, as the engine makes them: what the
// plugins cost without the engine. The engine's overhead per hook call is
// (plugins=16 - plugins=0 - bare16) / 32. On a shared machine, compare the
// CPU time per operation (cpu-ns/op), which moves less than the wall time.
func BenchmarkMiddlewareTurn(b *testing.B) {
	ctx := context.Background()
	l := newLoader(b)
	for _, n := range []int{0, 1, 16} {
		var opts []engine.Option
		for i := range n {
			opts = append(opts, engine.WithExtenders(l.Extender(Config{Path: fixture(b, "mw_observe"), Name: fmt.Sprintf("mw%d", i)}, engine.MiddlewareConfig{})))
		}
		e := engine.New(finalOnly{}, nil, opts...)
		if err := e.Initialize(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close(ctx) })
		b.Run(fmt.Sprintf("plugins=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				if _, _, err := e.ResumeSession("bench", nil).RunTurn(ctx, "q", engine.RunOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
			for _, s := range e.MiddlewareStats() {
				if s.Faults > 0 || s.Calls == 0 {
					b.Fatalf("%s: %d calls, %d faults", s.Name, s.Calls, s.Faults)
				}
			}
		})
	}
	b.Run("bare16", func(b *testing.B) {
		var ps []*Plugin
		for i := range 16 {
			ps = append(ps, load(b, l, Config{Path: fixture(b, "mw_observe"), Name: fmt.Sprintf("bare%d", i)}))
		}
		start, err := json.Marshal(abi.TurnStart{SessionID: "bench", Turn: 1, Input: "q"})
		if err != nil {
			b.Fatal(err)
		}
		final, err := json.Marshal(abi.TurnEnd{SessionID: "bench", Turn: 1, Step: 1, Final: `{"output":"ok"}`, Status: abi.StatusFinal})
		if err != nil {
			b.Fatal(err)
		}
		sctx := engine.WithSession(ctx, "bench", 1)
		b.ReportAllocs()
		cpu := cpuTime(b)
		for b.Loop() {
			for _, call := range []struct {
				hook string
				in   []byte
			}{{abi.HookOnTurnStart, start}, {abi.HookOnFinal, final}} {
				for _, p := range ps {
					if _, err := p.Call(sctx, abi.MiddlewareExports[call.hook], call.in); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("bare", func(b *testing.B) {
		p := load(b, l, Config{Path: fixture(b, "mw_observe")})
		in, err := json.Marshal(abi.TurnStart{SessionID: "bench", Turn: 1, Input: "q"})
		if err != nil {
			b.Fatal(err)
		}
		sctx := engine.WithSession(ctx, "bench", 1)
		b.ReportAllocs()
		cpu := cpuTime(b)
		for b.Loop() {
			if _, err := p.Call(sctx, abi.MiddlewareExports[abi.HookOnTurnStart], in); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	})
}

// cpuTime is the CPU time the process has used, user and system, in
// nanoseconds: on a machine shared with other work, a benchmark's CPU time
// per operation moves less than its wall time, which counts the waits for
// a core too (it still counts the cache misses the other work causes).
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
