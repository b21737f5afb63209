package interrupt_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/host/internal/wasmbin"
	"github.com/morphhost/morph/internal/testenv"
)

// instantiated instantiates wasm in a runtime of its own with every import function stubbed (a function that
// returns zeros) and no start function, and returns a copy of its memory (nil if it has none), or wazero's
// error: what an instance sees before its first call.
func instantiated(t testing.TB, wasm []byte) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, guestConfig())
	defer r.Close(ctx)
	c, err := r.CompileModule(ctx, wasm)
	if err != nil {
		return nil, err
	}
	hosts := map[string]wazero.HostModuleBuilder{}
	for _, f := range c.ImportedFunctions() {
		mod, name, _ := f.Import()
		b, ok := hosts[mod]
		if !ok {
			b = r.NewHostModuleBuilder(mod)
		}
		results := len(f.ResultTypes())
		b = b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
			clear(stack[:results])
		}), f.ParamTypes(), f.ResultTypes()).Export(name)
		hosts[mod] = b
	}
	for mod, b := range hosts {
		if _, err := b.Instantiate(ctx); err != nil {
			t.Fatalf("stub %s: %v", mod, err)
		}
	}
	m, err := r.InstantiateModule(ctx, c, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		return nil, err
	}
	if mem := m.Memory(); mem == nil || reflect.ValueOf(mem).IsNil() { // wazero: a nil *MemoryInstance
		return nil, nil
	}
	mem, _ := m.Memory().Read(0, m.Memory().Size())
	return bytes.Clone(mem), nil
}

// dataCount is the number of segments in wasm's data section, -1 if it has none.
func dataCount(t testing.TB, wasm []byte) int {
	t.Helper()
	sections, err := wasmbin.Sections(wasm)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sections {
		if s.ID == wasmbin.IDData {
			n, err := s.Body.U32()
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	return -1
}

// sameInstance checks that wasm and its rewrite instantiate alike: both fail, or both succeed with the
// same memory. It returns the rewrite.
func sameInstance(t *testing.T, wasm []byte) []byte {
	t.Helper()
	out := instrument(t, wasm, 10000)
	want, werr := instantiated(t, wasm)
	got, gerr := instantiated(t, out)
	switch {
	case (werr == nil) != (gerr == nil):
		t.Fatalf("the original instantiates with %v, the rewrite with %v", werr, gerr)
	case !bytes.Equal(got, want):
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("memories differ: %d and %d bytes, first at offset %d", len(got), len(want), i)
	}
	return out
}

// active is an active data segment of memory 0 at the i32.const off.
func active(off int32, data string) []byte {
	return cat([]byte{0}, i32c(off), []byte{0x0B}, str(data))
}

// passive is a passive data segment.
func passive(data string) []byte { return append([]byte{1}, str(data)...) }

// memory is a memory section of one memory of pages pages, without a maximum.
func memory(pages uint32) []byte { return sec(5, vec(append([]byte{0}, u32(pages)...))) }

// TestMergeData checks the merge of data segments on hand-assembled modules: whatever the layout, an
// instance's memory is the same, and instantiation fails where it failed.
func TestMergeData(t *testing.T) {
	cases := []struct {
		name     string
		wasm     []byte
		segments int // after the rewrite; -1: the section as it was
		fails    bool
	}{
		{"in order, gaps of up to a page", module(memory(3), sec(11, vec(
			active(0, "ab"), active(10, "cd"), active(10+2+pageSize, "ef"), active(80000+pageSize+1, "gh")))), 2, false},
		{"overlapping: the later segment wins", module(memory(1), sec(11, vec(
			active(100, "AAAAAAAA"), active(104, "BB"), active(98, "CCCC"), active(100, "D")))), 1, false},
		{"out of order", module(memory(1), sec(11, vec(
			active(5000, "late"), active(10, "early"), active(3000, "middle"), active(3002, "")))), 1, false},
		{"at the end of memory", module(memory(1), sec(11, vec(active(0, "a"), active(pageSize-2, "yz"), active(pageSize, "")))), 1, false},
		{"out of bounds by a byte", module(memory(1), sec(11, vec(active(0, "a"), active(pageSize-1, "yz")))), 1, true},
		{"empty and out of bounds", module(memory(1), sec(11, vec(active(pageSize-10, "a"), active(pageSize+1, "")))), 1, true},
		{"across 4 GiB", module(memory(1), sec(11, vec(active(-16, "0123456789abcdef01"), active(-40, "x")))), 1, true},
		{"at the top of 4 GiB, in a memory that small", module(memory(1), sec(11, vec(active(-2, "a"), active(-1, "b")))), 1, true},
		{"no memory", module(sec(11, vec(active(0, "a"), active(1, "b")))), -1, true},
		{"passive segments, no data count", module(memory(1), sec(11, vec(
			passive("p0"), active(0, "a"), passive("p1"), active(1, "b")))), 3, false},
		{"data count, no memory.init or data.drop", module(memory(1), sec(12, u32(2)),
			sec(11, vec(active(0, "a"), active(1, "b")))), 1, false},
		{"a data count that does not count the segments", module(memory(1), sec(12, u32(3)),
			sec(11, vec(active(0, "a"), active(1, "b")))), -1, true},
		{"one segment", module(memory(1), sec(11, vec(active(7, "a")))), -1, false},
		{"no merge possible: two pages apart", module(memory(3), sec(11, vec(active(0, "a"), active(2*pageSize, "b")))), -1, false},
		{"an offset that is not an i32.const", module(memory(1), sec(11, vec(active(0, "a"),
			cat([]byte{0}, i32c(1), i32c(2), []byte{0x6A, 0x0B}, str("b")), active(3, "c")))), -1, false},
		{"an explicit memory index", module(memory(1), sec(11, vec(active(0, "a"), cat([]byte{2, 0}, i32c(1), []byte{0x0B}, str("b"))))), -1, false},
		{"a memory index the module lacks", module(memory(1), sec(11, vec(active(0, "a"), cat([]byte{2, 1}, i32c(1), []byte{0x0B}, str("b"))))), -1, true},
		{"an overlong offset wazero accepts", module(memory(1), sec(11, vec(active(0, "a"),
			cat([]byte{0, 0x41, 0x81, 0x80, 0x80, 0x80, 0x40, 0x0B}, str("b"))))), -1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := sameInstance(t, c.wasm)
			if _, err := instantiated(t, c.wasm); (err != nil) != c.fails {
				t.Fatalf("the original instantiates with %v", err)
			}
			want := c.segments
			if want < 0 {
				want = dataCount(t, c.wasm)
			}
			if got := dataCount(t, out); got != want {
				t.Errorf("%d segments after the rewrite, want %d", got, want)
			}
		})
	}
}

// pageSize is a WebAssembly page.
const pageSize = 1 << 16

// TestMergeDataKeepsIndices checks that a module whose code names data segments keeps them all: memory.init
// copies from a passive segment (index 2, after two active ones that could merge) as it did.
func TestMergeDataKeepsIndices(t *testing.T) {
	wasm := module(
		sec(1, vec([]byte{0x60, 0, 1, 0x7F})),
		sec(3, vec(u32(0))),
		memory(1),
		sec(7, vec(export("load", 0))),
		sec(12, u32(3)),
		sec(10, vec(body(cat([]byte{0}, i32c(200), i32c(0), i32c(4), // memory.init 2: 4 bytes to 200
			[]byte{0xFC, 8, 2, 0}, i32c(200), []byte{0x28, 2, 0, 0x0B})...))), // i32.load 200
		sec(11, vec(active(0, "a"), active(1, "b"), passive("\x01\x02\x03\x04"))))
	out := sameInstance(t, wasm)
	if got, want := dataCount(t, out), 3; got != want {
		t.Fatalf("%d segments after the rewrite, want %d", got, want)
	}
	r, _ := newRuntime(t, wazero.NewRuntimeConfig())
	res, err := instantiate(t, r, out).ExportedFunction("load").Call(context.Background())
	if err != nil || res[0] != 0x04030201 {
		t.Fatalf("load: %#x, %v", res, err)
	}
}

// TestMergeDataImportedMemory checks that the segments of an imported memory, whose gaps may hold another
// module's bytes, are left alone.
func TestMergeDataImportedMemory(t *testing.T) {
	wasm := module(
		sec(2, vec(cat(str("env"), str("mem"), []byte{2, 0, 1}))),
		sec(11, vec(active(0, "a"), active(2, "b"))))
	if got := dataCount(t, instrument(t, wasm, 10000)); got != 2 {
		t.Fatalf("%d segments after the rewrite, want 2", got)
	}
}

// TestMergeDataBounded checks that the merge adds at most as many zeros as the module has bytes (or 1 MiB),
// however the segments are spread, and that a million segments merge into one.
func TestMergeDataBounded(t *testing.T) {
	spread := make([][]byte, 1000)
	for i := range spread {
		spread[i] = active(int32(i*pageSize), "x") // a page apart: every gap may be filled
	}
	wasm := module(memory(1000), sec(11, vec(spread...)))
	out := sameInstance(t, wasm)
	if len(out) > 2*len(wasm)+1<<20 {
		t.Fatalf("%d bytes in, %d out: the zeros were not bounded", len(wasm), len(out))
	}
	if n := dataCount(t, out); n < 2 {
		t.Fatalf("%d segments: the gaps were filled beyond the budget", n)
	}

	many := make([][]byte, 1_000_000)
	for i := range many {
		many[i] = active(int32(i), "y")
	}
	wasm = module(memory(16), sec(11, vec(many...)))
	out = instrument(t, wasm, 10000)
	if n := dataCount(t, out); n != 1 {
		t.Fatalf("%d segments, want 1", n)
	}
}

// TestMergeDataGuests checks the example guests: their rewrites instantiate with the same memory, and the
// standard Go example's tens of thousands of segments become a few.
func TestMergeDataGuests(t *testing.T) {
	const root = "../../../"
	for _, g := range []struct{ path, target string }{
		{"examples/rust-hooks/target/wasm32-unknown-unknown/release/rust_hooks.wasm", "rust"},
		{"examples/go-hooks/go-hooks.wasm", "examples"},
		{"examples/go-hooks/go-hooks-tinygo.wasm", tinyGoTarget},
	} {
		t.Run(g.target, func(t *testing.T) {
			if g.target == tinyGoTarget {
				testenv.TinyGo(t, "the TinyGo build of go-hooks")
			}
			wasm := testenv.File(t, root+g.path, g.target)
			out := sameInstance(t, wasm)
			t.Logf("%d data segments, %d after the merge; %d bytes, %d after the rewrite",
				dataCount(t, wasm), dataCount(t, out), len(wasm), len(out))
			if g.target == "examples" && dataCount(t, out) > 100 {
				t.Errorf("%d segments after the merge", dataCount(t, out))
			}
		})
	}
}
