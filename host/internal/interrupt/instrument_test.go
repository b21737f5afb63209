package interrupt_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/host/internal/wasmbin"
	"github.com/morphhost/morph/internal/testenv"
)

func i32(v int32) uint64 { return uint64(uint32(v)) }

// call runs fn on a fresh instance of compiled (a trap or a start function's effect cannot leak from one
// case into the next).
func call(r wazero.Runtime, compiled wazero.CompiledModule, fn string, args ...uint64) ([]uint64, error) {
	ctx := context.Background()
	mod, err := r.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return nil, err
	}
	defer mod.Close(ctx)
	return mod.ExportedFunction(fn).Call(ctx, args...)
}

// TestSemanticsPreserved runs every export of the semantics fixture, original and instrumented, and
// requires the same, known, results: a misnumbered call, ref.func, element or export would call the
// wrong function or trap, and a misplaced check would fail validation.
func TestSemanticsPreserved(t *testing.T) {
	orig := wat(t, "semantics")
	env := wat(t, "env")
	nested := func(n uint32) (acc uint32) {
		for i := uint32(0); i < n; i++ {
			for j := uint32(0); j < i; j++ {
				acc += i ^ j
			}
		}
		return acc
	}
	cases := []struct {
		fn   string
		args []uint64
		want []uint64 // nil: the call traps
	}{
		{"started", nil, []uint64{107}},
		{"host", []uint64{3, 4}, []uint64{7}},
		{"apply", []uint64{0, 7, 5}, []uint64{12}},
		{"apply", []uint64{1, 7, 5}, []uint64{2}},
		{"apply", []uint64{2, 7, 5}, []uint64{35}},
		{"apply", []uint64{3, 7, 5}, nil}, // a null slot
		{"apply2", []uint64{0, 7, 5}, []uint64{2}},
		{"apply2", []uint64{1, 7, 5}, []uint64{12}},
		{"apply2", []uint64{2, 7, 5}, []uint64{35}},
		{"unary", []uint64{4, 7}, nil}, // $mul is not unary
		{"unary", []uint64{5, 7}, []uint64{49}},
		{"unary", []uint64{6, 7}, []uint64{49}},
		{"unary", []uint64{7, 7}, []uint64{i32(-7)}},
		{"via_ref", []uint64{5}, []uint64{i32(-5)}},
		{"via_global", []uint64{5}, []uint64{10}},
		{"tables", nil, []uint64{10923}},
		{"fact", []uint64{20}, []uint64{2432902008176640000}},
		{"fib", []uint64{20}, []uint64{6765}},
		{"nested", []uint64{50}, []uint64{uint64(nested(50))}},
		{"triangle", []uint64{100}, []uint64{5050}},
		{"triangle2", []uint64{100}, []uint64{i32(1000 - 5050)}},
		{"classify", []uint64{0}, []uint64{10}},
		{"classify", []uint64{1}, []uint64{20}},
		{"classify", []uint64{5}, []uint64{30}},
		{"swap", []uint64{1, 2}, []uint64{2, 1}},
		{"diff", []uint64{10, 3}, []uint64{7}},
		{"bulk", nil, []uint64{uint64(binary.LittleEndian.Uint32([]byte("llo!")))}},
		{"simd", []uint64{10}, []uint64{11013}},
		{"misc", []uint64{200}, []uint64{2147483591}},
	}
	long := longModule()
	for x := range uint32(6) {
		cases = append(cases, struct {
			fn   string
			args []uint64
			want []uint64
		}{"long", []uint64{uint64(x)}, []uint64{uint64(longResult(x))}})
	}
	for _, budget := range []uint32{1, 7, 10000} {
		t.Run(fmt.Sprint("budget=", budget), func(t *testing.T) {
			ctx := context.Background()
			r, c := newRuntime(t, wazero.NewRuntimeConfig())
			if _, err := r.InstantiateWithConfig(ctx, env, wazero.NewModuleConfig().WithName("env")); err != nil {
				t.Fatal(err)
			}
			for name, wasm := range map[string][]byte{"original": orig, "instrumented": instrument(t, orig, budget),
				"original long": long, "instrumented long": instrument(t, long, budget)} {
				compiled, err := r.CompileModule(ctx, wasm)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for _, tc := range cases {
					if (tc.fn == "long") != strings.HasSuffix(name, "long") {
						continue
					}
					got, err := call(r, compiled, tc.fn, tc.args...)
					if tc.want == nil {
						if err == nil {
							t.Errorf("%s %s%v = %v, want a trap", name, tc.fn, tc.args, got)
						}
					} else if err != nil || !reflect.DeepEqual(got, tc.want) {
						t.Errorf("%s %s%v = %v, %v; want %v", name, tc.fn, tc.args, got, err, tc.want)
					}
				}
			}
			if c.calls.Load() == 0 {
				t.Error("the instrumented module never called the check")
			}
		})
	}
}

// longModule exports long(x), which spreads some 70,000 instructions over a br_table's targets, an if's
// arms, a loop with a parameter and a long callee, with x held beneath on the operand stack all along:
// the plan cuts that code with checkpoints inside every one of those blocks, and one after the call (see
// longResult).
func longModule() []byte {
	// s is k times a = a*31 + x: 6k instructions.
	s := func(k int) []byte { return repeat(k, 0x20, 1, 0x41, 31, 0x6C, 0x20, 0, 0x6A, 0x21, 1) }
	code := cat([]byte{1, 2, typeI32, // locals a, t
		0x20, 0, // x, beneath
		0x02, 0x40, 0x02, 0x40, 0x02, 0x40, // block $b2 block $b1 block $b0
		0x20, 0, 0x41, 3, 0x70, 0x0E, 3, 0, 1, 2, 2, 0x0B}, // br_table on x % 3, end $b0
		s(1500), []byte{0x0B}, // end $b1
		s(1500), []byte{0x20, 0, 0x04, 0x40}, s(2000), []byte{0x05}, s(100), []byte{0x0B, 0x0B}, // if x, else, end $b2
		[]byte{0x41, 3, 0x03, 0}, s(2000), // loop (param i32) (result i32), 3 times
		[]byte{0x41, 1, 0x6B, 0x22, 2, 0x20, 2, 0x0D, 0, 0x0B, opDrop},
		[]byte{0x20, 1, 0x10, 1, 0x21, 1}, s(10), // a = mix(a), and more after the call
		[]byte{0x20, 1, 0x6A, 0x0B}) // x + a
	mix := cat([]byte{0, 0x20, 0}, repeat(2500, 0x41, 31, 0x6C, 0x41, 7, 0x6A), []byte{0x0B}) // y = y*31 + 7, 2500 times
	return module(sec(1, vec([]byte{0x60, 1, typeI32, 1, typeI32})), sec(3, vec(u32(0), u32(0))),
		sec(7, vec(export("long", 0))), sec(10, vec(body(code...), body(mix...))))
}

// longResult is what long(x) returns.
func longResult(x uint32) uint32 {
	a := uint32(0)
	s := func(k int) {
		for range k {
			a = a*31 + x
		}
	}
	switch x % 3 {
	case 0:
		s(1500)
		fallthrough
	case 1:
		s(1500)
		if x != 0 {
			s(2000)
		} else {
			s(100)
		}
	}
	s(3 * 2000)
	for range 2500 {
		a = a*31 + 7
	}
	s(10)
	return x + a
}

// TestCheckpointCounts checks that the check runs exactly when the checkpoints' weights spend the budget,
// counting across calls on one instance: each checkpoint subtracts its weight from the counter, and when
// that leaves it at 0 or below, the check runs and the counter starts again at the budget; a bulk
// instruction calls the check first if its charge is not below the counter, else subtracts it. A weight
// is the most instructions (blocks' ends included) that any path from the checkpoint runs before the next
// one or the function's return, a call counting 1 plus the callee's instructions up to its first
// checkpoint; a call that may run a checkpoint is followed by one. With a budget of 1, every checkpoint
// runs the check.
func TestCheckpointCounts(t *testing.T) {
	type event struct {
		units int64
		bulk  bool // a bulk instruction's charge, else a checkpoint's weight
	}
	rep := func(n int, seq ...event) (out []event) {
		for range n {
			out = append(out, seq...)
		}
		return out
	}
	w := func(units int64) event { return event{units: units} }
	// spin: its loop header, over 6 instructions, the loop's end and the body's.
	// tree: its entry (a cycle), over 6 instructions to the first call (a call costs 1 + 0: the entry is
	// checked), then after each call, which may run checkpoints, over the rest: 4, then 2.
	var tree func(n int) []event
	tree = func(n int) []event {
		if n == 0 {
			return []event{w(6)}
		}
		return slices.Concat([]event{w(6)}, tree(n-1), []event{w(4)}, tree(n-1), []event{w(2)})
	}
	// outer: its header, over 3 (the call to inner costs 1 + 1, the loop instruction); inner's header, over
	// 8, like spin's; after the call, over 10 (the call to leaf costs 1 + 1: leaf runs no checkpoint).
	// exits: its header, over 4; exit's header, over 7 (its body and end); where exit's loop exits, over
	// 27 (the longest way out); after the call, over 11.
	// fill: a charge of n/4 units.
	steps := []struct {
		fn    string
		args  []uint64
		check []event
	}{
		{"spin", []uint64{999}, rep(999, w(8))},
		{"tree", []uint64{10}, tree(10)},
		{"answer", nil, nil},
		{"spin", []uint64{1}, rep(1, w(8))},
		{"fill", []uint64{4000}, []event{{1000, true}}},
		{"spin", []uint64{123456}, rep(123456, w(8))},
		{"outer", []uint64{100, 50}, rep(100, slices.Concat([]event{w(3)}, rep(50, w(8)), []event{w(10)})...)},
		{"fill", []uint64{3}, []event{{0, true}}},
		{"fill", []uint64{65536}, []event{{16384, true}}},
		{"exits", []uint64{0, 30, 20}, rep(30, slices.Concat([]event{w(4)}, rep(20, w(7)), []event{w(27), w(11)})...)},
		{"exits", []uint64{1, 30, 20}, rep(30, slices.Concat([]event{w(4)}, rep(20, w(7)), []event{w(27), w(11)})...)},
		{"exits", []uint64{2, 30, 20}, rep(30, slices.Concat([]event{w(4)}, rep(20, w(7)), []event{w(27), w(11)})...)},
		{"exits", []uint64{3, 30, 20}, rep(30, slices.Concat([]event{w(4)}, rep(20, w(7)), []event{w(27), w(11)})...)},
		{"exits", []uint64{4, 30, 20}, rep(30, slices.Concat([]event{w(4)}, rep(20, w(7)), []event{w(27), w(11)})...)},
	}
	orig := wat(t, "loops")
	for _, budget := range []int64{1, 3, 10, 1000, 10000, 100000} {
		t.Run(fmt.Sprint("budget=", budget), func(t *testing.T) {
			r, c := newRuntime(t, wazero.NewRuntimeConfig())
			mod := instantiate(t, r, instrument(t, orig, uint32(budget)))
			counter, want := budget, int64(0)
			for _, s := range steps {
				if _, err := mod.ExportedFunction(s.fn).Call(context.Background(), s.args...); err != nil {
					t.Fatalf("%s%v: %v", s.fn, s.args, err)
				}
				for _, e := range s.check {
					switch {
					case e.bulk && e.units >= counter, !e.bulk && counter-e.units <= 0:
						want++
						counter = budget
					default:
						counter -= e.units
					}
				}
				if got := c.calls.Load(); got != want {
					t.Fatalf("after %s%v: %d checks, want %d", s.fn, s.args, got, want)
				}
			}
		})
	}
}

// TestInterrupt stops, at a 50 ms deadline, an infinite loop and a call tree that has no loop at all (so
// only function entries can stop it), with a runtime that does not close modules on context done. The
// instance and the runtime stay usable.
func TestInterrupt(t *testing.T) {
	r, _ := newRuntime(t, wazero.NewRuntimeConfig())
	wasm := instrument(t, wat(t, "loops"), 10000)
	mod := instantiate(t, r, wasm)
	for _, tc := range []struct {
		fn   string
		args []uint64
	}{
		{"forever", nil},
		{"tree", []uint64{62}}, // 2^63 calls, never more than 62 deep
	} {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := mod.ExportedFunction(tc.fn).Call(ctx, tc.args...)
		elapsed := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: err = %v, want context.DeadlineExceeded", tc.fn, err)
		}
		if elapsed < 50*time.Millisecond || elapsed > 2*time.Second {
			t.Errorf("%s: stopped after %v, want soon after the 50ms deadline", tc.fn, elapsed)
		}
		if got, err := mod.ExportedFunction("answer").Call(context.Background()); err != nil || got[0] != 42 {
			t.Fatalf("after interrupting %s, the instance answers %v, %v", tc.fn, got, err)
		}
	}
	if got, err := instantiate(t, r, wasm).ExportedFunction("answer").Call(context.Background()); err != nil || got[0] != 42 {
		t.Fatalf("after the interrupts, a new instance answers %v, %v", got, err)
	}
}

// TestGCWhileSpinning is the other half of the reason for the check: a garbage collection, which must stop
// every goroutine, completes while a guest spins, because the guest's goroutine enters Go at every check.
func TestGCWhileSpinning(t *testing.T) {
	r, c := newRuntime(t, wazero.NewRuntimeConfig())
	mod := instantiate(t, r, instrument(t, wat(t, "loops"), 10000))
	running := make(chan struct{})
	var once sync.Once
	c.hook = func() { once.Do(func() { close(running) }) }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := mod.ExportedFunction("forever").Call(ctx)
		done <- err
	}()
	<-running
	start := time.Now()
	runtime.GC()
	gc := time.Since(start)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if gc > time.Second {
		t.Errorf("runtime.GC took %v while the guest spun", gc)
	}
}

// TestNames checks the renumbered name section: wazero reports the same function names for the exports,
// and wasm2wat (which also validates the output, independently of wazero) prints every function with the
// same name, type and parameter names as in the original.
func TestNames(t *testing.T) {
	orig := wat(t, "semantics")
	inst := instrument(t, orig, 100)
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	names := func(wasm []byte) map[string]string {
		compiled, err := r.CompileModule(ctx, wasm)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for export, def := range compiled.ExportedFunctions() {
			m[export] = def.Name()
		}
		return m
	}
	want, got := names(orig), names(inst)
	if want["fact"] != "fact" || !reflect.DeepEqual(got, want) {
		t.Errorf("export -> function name:\n got  %v\n want %v", got, want)
	}

	bin := testenv.Tool(t, "wasm2wat", "tools-wabt")
	funcs := func(wasm []byte) []string {
		path := filepath.Join(t.TempDir(), "m.wasm")
		if err := os.WriteFile(path, wasm, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, path).CombinedOutput()
		if err != nil {
			t.Fatalf("wasm2wat: %v\n%s", err, out)
		}
		// A named function's header, and its locals if any: unnamed ones print their index, which shifts.
		return regexp.MustCompile(`(?m)^  \(func \$.*\n(    \(local .*\n)?`).FindAllString(string(out), -1)
	}
	// The same functions with the same headers; a function that caches the counter has one more i32 local,
	// after its own.
	wantFuncs, gotFuncs := funcs(orig), funcs(inst)
	same := len(gotFuncs) == len(wantFuncs)
	for i := 0; same && i < len(wantFuncs); i++ {
		w, g := wantFuncs[i], gotFuncs[i]
		plus := strings.TrimSuffix(w, ")\n") + ") (local i32)\n"
		if !strings.Contains(w, "(local ") {
			plus = w + "    (local i32)\n"
		}
		same = g == w || g == plus
	}
	// The fixture has what the comparison is about: functions, one of them with locals.
	if len(wantFuncs) < 10 {
		t.Errorf("%d named functions in the fixture, want at least 10", len(wantFuncs))
	}
	if !strings.Contains(strings.Join(wantFuncs, ""), "(local $i i32)") {
		t.Errorf("no function of the fixture has the local $i: %q", wantFuncs)
	}
	if !same {
		t.Errorf("function headers:\n got  %q\n want %q", gotFuncs, wantFuncs)
	}
}

// TestCustomSections: DWARF sections are dropped (the code moved), other custom sections kept, and a
// malformed name section is salvaged, not an error: the spec asks engines to ignore one.
func TestCustomSections(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCustomSections(true))
	defer r.Close(ctx)
	names := sec(0, str("name"),
		sec(1, vec(append(u32(0), str("first")...))), // function 0 is "first"
		sec(99, []byte("unknown subsection")),
		[]byte{2, 0x80}) // a truncated subsection
	wasm := module(
		sec(1, vec([]byte{0x60, 0, 0})),
		sec(3, vec(u32(0))),
		sec(7, vec(append(str("f"), 0, 0))),
		sec(10, vec(body(0, 0x0B))),
		sec(0, str(".debug_info"), []byte{1, 2, 3}),
		sec(0, str("keep"), []byte("me")),
		names)
	compiled, err := r.CompileModule(ctx, instrument(t, wasm, 10))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range compiled.CustomSections() {
		got = append(got, s.Name()+"="+string(s.Data()))
	}
	if want := []string{"keep=me"}; !reflect.DeepEqual(got, want) {
		t.Errorf("custom sections %q, want %q", got, want)
	}
	if name := compiled.ExportedFunctions()["f"].Name(); name != "first" {
		t.Errorf("function 0 (now 1) is named %q, want first", name)
	}
}

// TestFeatures runs the fixtures of the features wazero accepts beyond WebAssembly 2.0: tail calls,
// threads, exception handling, typed function references, and recursive type groups.
func TestFeatures(t *testing.T) {
	typed := typedModule()
	cases := []struct {
		name     string
		wasm     []byte
		fn       string
		args     []uint64
		want     uint64
		minCheck int64
	}{
		{"tail calls", wat(t, "tailcall", "--enable-tail-call"), "sum", []uint64{1e6, 0}, 500000500000, 1e6 / 10},
		{"tail calls", wat(t, "tailcall", "--enable-tail-call"), "sum_indirect", []uint64{1e6, 0}, 500000500000, 1e6 / 10},
		{"threads", wat(t, "threads", "--enable-threads"), "atomics", []uint64{100}, 200, 100 / 10},
		{"typed references", typed, "callref", []uint64{5}, 10, 0},
		{"typed references", typed, "brnull", []uint64{5}, 10, 0},
		{"typed references", typed, "fromtable", []uint64{5}, 10, 0},
		{"typed references", typed, "tailref", []uint64{5}, 10, 0},
		{"exceptions", typed, "catch", []uint64{500}, 42, 500 / 20},
		{"exceptions", typed, "catchref", []uint64{0}, 7, 0},
		{"exceptions", typed, "catchall", []uint64{0}, 44, 0},
		{"recursive type group", recGroupModule(), "answer", nil, 42, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name+"/"+tc.fn, func(t *testing.T) {
			r, c := newRuntime(t, wazero.NewRuntimeConfig().WithCoreFeatures(allFeatures))
			for name, wasm := range map[string][]byte{"original": tc.wasm, "instrumented": instrument(t, tc.wasm, 100)} {
				got, err := instantiate(t, r, wasm).ExportedFunction(tc.fn).Call(context.Background(), tc.args...)
				if err != nil || got[0] != tc.want {
					t.Errorf("%s %s%v = %v, %v; want %d", name, tc.fn, tc.args, got, err, tc.want)
				}
			}
			if n := c.calls.Load(); n < tc.minCheck {
				t.Errorf("%d checks, want at least %d", n, tc.minCheck)
			}
		})
	}
}

// exports describes a compiled module's exports and imports, to compare before and after.
func exports(c wazero.CompiledModule) (exp map[string]string, imports []string) {
	exp = map[string]string{}
	for name, d := range c.ExportedFunctions() {
		exp[name] = fmt.Sprint("func", d.ParamTypes(), d.ResultTypes())
	}
	for name, d := range c.ExportedMemories() {
		mx, _ := d.Max()
		exp[name] = fmt.Sprint("memory", d.Min(), mx)
	}
	for _, d := range c.ImportedFunctions() {
		mod, name, _ := d.Import()
		imports = append(imports, mod+"."+name)
	}
	return exp, imports
}

// TestRealModules instruments the example plugins and the host's test guests: the result compiles, keeps
// its exports, gains only the check import, passes wabt's validator, and morph_describe answers the same.

// tinyGoTarget is the make target of the TinyGo guests, which MORPH_SKIP_TINYGO=1 switches off (testenv.TinyGo).
const tinyGoTarget = "tinygo-examples"

func TestRealModules(t *testing.T) {
	const root = "../../../"
	type file struct {
		path, target string
		slow         bool // a standard Go guest: over ten seconds to compile under -race, and it is compiled twice
	}
	files := []file{
		{"examples/rust-hooks/target/wasm32-unknown-unknown/release/rust_hooks.wasm", "rust", false},
		{"examples/go-hooks/go-hooks.wasm", "examples", true},
		{"examples/go-hooks/go-hooks-tinygo.wasm", tinyGoTarget, false},
	}
	wats, _ := filepath.Glob(root + "guests/testdata/*.wat")
	for _, w := range wats {
		files = append(files, file{strings.TrimPrefix(strings.TrimSuffix(w, ".wat")+".wasm", root), "fixtures", false})
	}
	for _, f := range files {
		t.Run(filepath.Base(f.path), func(t *testing.T) {
			if f.slow && testing.Short() {
				t.Skip("-short: a standard Go guest is slow to compile")
			}
			if f.target == tinyGoTarget {
				testenv.TinyGo(t, "the instrumented TinyGo build of go-hooks")
			}
			orig := testenv.File(t, root+f.path, f.target)
			inst := instrument(t, orig, 10000)
			ctx := context.Background()
			// The original under wazero's own interruption, in case a guest spins; the copy under the check.
			ro := wazero.NewRuntimeWithConfig(ctx, guestConfig())
			defer ro.Close(ctx)
			ri, _ := newRuntime(t, guestConfig())
			co, err := ro.CompileModule(ctx, orig)
			if err != nil {
				t.Fatalf("original: %v", err)
			}
			ci, err := ri.CompileModule(ctx, inst)
			if err != nil {
				t.Fatalf("instrumented: %v", err)
			}
			expO, impO := exports(co)
			expI, impI := exports(ci)
			if !reflect.DeepEqual(expI, expO) {
				t.Errorf("exports changed:\n got  %v\n want %v", expI, expO)
			}
			if want := append(impO, interrupt.Module+"."+interrupt.Func, interrupt.Module+"."+interrupt.StackFunc); !reflect.DeepEqual(impI, want) {
				t.Errorf("imports %v, want %v", impI, want)
			}
			validate(t, inst)
			// Describe what can run alone: with the morph_describe of ABI v1 (an Extism guest's takes no
			// arguments), no memory to import (no host provides one: the loader refuses such a module) and
			// one exported (the loader refuses a module without, as nomemory.wat).
			if _, ok := expO["morph_describe"]; !ok || len(co.ImportedMemories()) > 0 || len(co.ExportedMemories()) == 0 {
				return
			}
			want := describe(t, ro, co)
			if got := describe(t, ri, ci); got != want {
				t.Errorf("morph_describe answers\n %s\nwant\n %s", got, want)
			}
		})
	}
}

// validate runs wabt's validator on wasm, if installed: a second opinion besides wazero's.
func validate(t *testing.T, wasm []byte) {
	bin, err := exec.LookPath("wasm-validate")
	if err != nil {
		return
	}
	path := filepath.Join(t.TempDir(), "m.wasm")
	if err := os.WriteFile(path, wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, path).CombinedOutput(); err != nil {
		t.Errorf("wasm-validate: %v\n%s", err, out)
	}
}

// describe instantiates compiled as the host would (WASI, _initialize, stubs for morph:host/v1 that log
// nothing and find no config) and returns morph_describe's output.
func describe(t *testing.T, r wazero.Runtime, compiled wazero.CompiledModule) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	stubs := map[string]wazero.HostModuleBuilder{}
	for _, d := range compiled.ImportedFunctions() {
		mod, name, _ := d.Import()
		if mod == wasi_snapshot_preview1.ModuleName || mod == interrupt.Module {
			continue
		}
		if stubs[mod] == nil {
			stubs[mod] = r.NewHostModuleBuilder(mod)
		}
		stubs[mod].NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}),
			d.ParamTypes(), d.ResultTypes()).Export(name)
	}
	for mod, b := range stubs {
		if _, err := b.Instantiate(ctx); err != nil {
			t.Fatalf("stub %s: %v", mod, err)
		}
	}
	mod, err := r.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName("").
		WithStartFunctions("_initialize").WithSysNanotime().WithSysWalltime().WithSysNanosleep())
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	defer mod.Close(ctx)
	res, err := mod.ExportedFunction("morph_describe").Call(ctx, 0, 0)
	if err != nil {
		return "error: " + err.Error()
	}
	ptr, n := uint32(res[0]>>32), uint32(res[0])&0x7FFFFFFF
	out, ok := mod.Memory().Read(ptr, n)
	if !ok {
		return fmt.Sprintf("out of bounds: %d bytes at %#x", n, ptr)
	}
	return string(out)
}

// TestErrors: malformed or unsupported input is an *Error naming the section and offset, never a panic.
func TestErrors(t *testing.T) {
	typeSec := sec(1, vec([]byte{0x60, 0, 0}))
	funcSec := sec(3, vec(u32(0)))
	code := func(instrs ...byte) []byte {
		return module(typeSec, funcSec, sec(10, vec(body(append([]byte{0}, instrs...)...))))
	}
	codeAt := 8 + len(typeSec) + len(funcSec) + 5 // the first instruction: after the code section's id, size, count, body size, locals
	cases := []struct {
		name    string
		wasm    []byte
		kind    error
		section string
		offset  int
		msg     string
	}{
		{"empty", nil, wasmbin.ErrMalformed, "header", 0, "magic"},
		{"text", []byte("(module)"), wasmbin.ErrMalformed, "header", 0, "magic"},
		{"version 2", []byte("\x00asm\x02\x00\x00\x00"), wasmbin.ErrMalformed, "header", 4, "version"},
		{"truncated section size", module([]byte{1, 0x80}), wasmbin.ErrMalformed, "type", 10, "unexpected end"},
		{"section overruns the module", module([]byte{1, 5, 0}), wasmbin.ErrMalformed, "type", 10, "5 bytes needed, 1 left"},
		{"overlong LEB", module([]byte{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0}), wasmbin.ErrMalformed, "type", 9, "longer than 5 bytes"},
		{"LEB over 32 bits", module([]byte{1, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F}), wasmbin.ErrMalformed, "type", 9, "overflows"},
		{"unknown section", module(typeSec, sec(14)), wasmbin.ErrMalformed, "unknown", 8 + len(typeSec), "unknown section id 14"},
		{"out of order", module(funcSec, typeSec), wasmbin.ErrMalformed, "type", 8 + len(funcSec), "out of order"},
		{"repeated", module(typeSec, typeSec), wasmbin.ErrMalformed, "type", 8 + len(typeSec), "out of order or repeated"},
		{"unknown opcode", code(0x01, 0x27, 0x0B), wasmbin.ErrMalformed, "code", codeAt + 1, "unknown opcode 0x27"},
		{"legacy try", code(0x06, 0x40, 0x0B, 0x0B), wasmbin.ErrMalformed, "code", codeAt, "unknown opcode 0x6"},
		{"unknown 0xfc", code(0xFC, 18, 0x0B), wasmbin.ErrMalformed, "code", codeAt, "unknown opcode 0xfc 18"},
		{"unassigned SIMD", code(0xFD, 0x9A, 0x01, 0x0B), wasmbin.ErrMalformed, "code", codeAt, "unknown opcode 0xfd 154"},
		{"relaxed SIMD", code(0xFD, 0x80, 0x02, 0x0B), wasmbin.ErrMalformed, "code", codeAt, "unknown opcode 0xfd 256"},
		{"unknown atomic", code(0xFE, 0x04, 0x0B), wasmbin.ErrMalformed, "code", codeAt, "unknown opcode 0xfe 4"},
		{"bad LEB in call", code(0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x0B), wasmbin.ErrMalformed, "code", codeAt + 1, "longer than 5 bytes"},
		{"call out of range", code(0x10, 1, 0x0B), wasmbin.ErrMalformed, "code", codeAt + 1, "function index 1 out of range"},
		{"function count beyond its section", module(typeSec, sec(3, u32(0xFFFFFFFF))), wasmbin.ErrMalformed, "function", 8 + len(typeSec) + 7, "unexpected end"},
		{"truncated immediate", code(0x44, 0, 0), wasmbin.ErrMalformed, "code", codeAt + 1, "8 bytes needed, 2 left"},
		{"body overruns the section", module(typeSec, funcSec, sec(10, vec([]byte{9, 0, 0x0B}))), wasmbin.ErrMalformed, "code", codeAt - 1, "9 bytes needed, 2 left"},
		{"trailing bytes", module(typeSec, funcSec, sec(7, vec(append(str("f"), 0, 0)), []byte{0})), wasmbin.ErrMalformed, "export", 8 + len(typeSec) + len(funcSec) + 7, "1 unexpected bytes"},
		{"bad import kind", module(sec(2, vec(append(append(str("m"), str("f")...), 9)))), wasmbin.ErrMalformed, "import", 15, "unknown import kind 0x9"},
		{"element flags", module(sec(9, vec(u32(8)))), wasmbin.ErrMalformed, "element", 11, "flags 8"},
		{"already imported", module(typeSec, sec(2, vec(append(append(str(interrupt.Module), str(interrupt.Func)...), 0, 0)))),
			interrupt.ErrUnsupported, "import", 8 + len(typeSec) + 3, "already imports morph:internal.interrupt_check"},
		{"stack import", module(typeSec, sec(2, vec(append(append(str(interrupt.Module), str(interrupt.StackFunc)...), 0, 0)))),
			interrupt.ErrUnsupported, "import", 8 + len(typeSec) + 3, "already imports morph:internal.stack_exhausted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := interrupt.Instrument(tc.wasm, 10, hostStack)
			var e *wasmbin.Error
			if !errors.As(err, &e) || !errors.Is(err, tc.kind) {
				t.Fatalf("Instrument = %d bytes, %v; want an *Error of kind %v", len(out), err, tc.kind)
			}
			if e.Section != tc.section {
				t.Errorf("error %q: Section = %q, want %q", err, e.Section, tc.section)
			}
			if e.Offset != tc.offset {
				t.Errorf("error %q: Offset = %d, want %d", err, e.Offset, tc.offset)
			}
			if !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("error %q: Msg = %q, want it to say %q", err, e.Msg, tc.msg)
			}
		})
	}

	t.Run("message", func(t *testing.T) {
		_, err := interrupt.Instrument(code(0x27, 0x0B), 10, hostStack)
		if want := "malformed module: code section at offset 0x17: unknown opcode 0x27"; err == nil || err.Error() != want {
			t.Errorf("err = %v, want %s", err, want)
		}
	})

	t.Run("instrumented twice", func(t *testing.T) {
		once := instrument(t, module(typeSec, funcSec, sec(10, vec(body(0, 0x0B)))), 10)
		if _, err := interrupt.Instrument(once, 10, hostStack); !errors.Is(err, interrupt.ErrUnsupported) {
			t.Errorf("err = %v, want ErrUnsupported", err)
		}
	})
	for _, budget := range []uint32{0, interrupt.MaxBudget + 1} {
		t.Run(fmt.Sprint("budget ", budget), func(t *testing.T) {
			_, err := interrupt.Instrument(module(), budget, hostStack)
			if err == nil {
				t.Fatal("no error, want an argument error")
			}
			if errors.Is(err, wasmbin.ErrMalformed) || errors.Is(err, interrupt.ErrUnsupported) {
				t.Errorf("err = %v, a module's fault; want an argument error", err)
			}
		})
	}
}

// TestTruncated cuts a real module at every length: a cut inside a section is ErrMalformed, a cut at a
// section boundary a smaller module; never a panic.
func TestTruncated(t *testing.T) {
	wasm := wat(t, "semantics")
	boundaries := 0
	for n := 0; n < len(wasm); n++ {
		_, err := interrupt.Instrument(wasm[:n], 10, hostStack)
		switch {
		case err == nil:
			boundaries++
		case !errors.Is(err, wasmbin.ErrMalformed):
			t.Fatalf("cut at %d: %v, want ErrMalformed", n, err)
		}
	}
	if boundaries < 5 || boundaries > 20 {
		t.Errorf("%d cuts instrumented without error, want one per section boundary", boundaries)
	}
}

// TestEmptyModule: an empty module gains the three sections in their places, and compiles.
func TestEmptyModule(t *testing.T) {
	out := instrument(t, module(), 10)
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	compiled, err := r.CompileModule(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	imports := compiled.ImportedFunctions()
	if len(imports) != 2 {
		t.Fatalf("%d imports, want the check and the stack's", len(imports))
	}
	for i, want := range []string{interrupt.Func, interrupt.StackFunc} {
		if len(imports[i].ParamTypes()) != 0 || len(imports[i].ResultTypes()) != 0 {
			t.Errorf("import %d is not () -> ()", i)
		}
		if mod, name, _ := imports[i].Import(); mod != interrupt.Module || name != want {
			t.Errorf("import %s.%s, want %s.%s", mod, name, interrupt.Module, want)
		}
	}
}

// TestEntryChecksOnCycles checks that only the functions on a cycle of calls, direct or through a table,
// get an entry check: at budget 1 the check count is the number of such entries, plus one after each call
// that may run a checkpoint.
func TestEntryChecksOnCycles(t *testing.T) {
	r, c := newRuntime(t, wazero.NewRuntimeConfig())
	mod := instantiate(t, r, instrument(t, wat(t, "cycles"), 1))
	for _, s := range []struct {
		fn     string
		arg    uint64
		checks int64
		want   uint64
	}{
		{"chain", 41, 0, 42},           // three functions, no cycle
		{"even", 10, 6 + 10, 1},        // mutual recursion: one entry check a turn of the cycle, at even
		{"self_indirect", 5, 6 + 5, 0}, // recursion through the table
		{"via_table", 1, 0 + 1, 2},     // an indirect call to a function on no cycle (but the call might reach self_indirect)
	} {
		before := c.calls.Load()
		got, err := mod.ExportedFunction(s.fn).Call(context.Background(), s.arg)
		if err != nil || got[0] != s.want {
			t.Fatalf("%s(%d) = %v, %v; want %d", s.fn, s.arg, got, err, s.want)
		}
		if n := c.calls.Load() - before; n != s.checks {
			t.Errorf("%s(%d): %d checks, want %d", s.fn, s.arg, n, s.checks)
		}
	}
}

// TestChecksAtIndirectCalls checks the case where a cycle runs through the indirect-call node: the check
// then sits before every indirect call, and the taken functions' entries stay unchecked (at budget 1, one
// more check follows every call that may run a checkpoint).
func TestChecksAtIndirectCalls(t *testing.T) {
	r, c := newRuntime(t, wazero.NewRuntimeConfig())
	mod := instantiate(t, r, instrument(t, wat(t, "indirect"), 1))
	for _, s := range []struct {
		fn     string
		args   []uint64
		checks int64
	}{
		{"start", []uint64{5}, 6 + 6}, // six indirect calls
		{"direct", nil, 0 + 1},        // $b entered directly, making no indirect call
	} {
		before := c.calls.Load()
		got, err := mod.ExportedFunction(s.fn).Call(context.Background(), s.args...)
		if err != nil || got[0] != 7 {
			t.Fatalf("%s%v = %v, %v; want 7", s.fn, s.args, got, err)
		}
		if n := c.calls.Load() - before; n != s.checks {
			t.Errorf("%s%v: %d checks, want %d", s.fn, s.args, n, s.checks)
		}
	}
}
