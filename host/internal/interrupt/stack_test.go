package interrupt_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// bigFrames is a module exporting big(n): a recursion n deep whose every frame keeps locals i64 locals
// live across its call, and returns n.
func bigFrames(locals int) []byte {
	code := []byte{opLocalGet, 0, 0xAD, opLocalSet, 1} // local 1 = i64(n)
	for i := 2; i <= locals; i++ {
		code = cat(code, []byte{opLocalGet, 1}, i64c(i), []byte{0x7C, opLocalSet}, u32(uint32(i))) // local i = local 1 + i
	}
	code = cat(code, []byte{opLocalGet, 0, opIf, 0x40, opLocalGet, 0}, i32c(1), []byte{opI32Sub, opCall, 0, opDrop, 0x0B})
	code = append(code, opLocalGet, 1)
	for i := 2; i <= locals; i++ {
		code = cat(code, []byte{opLocalGet}, u32(uint32(i)), []byte{0x7D}) // i64.sub: the locals cancel out
		code = cat(code, i64c(i), []byte{0x7C, opLocalGet, 1, 0x7C})
	}
	code = append(code, opEnd)
	decl := cat([]byte{1}, u32(uint32(locals)), []byte{typeI64})
	return module(sec(1, vec([]byte{0x60, 1, typeI32, 1, typeI64})), sec(3, vec(u32(0))), sec(7, vec(export("big", 0))),
		sec(10, vec(body(append(decl, code...)...))))
}

// i64c is i64.const v.
func i64c(v int) []byte { return wasmbin.AppendS32([]byte{opI64Const}, int32(v)) }

// stackCase is a recursion export fn(n, args...) of wasm, returning n, and what a recursion n deep
// charges the budget, given the charges by defined function and at indirect calls.
type stackCase struct {
	name string
	wasm []byte
	fn   string
	args []uint64
	used func(charges []int32, indirect int32, n int) int64
}

// TestStackBudget runs recursions, small frames and big, direct, through a cycle of two functions and
// through a table, to the deepest the budget allows by what Instrument charges, then one deeper: that
// must end the call through StackFunc. The instance's budget must come back whole after every return,
// by every exit: the deepest recursion, repeated, never runs out (a refund left out would drain it).
func TestStackBudget(t *testing.T) {
	const budget = 1 << 20
	stack, big := wat(t, "stack"), bigFrames(300)
	cases := []stackCase{
		{"big frames", big, "big", nil, func(c []int32, _ int32, n int) int64 { return int64(n+1) * int64(c[0]) }},
		{"cycle of two", stack, "even", nil, func(c []int32, _ int32, n int) (sum int64) {
			for k := 0; k <= n; k++ {
				sum += int64(c[1+k%2]) // $even, $odd, $even...
			}
			return sum
		}},
		{"through the table", stack, "indirect", nil, func(c []int32, ind int32, n int) int64 {
			if c[4] != 0 || ind == 0 {
				t.Fatalf("$inner's entry charges %d, the indirect calls %d: want the calls charged", c[4], ind)
			}
			return int64(c[3]) + int64(n+1)*int64(ind)
		}},
	}
	for how, exit := range []string{"return", "br", "br_if", "br_table", "end"} {
		cases = append(cases, stackCase{"direct, by " + exit, stack, "direct", []uint64{uint64(how)}, func(c []int32, _ int32, n int) int64 { return int64(n+1) * int64(c[0]) }})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			charges, indirect, _, err := interrupt.Stack(tc.wasm)
			if err != nil {
				t.Fatal(err)
			}
			deepest := 0
			for tc.used(charges, indirect, deepest+1) <= budget {
				deepest++
			}
			if deepest < 10 {
				t.Fatalf("a budget of %d bytes allows a recursion only %d deep", budget, deepest)
			}
			r, _ := newRuntime(t, wazero.NewRuntimeConfig())
			wasm, err := interrupt.Instrument(tc.wasm, hostBudget, budget)
			if err != nil {
				t.Fatal(err)
			}
			fn := instantiate(t, r, wasm).ExportedFunction(tc.fn)
			run := func(n int) error {
				got, err := fn.Call(context.Background(), append([]uint64{uint64(n)}, tc.args...)...)
				if err == nil && got[0] != uint64(n) {
					t.Fatalf("%s(%d) = %d", tc.fn, n, got[0])
				}
				return err
			}
			for range 20 {
				if err := run(deepest); err != nil {
					t.Fatalf("%s(%d), %d bytes: %v", tc.fn, deepest, tc.used(charges, indirect, deepest), err)
				}
			}
			if err := run(deepest + 1); !errors.Is(err, errStack) {
				t.Fatalf("%s(%d), %d bytes: %v, want the stack budget exhausted", tc.fn, deepest+1, tc.used(charges, indirect, deepest+1), err)
			}
		})
	}
}

// TestStackUnaccounted: a module that throws, catches or tail-calls charges nothing (an exception or a
// tail call would skip refunds); nor does a budget of 0.
func TestStackUnaccounted(t *testing.T) {
	for name, wasm := range map[string][]byte{"exceptions": typedModule(), "tail calls": wat(t, "tailcall", "--enable-tail-call")} {
		charges, indirect, _, err := interrupt.Stack(wasm)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if charges != nil {
			t.Errorf("%s: charges %v, want none", name, charges)
		}
		if indirect != 0 {
			t.Errorf("%s: charges at %d indirect calls, want none", name, indirect)
		}
	}
	r, _ := newRuntime(t, wazero.NewRuntimeConfig())
	wasm, err := interrupt.Instrument(bigFrames(300), hostBudget, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := instantiate(t, r, wasm).ExportedFunction("big").Call(context.Background(), 1000); err != nil {
		t.Fatalf("big(1000) without a stack budget: %v", err)
	}
}

// recursion is a module whose function 0, r(n i32) -> i64, declares locals, runs before, calls r(n) (with
// params-1 more i64 arguments, its own parameters), then runs after, which must leave the i64 on the
// stack as the result; function 1 is nop () -> (), global 0 a mutable i32.
func recursion(locals, before, after []byte, params int) []byte {
	typ := cat([]byte{0x60}, u32(uint32(params)), []byte{typeI32}, bytes.Repeat([]byte{typeI64}, params-1), []byte{1, typeI64})
	code := cat(locals, before)
	for i := range params {
		code = cat(code, []byte{opLocalGet}, u32(uint32(i)))
	}
	code = cat(code, []byte{opCall, 0}, after, []byte{opEnd})
	return module(sec(1, vec(typ, []byte{0x60, 0, 0})), sec(3, vec(u32(0), u32(1))),
		sec(6, vec([]byte{typeI32, 1, 0x41, 0, opEnd})), sec(7, vec(export("r", 0))),
		sec(10, vec(append(u32(uint32(len(code))), code...), body(0, opEnd))))
}

// TestFrameEstimates checks the frame estimate against what wazero v1.12 compiles on amd64 (measured
// with a build of it that reports every function's frame) for the shapes that make frames large: many
// values live across a call, in locals (i64 or v128), on the operand stack or as arguments, and locals
// redefined in nested loops around a call (a frame quadratic in the code's size). An estimate below a
// frame would let a recursion take more stack than the budget.
func TestFrameEstimates(t *testing.T) {
	const vars = 1000
	decl := func(n int, typ byte) []byte { return cat([]byte{1}, u32(uint32(n)), []byte{typ}) }
	var live, sum, splat, vsum, push, adds, nested, inner, exits []byte
	for i := 1; i <= vars; i++ {
		live = cat(live, []byte{opGlobalGet, 0, 0xAD, opLocalSet}, u32(uint32(i)))       // local i = i64(g)
		sum = cat(sum, []byte{opLocalGet}, u32(uint32(i)), []byte{0x7C})                 // + local i
		splat = cat(splat, []byte{opGlobalGet, 0, 0xFD, 17, opLocalSet}, u32(uint32(i))) // local i = i32x4.splat(g)
		vsum = cat(vsum, []byte{opLocalGet}, u32(uint32(i)), []byte{0xFD, 174, 1})       // i32x4.add
		inner = cat(inner, []byte{opLocalGet}, u32(uint32(i)), []byte{opGlobalGet, 0, 0xAD, 0x7C, opLocalSet}, u32(uint32(i)))
	}
	for range 20_000 {
		push, adds = append(push, opGlobalGet, 0, 0xAD), append(adds, 0x7C)
	}
	const loops = 10
	for l := range loops {
		nested = append(nested, opLoop, 0x40, opCall, 1)
		exits = cat(exits, []byte{opGlobalGet, 0}, i32c(int32(-1-l)), []byte{0x46, 0x0D, 0, opEnd}) // br_if 0 (g == -1-l)
	}
	nested = cat(nested, inner, []byte{opLocalGet, 0, opCall, 0, opDrop}, exits)
	zero128 := append([]byte{0xFD, 12}, make([]byte, 16)...)
	for _, tc := range []struct {
		name  string
		wasm  []byte
		frame int64 // measured
	}{
		{"1,000 live i64 locals", recursion(decl(vars, typeI64), live, sum, 1), 8064},
		{"1,000 live v128 locals", recursion(decl(vars, 0x7B), splat, cat([]byte{opDrop}, zero128, vsum, []byte{0xFD, 27, 0, 0xAC}), 1), 16032},
		{"20,000 values on the operand stack", recursion([]byte{0}, push, adds, 1), 160064},
		{"999 parameters", recursion([]byte{0}, nil, nil, 999), 15936},
		{"1,000 locals redefined in 10 nested loops", recursion(decl(vars, typeI64), nested, sum, 1), 87792},
	} {
		validate(t, tc.wasm)
		_, _, frames, err := interrupt.Stack(tc.wasm)
		if err != nil {
			t.Fatal(err)
		}
		if frames[0] < tc.frame {
			t.Errorf("%s: estimated %d bytes, wazero's frame is %d", tc.name, frames[0], tc.frame)
		}
		t.Logf("%s: estimated %d bytes, %.2f times wazero's frame", tc.name, frames[0], float64(frames[0])/float64(tc.frame))
	}
}
