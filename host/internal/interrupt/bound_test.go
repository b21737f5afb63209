package interrupt_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/morphhost/morph/host/internal/interrupt"
)

// countingGuests are the guests of TestWorkBetweenChecks: each counts its work in an exported global w, 4
// instructions an increment, and exports run().
func countingGuests() []struct {
	name string
	wasm []byte
} {
	inc := []byte{opGlobalGet, 0, 0x41, 1, opI32Add, opGlobalSet, 0} // w++: 4 units
	incs := func(n int) []byte { return repeat(n, inc...) }
	// countdown runs code n times, counting in local 0.
	countdown := func(n int32, code ...byte) []byte {
		return cat(i32c(n), []byte{opLocalSet, 0, opLoop, 0x40}, code,
			[]byte{opLocalGet, 0, 0x41, 1, opI32Sub, 0x22, 0, 0x0D, 0, opEnd})
	}
	run := func(code ...byte) []byte { return body(cat([]byte{1, 1, typeI32}, code, []byte{opEnd})...) }
	fn := func(code ...byte) []byte { return body(cat([]byte{0}, code, []byte{opEnd})...) }
	// recursion is r(n): w++; if n { r(n-1) }; tail increments.
	recursion := func(tail int) []byte {
		return fn(cat(inc, []byte{opLocalGet, 0, opIf, 0x40, opLocalGet, 0, 0x41, 1, opI32Sub, opCall, 1, opEnd}, incs(tail))...)
	}
	// guest is a module of types 0 () -> () and 1 (i32) -> (), functions of those types, the exports run
	// (function 0) and w, and a table of the functions listed in elem.
	guest := func(types []byte, bodies [][]byte, elem ...byte) []byte {
		funcs := make([][]byte, len(types))
		for i, ty := range types {
			funcs[i] = []byte{ty}
		}
		items := make([][]byte, len(elem))
		for i, f := range elem {
			items[i] = []byte{f}
		}
		return module(sec(1, vec([]byte{0x60, 0, 0}, []byte{0x60, 1, typeI32, 0})), sec(3, vec(funcs...)),
			sec(4, vec(append([]byte{typeFunc}, limits(uint32(len(elem)), uint32(len(elem)))...))),
			sec(6, vec([]byte{typeI32, 1, 0x41, 0, opEnd})),
			sec(7, vec(export("run", 0), append(str("w"), 3, 0))),
			sec(9, vec(cat([]byte{0}, i32c(0), []byte{opEnd}, vec(items...)))),
			sec(10, vec(bodies...)))
	}
	tree := [][]byte{run(opCall, 1)}
	treeTypes := []byte{0}
	for i := 1; i < 17; i++ {
		tree = append(tree, fn(cat(inc, []byte{opCall, byte(i + 1), opCall, byte(i + 1)})...))
		treeTypes = append(treeTypes, 0)
	}
	tree = append(tree, fn(incs(10)...))
	treeTypes = append(treeTypes, 0)
	const depth = 5000
	return []struct {
		name string
		wasm []byte
	}{
		{"straight-line loop body", guest([]byte{0}, [][]byte{run(countdown(10, incs(25_000)...)...)})},
		{"loop calling a function", guest([]byte{0, 0}, [][]byte{run(countdown(100, opCall, 1)...), fn(incs(2000)...)})},
		{"loop calling a long function", guest([]byte{0, 0}, [][]byte{run(countdown(10, opCall, 1)...), fn(incs(25_000)...)})},
		{"loop calling a function through a table", guest([]byte{0, 0},
			[][]byte{run(countdown(100, cat(i32c(0), []byte{0x11, 0, 0})...)...), fn(incs(2000)...)}, 1)},
		{"if, heavier arm taken 3 times in 4", guest([]byte{0}, [][]byte{run(countdown(200,
			cat([]byte{opLocalGet, 0, 0x41, 4, 0x70, opIf, 0x40}, incs(2000), []byte{0x05}, incs(100), []byte{opEnd})...)...)})},
		{"br_table", guest([]byte{0}, [][]byte{run(countdown(200, cat([]byte{0x02, 0x40, 0x02, 0x40, 0x02, 0x40,
			opLocalGet, 0, 0x41, 3, 0x70, 0x0E, 2, 0, 1, 2, opEnd}, incs(100), []byte{opBr, 1, opEnd}, incs(2000), []byte{opEnd})...)...)})},
		{"br_if to the heavier code, taken 3 times in 4", guest([]byte{0}, [][]byte{run(countdown(200, cat([]byte{0x02, 0x40, 0x02, 0x40,
			opLocalGet, 0, 0x41, 4, 0x70, 0x0D, 0}, incs(100), []byte{opBr, 1, opEnd}, incs(2000), []byte{opEnd})...)...)})},
		{"tree of 2^17 calls", guest(treeTypes, tree)},
		// Each return runs a little work after the recursive call, which no checkpoint could have paid
		// for if it were paid before the call (5,000 frames of 12 units: 60,000 units).
		{"recursion returning through short tails", guest([]byte{0, 1},
			[][]byte{run(cat(i32c(depth), []byte{opCall, 1})...), recursion(3)})},
		{"recursion returning through long tails", guest([]byte{0, 1},
			[][]byte{run(cat(i32c(depth), []byte{opCall, 1})...), recursion(10)})},
		// run enters the recursion through the table: the indirect calls are where the cycle is checked.
		{"recursion through a table", guest([]byte{0, 1}, [][]byte{run(cat(i32c(50), i32c(0), []byte{0x11, 1, 0})...),
			fn(cat(incs(1000), []byte{opLocalGet, 0, opIf, 0x40, opLocalGet, 0, 0x41, 1, opI32Sub, 0x41, 0, 0x11, 1, 0, opEnd}, incs(1000))...)}, 1)},
	}
}

// TestWorkBetweenChecks checks the bound on the work a guest runs between two checks: budget +
// interrupt.MaxWeight units, even when returns unwind a deep recursion.
// Each guest counts its own work, and the check reads the count: so the work counted between two checks
// is a part of what ran, and must stay within the bound. Each guest puts most of its work where a
// checkpoint that undercharged would let it run on: a long straight line, a function called in a loop
// (directly or through a table), the heavier arm of an if, the heavier target of a br_table or br_if, a
// tree of calls, the returns of a recursion.
func TestWorkBetweenChecks(t *testing.T) {
	const budget = 20_000
	for _, tc := range countingGuests() {
		t.Run(tc.name, func(t *testing.T) {
			r, c := newRuntime(t, wazero.NewRuntimeConfig())
			mod := instantiate(t, r, instrument(t, tc.wasm, budget))
			w := mod.ExportedGlobal("w")
			var last, most uint64
			note := func() {
				v := uint64(uint32(w.Get()))
				most, last = max(most, 4*(v-last)), v
			}
			c.hook = note
			if _, err := mod.ExportedFunction("run").Call(context.Background()); err != nil {
				t.Fatal(err)
			}
			note() // the work after the last check
			if bound := uint64(budget + interrupt.MaxWeight); most > bound || c.calls.Load() < 3 {
				t.Errorf("%d units counted in all, %d checks, %d between two checks at most; want at most %d, and 3 checks at least",
					4*last, c.calls.Load(), most, bound)
			}
			t.Logf("%d units counted in all, %d checks, %d between two checks at most", 4*last, c.calls.Load(), most)
		})
	}
}

// TestPlanBounds checks the plan's own bounds on many modules, without running them: every checkpoint
// weighs between 1 and interrupt.MaxWeight, and no function leaves more than interrupt.MaxSegment unpaid to
// its callers. Besides the guests of the other tests and real modules, a function whose if blocks are
// nested directly (their conditions pushed beforehand), where no instruction lies between two of them to
// place a checkpoint after.
func TestPlanBounds(t *testing.T) {
	const nested = 30_000
	guests := map[string][]byte{
		"long": longModule(),
		"nested ifs": module(sec(1, vec([]byte{0x60, 1, typeI32, 0})), sec(3, vec(u32(0))),
			sec(10, vec(body(cat([]byte{0}, repeat(nested, opLocalGet, 0), repeat(nested, opIf, 0x40), repeat(nested, opEnd), []byte{opEnd})...)))),
	}
	for _, g := range hostileGuests() {
		guests[g.name] = g.wasm
	}
	for _, g := range countingGuests() {
		guests[g.name] = g.wasm
	}
	paths, _ := filepath.Glob("../../../guests/testdata/*.wasm")
	paths = append(paths, "../../../examples/rust-hooks/target/wasm32-unknown-unknown/release/rust_hooks.wasm",
		"../../../examples/go-hooks/go-hooks-tinygo.wasm")
	for _, path := range paths {
		if b, err := os.ReadFile(path); err == nil {
			guests[filepath.Base(path)] = b
		}
	}
	for name, wasm := range guests {
		checkPlan(t, name, wasm)
	}
}

// checkPlan fails t if a checkpoint Instrument plans for wasm weighs less than 1 or more than
// interrupt.MaxWeight, or a function leaves more than interrupt.MaxSegment unpaid.
func checkPlan(t *testing.T, name string, wasm []byte) {
	t.Helper()
	weights, unpaid, err := interrupt.Plan(wasm)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	for f, ws := range weights {
		for _, w := range ws {
			if w < 1 || w > interrupt.MaxWeight {
				t.Errorf("%s: function %d has a checkpoint of weight %d, want 1 to %d", name, f, w, interrupt.MaxWeight)
			}
		}
		if unpaid[f] > interrupt.MaxSegment {
			t.Errorf("%s: function %d leaves %d units unpaid, want at most %d", name, f, unpaid[f], interrupt.MaxSegment)
		}
	}
}
