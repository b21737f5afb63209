package extism

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	sdk "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"

	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/internal/testenv"
)

// kernelCtx is ctx as the context of a call on an instance whose Kernel is
// k: what the extism:host/env functions read.
func kernelCtx(ctx context.Context, k *Kernel) context.Context {
	return (&instance{kernel: k}).ctx(ctx)
}

// newTestKernel is a kernel of at most maxBytes in its own arena,
// released when the test ends.
func newTestKernel(tb testing.TB, maxBytes uint64, opts KernelOptions) *Kernel {
	a := &memory.Arena{}
	tb.Cleanup(a.Release)
	return NewKernel(a, maxBytes, opts)
}

// envCall calls the extism:host/env function name on k as a guest would,
// and answers its results, or the Trap it panicked with.
func envCall(k *Kernel, name string, args ...uint64) (results []uint64, trap *Trap) {
	i := slices.IndexFunc(kernelFunctions, func(f envFunction) bool { return f.name == name })
	if i < 0 {
		panic("no extism:host/env function " + name)
	}
	f := kernelFunctions[i]
	stack := make([]uint64, max(len(f.params), len(f.results)))
	copy(stack, args)
	defer func() {
		if r := recover(); r != nil {
			t, ok := r.(*Trap)
			if !ok {
				panic(r)
			}
			results, trap = nil, t
		}
	}()
	f.fn(kernelCtx(context.Background(), k), nil, stack)
	return stack[:len(f.results)], nil
}

// call is envCall for a call that must not trap; it answers the first
// result (0 for none).
func call(t *testing.T, k *Kernel, name string, args ...uint64) uint64 {
	t.Helper()
	r, trap := envCall(k, name, args...)
	if trap != nil {
		t.Fatalf("%s%v trapped: %v", name, args, trap)
	}
	if len(r) == 0 {
		return 0
	}
	return r[0]
}

// storeBlock allocates a block holding s through the guest's functions.
func storeBlock(t *testing.T, k *Kernel, s string) uint64 {
	t.Helper()
	p := call(t, k, "alloc", uint64(len(s)))
	for i := range len(s) {
		call(t, k, "store_u8", p+uint64(i), uint64(s[i]))
	}
	return p
}

// TestKernel checks each operation's semantics (Extism's kernel v1.7.0's,
// see Kernel), its traps, and that each touches O(1) block headers.
func TestKernel(t *testing.T) {
	const maxBytes = 1 << 20
	for _, c := range []struct {
		name string
		run  func(t *testing.T, k *Kernel)
	}{
		{"alloc", func(t *testing.T, k *Kernel) {
			if p := call(t, k, "alloc", 0); p != 0 {
				t.Fatalf("alloc(0) = %d, want 0 (null)", p)
			}
			p := call(t, k, "alloc", 5)
			q := call(t, k, "alloc", 9)
			if p != 32 || q != p+8+kernelHeader {
				t.Fatalf("alloc(5), alloc(9) = %d, %d: want 32 and the next 8-aligned data after a header", p, q)
			}
			if n, m := call(t, k, "length", p), call(t, k, "length_unsafe", q); n != 5 || m != 9 {
				t.Fatalf("lengths %d, %d, want 5, 9", n, m)
			}
			if v := call(t, k, "load_u64", q); v != 0 {
				t.Fatalf("a new block holds %#x, want zeros", v)
			}
			if p := call(t, k, "alloc", maxBytes); p != 0 {
				t.Fatalf("alloc past the memory's limit = %d, want 0", p)
			}
			if p := call(t, k, "alloc", 1<<40); p != 0 {
				t.Fatalf("alloc(2^40) = %d, want 0", p)
			}
		}},
		{"grows 64 KiB at a time", func(t *testing.T, k *Kernel) {
			if n := call(t, k, "memory_bytes"); n != 0 {
				t.Fatalf("memory_bytes before any block = %d, want 0", n)
			}
			call(t, k, "alloc", 1)
			if n := call(t, k, "memory_bytes"); n != kernelGrow {
				t.Fatalf("memory_bytes = %d, want %d", n, kernelGrow)
			}
			p := call(t, k, "alloc", 100_000)
			if n := call(t, k, "memory_bytes"); p == 0 || n != 2*kernelGrow {
				t.Fatalf("alloc(100000) = %d, memory_bytes %d, want a block and %d", p, n, 2*kernelGrow)
			}
			call(t, k, "store_u8", p+99_999, 7)
			if v := call(t, k, "load_u8", p+99_999); v != 7 {
				t.Fatalf("the block's last byte reads %d, want 7", v)
			}
		}},
		{"free and reuse", func(t *testing.T, k *Kernel) {
			p := call(t, k, "alloc", 100) // capacity 104: class 6 (64 to 127 bytes)
			call(t, k, "free", p)
			if n := call(t, k, "length", p); n != 0 {
				t.Fatalf("length of a freed block = %d, want 0", n)
			}
			call(t, k, "free", p) // a double free changes nothing
			if q := call(t, k, "alloc", 64); q != p || call(t, k, "length", q) != 64 {
				t.Fatalf("alloc(64) after freeing a 104-byte block = %d (length %d), want it reused: %d, 64", q, call(t, k, "length", q), p)
			}
			if q := call(t, k, "alloc", 64); q == p || q == 0 {
				t.Fatalf("a second alloc(64) = %d: the block was listed twice", q)
			}
			call(t, k, "free", p)
			if q := call(t, k, "alloc", 65); q == p {
				t.Fatalf("alloc(65) reused a block of class 6, whose blocks need not hold 65 bytes")
			}
		}},
		{"not a block", func(t *testing.T, k *Kernel) {
			p := call(t, k, "alloc", 16)
			for _, q := range []uint64{0, 1, 16, p - 8, p + 8, p + 16, 1 << 40, ^uint64(0)} {
				if n := call(t, k, "length", q); n != 0 {
					t.Errorf("length(%d) = %d, want 0", q, n)
				}
				call(t, k, "free", q)
				if _, ok := k.Read(q); ok {
					t.Errorf("Read(%d) answered a block", q)
				}
			}
			if n := call(t, k, "length", p); n != 16 {
				t.Fatalf("the block's length is %d after frees of other offsets, want 16", n)
			}
		}},
		{"load and store", func(t *testing.T, k *Kernel) {
			p := call(t, k, "alloc", 16)
			call(t, k, "store_u64", p, 0x0807060504030201)
			call(t, k, "store_u8", p+8, 0xff)
			if v, b := call(t, k, "load_u64", p), call(t, k, "load_u8", p+1); v != 0x0807060504030201 || b != 2 {
				t.Fatalf("load_u64, load_u8 = %#x, %d", v, b)
			}
			// Anywhere in the memory, as go-sdk's: headers included.
			if v := call(t, k, "load_u64", p-kernelHeader); v != 16|16<<32 {
				t.Fatalf("the header reads %#x", v)
			}
			end := call(t, k, "memory_bytes")
			call(t, k, "load_u64", end-8)
			for _, c := range []struct {
				fn   string
				args []uint64
			}{
				{"load_u8", []uint64{end}}, {"load_u64", []uint64{end - 7}}, {"store_u8", []uint64{end, 1}},
				{"store_u64", []uint64{end - 4, 1}}, {"load_u64", []uint64{^uint64(0) - 3}}, {"store_u64", []uint64{1 << 63, 1}},
			} {
				_, trap := envCall(k, c.fn, c.args...)
				want := fmt.Sprintf("extism:host/env.%s: offset %d is outside the Extism memory (%d bytes)", c.fn, c.args[0], end)
				if trap == nil || trap.Func != c.fn || trap.Error() != want {
					t.Errorf("%s%v: %v, want the trap %q", c.fn, c.args, trap, want)
				}
			}
		}},
		{"input", func(t *testing.T, k *Kernel) {
			if err := k.SetInput([]byte("hello, kernel")); err != nil {
				t.Fatal(err)
			}
			in := call(t, k, "input_offset")
			if n := call(t, k, "input_length"); n != 13 || call(t, k, "length", in) != 13 {
				t.Fatalf("input_length %d, length(input) %d, want 13", n, call(t, k, "length", in))
			}
			if b, v := call(t, k, "input_load_u8", 7), call(t, k, "input_load_u64", 0); b != 'k' || v != binary.LittleEndian.Uint64([]byte("hello, k")) {
				t.Fatalf("input_load_u8(7), input_load_u64(0) = %q, %#x", rune(b), v)
			}
			call(t, k, "input_load_u64", 8) // past the input's 13 bytes, within the memory: as go-sdk
			end := call(t, k, "memory_bytes")
			if _, trap := envCall(k, "input_load_u8", end-in); trap == nil || trap.Func != "input_load_u8" {
				t.Fatalf("input_load_u8 past the memory: %v, want a trap", trap)
			}
			if _, trap := envCall(k, "input_load_u64", ^uint64(0)); trap == nil || trap.Func != "input_load_u64" {
				t.Fatal("input_load_u64 of an offset overflowing: no trap")
			}
			call(t, k, "free", in)
			if n := call(t, k, "input_length"); n != 0 {
				t.Fatalf("input_length after freeing the input = %d, want 0", n)
			}
			p := storeBlock(t, k, "xy")
			call(t, k, "input_set", p, 2)
			if call(t, k, "input_offset") != p || call(t, k, "input_length") != 2 || call(t, k, "input_load_u8", 1) != 'y' {
				t.Fatal("input_set did not set the input")
			}
			k.Reset()
			if err := k.SetInput(nil); err != nil || call(t, k, "input_offset") != 0 || call(t, k, "input_length") != 0 {
				t.Fatalf("an empty input: %v, offset %d, length %d; want no block", err, call(t, k, "input_offset"), call(t, k, "input_length"))
			}
			err := k.SetInput(make([]byte, maxBytes))
			if !errors.Is(err, guest.ErrInputTooLarge) || !strings.Contains(err.Error(), "raise memory_mb") {
				t.Fatalf("an input larger than the memory: %v, want ErrInputTooLarge naming memory_mb", err)
			}
		}},
		{"output and error", func(t *testing.T, k *Kernel) {
			if out, err := k.Output(10); err != nil || len(out) != 0 {
				t.Fatalf("no output set: %q, %v", out, err)
			}
			p := storeBlock(t, k, "result")
			call(t, k, "output_set", p, 6)
			if call(t, k, "output_offset") != p || call(t, k, "output_length") != 6 {
				t.Fatal("output_offset, output_length do not answer what output_set set")
			}
			if out, err := k.Output(6); err != nil || string(out) != "result" {
				t.Fatalf("Output = %q, %v", out, err)
			}
			if _, err := k.Output(5); !errors.Is(err, guest.ErrOutputTooLarge) {
				t.Fatalf("an output over the limit: %v", err)
			}
			end := call(t, k, "memory_bytes")
			for _, r := range [][2]uint64{{end - 2, 3}, {1 << 40, 1}, {8, 1 << 40}} {
				call(t, k, "output_set", r[0], r[1])
				if _, err := k.Output(1 << 62); !errors.Is(err, guest.ErrBadOutput) {
					t.Errorf("output [%d, +%d): %v, want ErrBadOutput", r[0], r[1], err)
				}
			}
			if msg := k.Error(); msg != nil || call(t, k, "error_get") != 0 {
				t.Fatalf("an error %q before error_set", msg)
			}
			e := storeBlock(t, k, "boom")
			call(t, k, "error_set", e)
			if msg := k.Error(); string(msg) != "boom" || call(t, k, "error_get") != e {
				t.Fatalf("Error = %q after error_set", msg)
			}
			call(t, k, "error_set", e+8)
			if msg := k.Error(); msg != nil || call(t, k, "error_get") != e+8 {
				t.Fatalf("an error offset that is no block: %q, want none (go-sdk's)", msg)
			}
			call(t, k, "error_set", e)
			call(t, k, "error_set", 0)
			if msg := k.Error(); msg != nil {
				t.Fatalf("error_set(0) left the error %q", msg)
			}
		}},
		{"reset", func(t *testing.T, k *Kernel) {
			k.vars["kept"] = []byte("yes")
			if err := k.SetInput([]byte("in")); err != nil {
				t.Fatal(err)
			}
			p := storeBlock(t, k, "data")
			call(t, k, "output_set", p, 4)
			call(t, k, "error_set", p)
			call(t, k, "free", storeBlock(t, k, "freed"))
			call(t, k, "reset")
			for _, fn := range []string{"input_offset", "input_length", "output_offset", "output_length", "error_get"} {
				if v := call(t, k, fn); v != 0 {
					t.Errorf("%s after reset = %d", fn, v)
				}
			}
			if v := call(t, k, "load_u64", p); v != 0 || call(t, k, "length", p) != 0 {
				t.Fatalf("the old block reads %#x after reset, length %d: want zeros", v, call(t, k, "length", p))
			}
			if q := call(t, k, "alloc", 5); q != 32 {
				t.Fatalf("the first alloc after reset = %d, want 32 (no free list kept)", q)
			}
			if string(k.Vars()["kept"]) != "yes" {
				t.Fatal("reset dropped the vars")
			}
		}},
		{"config", func(t *testing.T, k *Kernel) {
			k.config = map[string]string{"greeting": "hello", "empty": ""}
			v := call(t, k, "config_get", storeBlock(t, k, "greeting"))
			if b, _ := k.Read(v); string(b) != "hello" {
				t.Fatalf("config_get(greeting) = %q", b)
			}
			for _, key := range []string{"absent", "empty"} {
				if v := call(t, k, "config_get", storeBlock(t, k, key)); v != 0 {
					t.Errorf("config_get(%s) = %d, want 0", key, v)
				}
			}
			if v := call(t, k, "config_get", 12345); v != 0 {
				t.Fatalf("config_get of no block = %d, want 0", v)
			}
		}},
		{"vars", func(t *testing.T, k *Kernel) {
			k.maxVarBytes = 100
			name := storeBlock(t, k, "n")
			call(t, k, "var_set", name, storeBlock(t, k, "0123456789"))
			if call(t, k, "length", name) != 0 {
				t.Fatal("var_set did not free the name's block")
			}
			v := call(t, k, "var_get", storeBlock(t, k, "n"))
			if b, _ := k.Read(v); string(b) != "0123456789" {
				t.Fatalf("var_get(n) = %q", b)
			}
			if v := call(t, k, "var_get", storeBlock(t, k, "m")); v != 0 {
				t.Fatalf("var_get of an unset var = %d", v)
			}
			// Replacing a var counts it once (go-sdk counts it twice):
			// 41 + 10 bytes, set ten times, within 100.
			for range 10 {
				call(t, k, "var_set", storeBlock(t, k, "n"), storeBlock(t, k, "9876543210"))
			}
			if k.varBytes != varCost("n", []byte("0123456789")) {
				t.Fatalf("vars count %d bytes, want %d", k.varBytes, varCost("n", []byte("0123456789")))
			}
			_, trap := envCall(k, "var_set", storeBlock(t, k, "other"), storeBlock(t, k, "0123456789"))
			if trap == nil || !strings.Contains(trap.Error(), "the variable store is full") {
				t.Fatalf("a var over the limit: %v, want the store full", trap)
			}
			call(t, k, "var_set", storeBlock(t, k, "n"), 0)
			if v := call(t, k, "var_get", storeBlock(t, k, "n")); v != 0 || k.varBytes != 0 {
				t.Fatalf("after var_set(n, 0): var_get = %d, %d bytes counted", v, k.varBytes)
			}
			k.maxVarBytes = 0
			if _, trap := envCall(k, "var_set", storeBlock(t, k, "n"), storeBlock(t, k, "x")); trap == nil || !strings.Contains(trap.Error(), "disabled") {
				t.Fatalf("var_set with vars disabled: %v", trap)
			}
		}},
		{"vars carried", func(t *testing.T, _ *Kernel) {
			from := map[string][]byte{"a": []byte("1"), "b": []byte("22")}
			k := newTestKernel(t, maxBytes, KernelOptions{Vars: from, MaxVarBytes: 1000})
			from["a"][0] = 'x' // the kernel holds copies
			if v, _ := k.Read(call(t, k, "var_get", storeBlock(t, k, "a"))); string(v) != "1" {
				t.Fatalf("var_get(a) = %q, want the var it started with", v)
			}
			if want := varCost("a", []byte("1")) + varCost("b", []byte("22")); k.varBytes != want {
				t.Fatalf("the vars it started with count %d bytes, want %d", k.varBytes, want)
			}
			vars := k.Vars()
			vars["b"][0] = 'x'
			if v, _ := k.Read(call(t, k, "var_get", storeBlock(t, k, "b"))); string(v) != "22" {
				t.Fatalf("var_get(b) = %q after a change to Vars' copy", v)
			}
		}},
		{"forged headers", func(t *testing.T, k *Kernel) {
			a, b := call(t, k, "alloc", 64), call(t, k, "alloc", 64)
			call(t, k, "free", a)
			call(t, k, "free", b)
			// The free list is b -> a; point a's link back at b: a cycle.
			call(t, k, "store_u64", a-kernelHeader+8, uint64(kernelFree)|b<<32)
			before := k.headers
			var got []uint64
			for range 5 {
				got = append(got, call(t, k, "alloc", 64))
			}
			if got[0] != b || got[1] != a || slices.Contains(got[2:], 0) || slices.Contains(got[2:], a) || slices.Contains(got[2:], b) {
				t.Fatalf("5 allocs over a cyclic free list b, a, b, ...: %v, want b=%d, a=%d, then new blocks", got, b, a)
			}
			if n := k.headers - before; n > 5*(kernelClasses+1) {
				t.Fatalf("5 allocs read %d headers", n)
			}
			// A forged active header cannot make a block reach past the
			// blocks allocated.
			c := call(t, k, "alloc", 8)
			call(t, k, "store_u64", c-kernelHeader, 1<<31|1<<31<<32)
			if n := call(t, k, "length", c); n != 0 {
				t.Fatalf("length of a block whose header claims 2 GiB = %d, want 0", n)
			}
		}},
		{"close", func(t *testing.T, k *Kernel) {
			p := storeBlock(t, k, "data")
			k.Close()
			if n := call(t, k, "memory_bytes"); n != 0 {
				t.Fatalf("memory_bytes after Close = %d", n)
			}
			if _, trap := envCall(k, "load_u8", p); trap == nil {
				t.Fatal("a load after Close did not trap")
			}
			if n := call(t, k, "length", p); n != 0 {
				t.Fatalf("length after Close = %d", n)
			}
		}},
		{"no allocation per call", func(t *testing.T, k *Kernel) {
			in := bytes.Repeat([]byte("x"), 1024)
			if n := testing.AllocsPerRun(100, func() { kernelCall(k, in) }); n != 0 {
				t.Fatalf("a call's kernel work allocates %.0f times, want 0", n)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, newTestKernel(t, maxBytes, KernelOptions{})) })
	}
}

// kernelCall is a call's kernel work as the host and a PDK do it: a
// reset, the input in, read by the guest 8 bytes a call, an output block
// written and read back.
func kernelCall(k *Kernel, in []byte) []byte {
	k.Reset()
	if err := k.SetInput(in); err != nil {
		panic(err)
	}
	var sum uint64
	for i := uint64(0); i+8 <= k.inputLen; i += 8 {
		sum += binary.LittleEndian.Uint64(k.at("input_load_u64", k.inputAt("input_load_u64", i), 8))
	}
	p := k.Alloc(k.inputLen)
	binary.LittleEndian.PutUint64(k.at("store_u64", p, 8), sum)
	k.output, k.outputLen = p, k.inputLen
	out, err := k.Output(1 << 20)
	if err != nil {
		panic(err)
	}
	return out
}

// BenchmarkKernelInput1KB is the kernel's part of a call with a 1 KB
// input (kernelCall): no allocation.
func BenchmarkKernelInput1KB(b *testing.B) {
	k := newTestKernel(b, 16<<20, KernelOptions{})
	in := bytes.Repeat([]byte("x"), 1024)
	b.ReportAllocs()
	for b.Loop() {
		kernelCall(k, in)
	}
}

// The ops of extism_kernelops.wat, in its table's order.
const (
	opAlloc byte = iota
	opFree
	opLength
	opLengthUnsafe
	opLoadU8
	opLoadU64
	opStoreU8
	opStoreU64
	opInputLoadU8
	opInputLoadU64
	opInputLength
	opInputOffset
	opInputSet
	opOutputSet
	opOutputLength
	opOutputOffset
	opErrorSet
	opErrorGet
	opMemoryBytes
	opReset
	opConfigGet
	opVarGet
	opVarSet
)

// offsetOps answer offsets (or the memory's size), which differ between
// go-sdk's kernel and morph's: a trace keeps only whether they are 0.
var offsetOps = map[byte]bool{opAlloc: true, opInputOffset: true, opOutputOffset: true, opErrorGet: true, opMemoryBytes: true, opConfigGet: true, opVarGet: true}

// step is a record of extism_kernelops.wat's script: op(a + result[ra],
// b + result[rb]), noRef for no result.
type step struct {
	op     byte
	ra, rb byte
	a, b   uint64
}

const noRef = 255

func op(o byte, a, b uint64) step { return step{o, noRef, noRef, a, b} }

// at is op with a relative to step ra's result (an offset it answered).
func at(o byte, ra int, a, b uint64) step { return step{o, byte(ra), noRef, a, b} }

func encode(script []step) []byte {
	var in []byte
	for _, s := range script {
		in = append(in, s.op, s.ra, s.rb, 0, 0, 0, 0, 0)
		in = binary.LittleEndian.AppendUint64(in, s.a)
		in = binary.LittleEndian.AppendUint64(in, s.b)
	}
	return in
}

// storeString appends the steps writing s at step ra's result.
func storeString(script []step, ra int, s string) []step {
	for i := range len(s) {
		script = append(script, at(opStoreU8, ra, uint64(i), uint64(s[i])))
	}
	return script
}

// trace is the fixture's output, with the results of offsetOps kept as 0
// or 1.
func trace(t *testing.T, script []step, out []byte) []uint64 {
	t.Helper()
	if len(out) != 8*len(script) {
		t.Fatalf("the trace has %d bytes, want 8 per step of %d", len(out), len(script))
	}
	tr := make([]uint64, len(script))
	for i, s := range script {
		tr[i] = binary.LittleEndian.Uint64(out[8*i:])
		if offsetOps[s.op] && tr[i] != 0 {
			tr[i] = 1
		}
	}
	return tr
}

// kernelScripts are op scripts over every kernel function whose results
// go-sdk's kernel and morph's must agree on.
func kernelScripts() map[string][]step {
	scripts := map[string][]step{
		"blocks": {
			op(opAlloc, 10, 0), at(opLength, 0, 0, 0), at(opLengthUnsafe, 0, 0, 0),
			at(opStoreU64, 0, 0, 0x0102030405060708), at(opLoadU64, 0, 0, 0), at(opLoadU8, 0, 1, 0),
			op(opAlloc, 0, 0), op(opLength, 0, 0), at(opLength, 0, 8, 0), at(opLength, 0, 1, 0),
			at(opFree, 0, 0, 0), at(opLength, 0, 0, 0), at(opFree, 0, 0, 0), // double free
			op(opAlloc, 5, 0), at(opLength, 13, 0, 0), op(opFree, 0, 0), op(opFree, 12345, 0), op(opLength, 12345, 0),
			op(opAlloc, 1065, 0), op(opAlloc, 288, 0), op(opAlloc, 128, 0), at(opLength, 19, 0, 0), at(opLength, 20, 0, 0),
			at(opFree, 20, 0, 0), op(opAlloc, 213, 0), op(opAlloc, 511, 0), op(opAlloc, 4, 0), at(opLength, 26, 0, 0),
			at(opLength, 25, 0, 0), op(opAlloc, 200_000, 0), at(opStoreU8, 29, 199_999, 7), at(opLoadU8, 29, 199_999, 0),
			at(opLength, 29, 0, 0), at(opLoadU64, 29, 0, 0), op(opMemoryBytes, 0, 0),
		},
		"input": {
			op(opInputLength, 0, 0), op(opInputOffset, 0, 0), op(opInputLoadU8, 0, 0), op(opInputLoadU64, 8, 0),
			op(opInputLoadU8, 9, 0), at(opLength, 1, 0, 0), at(opFree, 1, 0, 0), op(opInputLength, 0, 0),
			op(opAlloc, 3, 0), at(opStoreU8, 8, 1, 'z'), at(opInputSet, 8, 0, 3), op(opInputLength, 0, 0),
			op(opInputLoadU8, 1, 0), op(opInputOffset, 0, 0),
		},
		"output and error": {
			op(opOutputLength, 0, 0), op(opOutputOffset, 0, 0), op(opErrorGet, 0, 0), op(opAlloc, 4, 0),
			at(opOutputSet, 3, 0, 4), op(opOutputLength, 0, 0), op(opOutputOffset, 0, 0), at(opErrorSet, 3, 0, 0),
			op(opErrorGet, 0, 0), op(opErrorSet, 0, 0), op(opErrorGet, 0, 0),
		},
		"reset": {
			op(opAlloc, 8, 0), at(opStoreU64, 0, 0, 42), at(opOutputSet, 0, 0, 8), at(opErrorSet, 0, 0, 0),
			op(opReset, 0, 0), op(opInputLength, 0, 0), op(opInputOffset, 0, 0), op(opOutputLength, 0, 0),
			op(opErrorGet, 0, 0), at(opLength, 0, 0, 0), op(opAlloc, 8, 0), at(opLoadU64, 10, 0, 0), at(opLength, 10, 0, 0),
		},
	}
	// config and vars: the names written into blocks first.
	s := []step{op(opAlloc, 8, 0)}
	s = storeString(s, 0, "greeting")
	s = append(s, at(opConfigGet, 0, 0, 0))
	cfg := len(s) - 1
	s = append(s, at(opLength, cfg, 0, 0), at(opLoadU8, cfg, 0, 0), at(opLoadU8, cfg, 4, 0), op(opAlloc, 6, 0))
	absent := len(s) - 1
	s = storeString(s, absent, "absent")
	s = append(s, at(opConfigGet, absent, 0, 0), op(opAlloc, 1, 0))
	name := len(s) - 1
	s = storeString(s, name, "v")
	s = append(s, op(opAlloc, 2, 0))
	value := len(s) - 1
	s = storeString(s, value, "ok")
	s = append(s, step{opVarSet, byte(name), byte(value), 0, 0}, at(opLength, name, 0, 0), at(opLength, value, 0, 0), op(opAlloc, 1, 0))
	name2 := len(s) - 1
	s = storeString(s, name2, "v")
	s = append(s, at(opVarGet, name2, 0, 0))
	got := len(s) - 1
	// (Not the name's length after: var_get freed it, and the value may
	// have reused its block.)
	s = append(s, at(opLength, got, 0, 0), at(opLoadU8, got, 1, 0), op(opAlloc, 1, 0))
	name3 := len(s) - 1
	s = storeString(s, name3, "v")
	s = append(s, at(opVarSet, name3, 0, 0), op(opAlloc, 1, 0))
	name4 := len(s) - 1
	s = storeString(s, name4, "v")
	s = append(s, at(opVarGet, name4, 0, 0))
	scripts["config and vars"] = s
	return scripts
}

// TestKernelMatchesGoSDK runs op scripts through go-sdk's real kernel
// (sdk.NewPlugin) and through morph's (env.go on a bare wazero runtime),
// with extism_kernelops.wat replaying them: the traces must be equal,
// offsets aside (kept as zero or not).
func TestKernelMatchesGoSDK(t *testing.T) {
	wasm := testenv.File(t, testdata+"extism_kernelops.wasm", "fixtures")
	ctx := context.Background()
	config := map[string]string{"greeting": "hello"}
	plugin, err := sdk.NewPlugin(ctx, sdk.Manifest{
		Wasm:   []sdk.Wasm{sdk.WasmData{Data: wasm}},
		Config: config,
		Memory: &sdk.ManifestMemory{MaxVarBytes: 1 << 20},
	}, sdk.PluginConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plugin.Close(ctx)

	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	if err := instantiateEnv(ctx, r, kernelFunctions); err != nil {
		t.Fatal(err)
	}
	mod, err := r.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	k := newTestKernel(t, 16<<20, KernelOptions{Config: config, MaxVarBytes: 1 << 20})
	kctx := kernelCtx(ctx, k)
	run := mod.ExportedFunction("run")

	for name, script := range kernelScripts() {
		t.Run(name, func(t *testing.T) {
			in := encode(script)
			rc, out, err := plugin.Call("run", in)
			if err != nil || rc != 0 {
				t.Fatalf("go-sdk: rc %d, %v", rc, err)
			}
			want := trace(t, script, out)

			k.Reset()
			if err := k.SetInput(in); err != nil {
				t.Fatal(err)
			}
			if res, err := run.Call(kctx); err != nil || res[0] != 0 {
				t.Fatalf("morph's kernel: %v, %v", res, err)
			}
			out, err = k.Output(1 << 20)
			if err != nil {
				t.Fatal(err)
			}
			if got := trace(t, script, out); !slices.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Errorf("step %d %+v: %d, go-sdk's kernel %d", i, script[i], got[i], want[i])
					}
				}
			}
		})
	}

	// A trap reaches the caller through wazero as the kernel's Trap.
	k.Reset()
	if err := k.SetInput(encode([]step{op(opLoadU64, 1<<40, 0)})); err != nil {
		t.Fatal(err)
	}
	_, err = run.Call(kctx)
	var trap *Trap
	if !errors.As(err, &trap) || trap.Func != "load_u64" || !strings.Contains(err.Error(), "extism:host/env.load_u64: offset 1099511627776 is outside the Extism memory") {
		t.Fatalf("load_u64 outside the memory: %v, want the kernel's Trap", err)
	}
}

// FuzzKernel runs random op sequences, with header corruption, through the
// extism:host/env functions: none may panic but with a Trap, read or
// write outside the kernel's memory (Go's bounds checks would panic), or
// touch more than O(1) block headers.
func FuzzKernel(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 40, 0, 40, 1, 0, 1, 1, 0, 8, 0, 16, 7, 0, 9, 0})
	f.Add(bytes.Repeat([]byte{0, 100, 7, 2, 3, 1, 0, 10, 1, 2}, 20))
	f.Add([]byte{12, 0, 5, 0, 9, 200, 13, 0, 3, 2, 16, 1, 22, 0, 1, 21, 0, 19})
	f.Fuzz(func(t *testing.T, script []byte) {
		k := newTestKernel(t, 1<<20, KernelOptions{Config: map[string]string{"k": "v"}, MaxVarBytes: 256})
		if err := k.SetInput([]byte("fuzz input")); err != nil {
			t.Fatal(err)
		}
		var blocks []uint64
		next := func() uint64 {
			if len(script) == 0 {
				return 0
			}
			b := script[0]
			script = script[1:]
			return uint64(b)
		}
		// arg picks a recent block (often), a header field of one, or a
		// raw value.
		arg := func() uint64 {
			v := next()
			switch {
			case v < 128 && len(blocks) > 0:
				return blocks[int(v)%len(blocks)]
			case v < 192 && len(blocks) > 0:
				return blocks[int(v)%len(blocks)] - kernelHeader + 4*(v%4)
			case v < 250:
				return v * 97
			default:
				return ^uint64(0) - v
			}
		}
		// The most headers an operation may touch: alloc looks at the head
		// of each size class's list, and config_get and var_get read and
		// free a block before they alloc one.
		const maxHeaders = kernelClasses + 3
		for len(script) > 0 {
			fn := kernelFunctions[int(next())%len(kernelFunctions)]
			args := make([]uint64, len(fn.params))
			for i := range args {
				args[i] = arg()
			}
			if fn.name == "store_u64" || fn.name == "store_u8" {
				args[1] = next()<<32 | next()<<8 | next()
			}
			before := k.headers
			res, _ := envCall(k, fn.name, args...)
			if n := k.headers - before; n > maxHeaders {
				t.Fatalf("%s%v read %d block headers", fn.name, args, n)
			}
			if fn.name == "alloc" && res != nil && res[0] != 0 {
				blocks = append(blocks, res[0])
			}
			if k.top > uint64(len(k.buf)) && k.top != kernelBase {
				t.Fatalf("the blocks end at %d, past the memory's %d bytes", k.top, len(k.buf))
			}
			for _, p := range blocks {
				k.Read(p) // a view within the memory, or none
			}
			k.Error()
			k.Output(1 << 20)
		}
	})
}

// TestKernelArenaLimit checks that memory_mb caps the guest's memory and
// the kernel's together from the kernel's first growth: with the guest's
// memory holding the whole arena, an alloc is 0 and an input is
// ErrInputTooLarge naming memory_mb.
func TestKernelArenaLimit(t *testing.T) {
	const limit = 8 << 20
	a := &memory.Arena{Limit: limit}
	defer a.Release()
	// The guest's memory as wazero makes it: Allocate, then Reallocate to
	// its declared minimum.
	if a.Allocate(0, limit).Reallocate(limit-kernelGrow) == nil {
		t.Fatal("the guest's memory was refused its minimum")
	}
	k := NewKernel(a, limit, KernelOptions{})
	defer k.Close()
	if p := k.Alloc(limit / 2); p != 0 {
		t.Fatalf("an alloc of %d bytes beside a guest holding %d of %d: block %d (kernel %d bytes), want 0", limit/2, limit-kernelGrow, limit, p, len(k.buf))
	}
	err := k.SetInput(make([]byte, limit/2))
	if !errors.Is(err, guest.ErrInputTooLarge) || !strings.Contains(err.Error(), "raise memory_mb") {
		t.Fatalf("an input beside a guest holding the arena: %v, want ErrInputTooLarge naming memory_mb", err)
	}
}
