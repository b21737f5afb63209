package wasmbin_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/morphhost/morph/host/internal/wasmbin"
)

// growModule has the tables given (each a table type's bytes) and exports
// grow(n) = table.grow 0 by n null entries.
func growModule(tables ...[]byte) []byte {
	return module(
		sec(1, vec([]byte{0x60, 1, 0x7F, 1, 0x7F})),
		sec(3, vec(u32(0))),
		sec(4, vec(tables...)),
		sec(7, vec(append([]byte("\x04grow"), 0, 0))),
		sec(10, vec(body(0, 0xD0, 0x70, 0x20, 0, 0xFC, 15, 0, 0x0B))))
}

// A table without a maximum grows only up to the cap: table.grow past it
// answers -1, as the specification says of a failed growth.
func TestCapTables(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	run := func(wasm []byte, grows ...uint32) []int32 {
		t.Helper()
		mod, err := r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatal(err)
		}
		defer mod.Close(ctx)
		var out []int32
		for _, n := range grows {
			res, err := mod.ExportedFunction("grow").Call(ctx, uint64(n))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, int32(res[0]))
		}
		return out
	}
	unbounded := growModule([]byte{0x70, 0, 1})
	if got := run(unbounded, 2000); got[0] != 1 {
		t.Fatalf("uncapped grow = %v, want 1 (the test would not show the cap)", got)
	}
	capped, err := wasmbin.CapTables(unbounded, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := run(capped, 2000, 600, 399, 1), []int32{-1, 1, 601, -1}; !slices.Equal(got, want) {
		t.Fatalf("capped grows = %v, want %v", got, want)
	}

	// Two tables share what is left beyond their initial sizes; a maximum
	// already within its share stays.
	two, err := wasmbin.CapTables(growModule([]byte{0x70, 0, 100}, []byte{0x70, 1, 0, 10}), 1000)
	if err != nil {
		t.Fatal(err)
	}
	s, err := wasmbin.Check(two, wasmbin.Limits{})
	if err != nil {
		t.Fatalf("capped tables: %v", err)
	}
	if want := []wasmbin.TableLimits{{Min: 100, Max: 550, HasMax: true}, {Min: 0, Max: 10, HasMax: true}}; !slices.Equal(s.Tables, want) {
		t.Fatalf("capped Tables = %+v, want %+v", s.Tables, want)
	}
	within := growModule([]byte{0x70, 1, 1, 10})
	if out, err := wasmbin.CapTables(within, 1000); err != nil || &out[0] != &within[0] {
		t.Fatalf("a table within its share was rewritten (%v)", err)
	}
	if _, err := wasmbin.CapTables(growModule([]byte{0x70, 0, 0x80, 0x10}), 1000); err == nil {
		t.Fatal("initial sizes over the total: no error")
	}
}

// CapTables reads what it is given with bounds checks, whether or not Check
// passed it: any cut of a module is an error or a module, never a panic.
func TestCapTablesTruncated(t *testing.T) {
	wasm := growModule([]byte{0x70, 0, 1})
	for i := range len(wasm) {
		wasmbin.CapTables(wasm[:i], 1000) // a panic fails the test
	}
	// A table section that ends after the table's type, before its limits.
	cut := append([]byte("\x00asm\x01\x00\x00\x00"), 4, 2, 1, 0x70)
	if _, err := wasmbin.CapTables(cut, 1000); err == nil {
		t.Fatal("a table without limits was accepted")
	}
}
