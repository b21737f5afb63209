package wasmbin_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/host/internal/wasmbin"
)

// snapModule has a start function (g0 = 40, memory[17] = 2, g2 = 9), an
// active data segment (memory[16] = 1) and a passive one, three globals
// (g0 mutable i32 = 1, g1 immutable, g2 mutable i64 = 7), and exports
// get() = memory[16] + memory[17] + g0, and what exports adds.
func snapModule(globals []byte, exports ...[]byte) []byte {
	sections := [][]byte{
		sec(1, vec([]byte{0x60, 0, 0}, []byte{0x60, 0, 1, 0x7F})),
		sec(3, vec(u32(0), u32(1))),
		sec(5, vec([]byte{0, 1})),
		sec(6, globals),
	}
	if exports != nil {
		sections = append(sections, sec(7, vec(exports...)))
	}
	return module(append(sections,
		sec(8, u32(0)),
		sec(10, vec(
			body(0, 0x41, 40, 0x24, 0, 0x41, 17, 0x41, 2, 0x3A, 0, 0, 0x42, 9, 0x24, 2, 0x0B),
			body(0, 0x41, 16, 0x2D, 0, 0, 0x41, 17, 0x2D, 0, 0, 0x6A, 0x23, 0, 0x6A, 0x0B))),
		sec(11, vec(append([]byte{0, 0x41, 16, 0x0B}, vec([]byte{1})...), append([]byte{1}, vec([]byte("p"), []byte("p"))...))))...)
}

var (
	snapGlobals = vec([]byte{0x7F, 1, 0x41, 1, 0x0B}, []byte{0x7F, 0, 0x41, 5, 0x0B}, []byte{0x7E, 1, 0x42, 7, 0x0B})
	exportGet   = append([]byte("\x03get"), 0, 1)
)

// A prepared module instantiates without initializing (no data written, no
// start function run), exports its mutable globals and its start function,
// and, initialized by hand from what PrepareSnapshot answers, is the
// original module as instantiated; with or without an export section of
// its own.
func TestPrepareSnapshot(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	instantiate := func(wasm []byte) api.Module {
		t.Helper()
		mod, err := r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mod.Close(ctx) })
		return mod
	}
	get := func(mod api.Module) uint64 {
		t.Helper()
		res, err := mod.ExportedFunction("get").Call(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	orig, err := r.InstantiateWithConfig(ctx, snapModule(snapGlobals, exportGet), wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close(ctx)
	if got := get(orig); got != 43 {
		t.Fatalf("the original module's get: %d, want 43", got)
	}
	for name, wasm := range map[string][]byte{"exports": snapModule(snapGlobals, exportGet), "no exports": snapModule(snapGlobals)} {
		t.Run(name, func(t *testing.T) {
			out, snap, err := wasmbin.PrepareSnapshot(wasm)
			if err != nil {
				t.Fatal(err)
			}
			wantGlobals := []string{"morph.snapshot.global.0", "morph.snapshot.global.2"}
			if !slices.Equal(snap.Globals, wantGlobals) || snap.Start != "morph.snapshot.start" ||
				len(snap.Data) != 1 || snap.Data[0].Offset != 16 || string(snap.Data[0].Bytes) != "\x01" {
				t.Fatalf("snapshot %+v", snap)
			}
			mod := instantiate(out)
			if b, _ := mod.Memory().ReadByte(16); b != 0 || mod.ExportedGlobal(wantGlobals[0]).Get() != 1 {
				t.Fatal("instantiating the prepared module wrote its data or ran its start function")
			}
			mod.Memory().Write(snap.Data[0].Offset, snap.Data[0].Bytes)
			if _, err := mod.ExportedFunction(snap.Start).Call(ctx); err != nil {
				t.Fatal(err)
			}
			if g2 := mod.ExportedGlobal(wantGlobals[1]); g2.Get() != 9 {
				t.Fatalf("g2 %d after the start function, want 9", g2.Get())
			}
			if _, ok := mod.ExportedGlobal(wantGlobals[0]).(api.MutableGlobal); !ok {
				t.Fatal("the exported global cannot be set")
			}
			if name == "exports" {
				if got := get(mod); got != 43 {
					t.Fatalf("get after initializing by hand: %d, want 43", got)
				}
			}
		})
	}
}

// A module whose state an image cannot hold is not prepared, and the error
// says why.
func TestPrepareSnapshotRefused(t *testing.T) {
	funcref := vec([]byte{0x70, 1, 0xD0, 0x70, 0x0B})
	taken := append(append([]byte{byte(len("morph.snapshot.x"))}, "morph.snapshot.x"...), 0, 1) // a function export
	offset := module(sec(5, vec([]byte{0, 1})), sec(6, snapGlobals),
		sec(11, vec(append([]byte{0, 0x23, 1, 0x0B}, vec([]byte{1})...))))
	for what, c := range map[string]struct {
		wasm []byte
		want string
	}{
		"funcref global": {snapModule(funcref, exportGet), "global 0 is a mutable funcref"},
		"export name":    {snapModule(snapGlobals, exportGet, taken), `exports "morph.snapshot.x"`},
		"offset":         {offset, "data segment 0's offset is not a constant"},
	} {
		if _, _, err := wasmbin.PrepareSnapshot(c.wasm); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", what, err, c.want)
		}
	}
}

// Check names the first instruction that changes a table or drops a
// segment: state that an image of memory and globals does not hold.
func TestStateOp(t *testing.T) {
	for want, code := range map[string][]byte{
		"":           {0x41, 0, 0x1A, 0x0B},                          // i32.const 0, drop
		"table.set":  {0x41, 0, 0xD0, 0x70, 0x26, 0, 0x0B},           // table.set 0
		"table.grow": {0xD0, 0x70, 0x41, 1, 0xFC, 15, 0, 0x1A, 0x0B}, // table.grow 0
		"data.drop":  {0xFC, 9, 0, 0x0B},                             // data.drop 0
		"elem.drop":  {0xFC, 13, 0, 0x0B},                            // elem.drop 0
	} {
		wasm := module(sec(1, vec([]byte{0x60, 0, 0})), sec(3, vec(u32(0))), sec(4, vec([]byte{0x70, 0, 1})),
			sec(12, u32(1)), sec(10, vec(body(append([]byte{0}, code...)...))), sec(11, vec(append([]byte{1}, vec()...))))
		shape, err := wasmbin.Check(wasm, wasmbin.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		if shape.StateOp != want {
			t.Errorf("StateOp %q, want %q", shape.StateOp, want)
		}
	}
}
