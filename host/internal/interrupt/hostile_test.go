package interrupt_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/morphhost/morph/host/internal/interrupt"
)

// hostBudget is the budget the host instruments with (host/internal/wasmrt's InterruptPeriod), and hostStack
// its default stack budget (host.DefaultMaxStackBytes).
const (
	hostBudget = 100_000
	hostStack  = 16 << 20
)

// Opcodes of the generated guests.
const (
	opLoop, opIf, opEnd, opBr, opDrop  = 0x03, 0x04, 0x0B, 0x0C, 0x1A
	opCall, opLocalGet, opLocalSet     = 0x10, 0x20, 0x21
	opGlobalGet, opGlobalSet, opI64Div = 0x23, 0x24, 0x80
	opI32Add, opI32Sub, opRefNullFunc  = 0x6A, 0x6B, 0xD0
	opI64Const                         = 0x42
	typeFunc, typeI32, typeI64         = 0x70, 0x7F, 0x7E
)

// divs is a straight line of 2n instructions that takes n divisions' time: it divides the i64 on the stack
// n times by the local d (which holds 1, passed by the caller, so that the compiler cannot know the result).
func divs(n int, d byte) []byte { return repeat(n, opLocalGet, d, opI64Div) }

// hostileTypes are the generated guests' types: 0 (i64) -> (), their export run(d), which they call with a
// divisor of 1; 1 (i64 i64) -> (i64); 2 () -> (); 3 (i32 i64) -> ().
var hostileTypes = sec(1, vec([]byte{0x60, 1, typeI64, 0}, []byte{0x60, 2, typeI64, typeI64, 1, typeI64},
	[]byte{0x60, 0, 0}, []byte{0x60, 2, typeI32, typeI64, 0}))

// hostileGuests are guests that try to run long past their deadline on few checkpoints, each through a
// different kind of work that one checkpoint used to count as one: a loop of 16 MiB bulk instructions,
// a loop over a long straight-line body, a loop calling a long function, a call tree that doubles at
// each of its 40 levels (2^40 calls, no loop, no recursion), and a deep recursion whose returns each run
// long code (unwound without a checkpoint). Before work was weighed, each ran seconds past the deadline
// (the call tree, hours). Each exports run(i64), to call with 1.
func hostileGuests() []struct {
	name string
	wasm []byte
} {
	run := func(code ...[]byte) []byte { // run(d), local 1 an i64: code, then the body's end
		return body(append(append([]byte{1, 1, typeI64}, cat(code...)...), opEnd)...)
	}
	loop := func(code ...[]byte) []byte { return cat([]byte{opLoop, 0x40}, cat(code...), []byte{opBr, 0, opEnd}) }
	bulk := func(name string, memory, table []byte, op ...byte) struct {
		name string
		wasm []byte
	} {
		var sections [][]byte
		if table != nil {
			sections = append(sections, sec(4, vec(append([]byte{typeFunc}, table...))))
		}
		if memory != nil {
			sections = append(sections, sec(5, vec(memory)))
		}
		return struct {
			name string
			wasm []byte
		}{name, module(append(append([][]byte{hostileTypes, sec(3, vec(u32(0)))}, sections...),
			sec(7, vec(export("run", 0))), sec(10, vec(run(loop(op)))))...)}
	}
	minus1 := []byte{opI64Const, 0x7F, opLocalSet, 1} // x = 2^64-1: a division of all 64 bits, the slowest
	const mib16 = 16 << 20
	const big = 30_000 // divisions in the long code: about 0.15 ms
	depth, tail := 100_000, 3_000
	dag := [][]byte{run([]byte{opCall, 1})}
	for i := range 40 {
		dag = append(dag, body(0, opCall, byte(i+2), opCall, byte(i+2), opEnd))
	}
	dag = append(dag, body(0, opEnd))
	dagFuncs := [][]byte{u32(0)}
	for range 41 {
		dagFuncs = append(dagFuncs, u32(2))
	}
	return []struct {
		name string
		wasm []byte
	}{
		bulk("memory.fill", limits(256, 256), nil, cat(i32c(0), i32c(0), i32c(mib16), []byte{0xFC, 11, 0})...),
		bulk("memory.copy", limits(257, 257), nil, cat(i32c(0), i32c(1<<16), i32c(mib16), []byte{0xFC, 10, 0, 0})...),
		bulk("table.fill", nil, limits(1<<20, 1<<20), cat(i32c(0), []byte{opRefNullFunc, typeFunc}, i32c(1<<20), []byte{0xFC, 17, 0})...),
		{"straight-line loop body", module(hostileTypes, sec(3, vec(u32(0))), sec(7, vec(export("run", 0))),
			sec(10, vec(run(minus1, loop([]byte{opLocalGet, 1}, divs(big, 0), []byte{opLocalSet, 1})))))},
		{"loop calling a long function", module(hostileTypes, sec(3, vec(u32(0), u32(1))), sec(7, vec(export("run", 0))),
			sec(10, vec(run(minus1, loop([]byte{opLocalGet, 1, opLocalGet, 0, opCall, 1, opLocalSet, 1})),
				body(cat([]byte{0, opLocalGet, 0}, divs(big, 1), []byte{opEnd})...))))},
		{"call tree of 2^40 calls", module(hostileTypes, sec(3, vec(dagFuncs...)), sec(7, vec(export("run", 0))), sec(10, vec(dag...)))},
		// r(n, d): if n { r(n-1, d) }, then tail divisions; run calls r(depth, d).
		{"deep recursion unwinding long returns", module(hostileTypes, sec(3, vec(u32(0), u32(3))), sec(7, vec(export("run", 0))),
			sec(10, vec(run(i32c(int32(depth)), []byte{opLocalGet, 0, opCall, 1}),
				body(cat([]byte{0, opLocalGet, 0, opIf, 0x40, opLocalGet, 0}, i32c(1), []byte{opI32Sub, opLocalGet, 1, opCall, 1, opEnd},
					[]byte{opI64Const, 0x7F}, divs(tail, 1), []byte{opDrop, opEnd})...))))},
	}
}

// TestHostileWork runs each hostile guest with a 100 ms deadline: it must be stopped soon after (within 1 s,
// a generous bound for -race and a busy machine; the bound is some milliseconds: see BenchmarkCheckGap).
// Without a stack budget: the deep recursion would end on it first.
func TestHostileWork(t *testing.T) {
	for _, g := range hostileGuests() {
		t.Run(g.name, func(t *testing.T) {
			r, _ := newRuntime(t, wazero.NewRuntimeConfig())
			wasm, err := interrupt.Instrument(g.wasm, hostBudget, 0)
			if err != nil {
				t.Fatal(err)
			}
			run := instantiate(t, r, wasm).ExportedFunction("run")
			const deadline = 100 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				_, err := run.Call(ctx, 1)
				done <- err
			}()
			select {
			case err := <-done:
				if elapsed := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || elapsed > time.Second {
					t.Errorf("returned %v after %v, want context.DeadlineExceeded soon after %v", err, elapsed, deadline)
				}
			case <-time.After(10 * time.Second): // the guest spins on: nothing can stop it
				t.Fatalf("still running 10 s after the call, with a deadline at %v", deadline)
			}
		})
	}
}
