package wasmrt

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/host/internal/wasmbin"
	"github.com/morphhost/morph/internal/testenv"
)

// A module's Init runs in its order, with its arguments, an export the
// module lacks skipped; with snapshots the image is taken after the whole
// Init, once, and later instances start from it and run nothing. On the
// snapinit fixture: _initialize sets its globals and grows its memory to
// write a marker past the first page; morph_build_prompt(0, 0) then writes
// what it sees ("i1 kY s0": _initialize ran once before it, its globals and
// marker in place) and overwrites it all ($inits = 7, $g64 = 0, marker Z,
// a word next to it). Run the other way round, build_prompt reads past the
// first page, which does not exist yet, and traps.
func TestInitOrder(t *testing.T) {
	wasm, err := os.ReadFile(testenv.Built(t, filepath.Join("..", "..", "..", "guests", "testdata", "snapinit.wasm"), "fixtures"))
	if err != nil {
		t.Fatal(err)
	}
	buildPrompt := InitCall{Export: "morph_build_prompt", Args: []uint64{0, 0}}
	ordered := Init{{Export: "absent"}, {Export: "_initialize"}, buildPrompt}
	ctx := context.Background()
	for _, snapshot := range []bool{true, false} {
		m, inits := compileSnapinit(t, wasm, snapshot)
		for i := range 3 {
			mod := instantiate(t, m, ordered)
			// What build_prompt wrote in Init: _initialize had run, once.
			if got := read(t, mod, 1042, 8); got != "i1 kY s0" {
				t.Fatalf("snapshot %v, instance %d: Init's build_prompt saw %q, want %q (_initialize before it)", snapshot, i, got, "i1 kY s0")
			}
			// What build_prompt answers now: the state Init left, whether
			// this instance ran Init or started from the image taken after it.
			if err := mod.ExportedFunction(buildPrompt.Export).CallWithStack(ctx, []uint64{0, 0}); err != nil {
				t.Fatal(err)
			}
			if got := read(t, mod, 1042, 8); got != "i7 xZ s1" {
				t.Fatalf("snapshot %v, instance %d: build_prompt answers %q, want %q (the state after all of Init)", snapshot, i, got, "i7 xZ s1")
			}
			want := int32(i + 1) // every instance initializes itself
			if snapshot {
				want = 1 // the first, then the image
			}
			if n := inits.Load(); n != want {
				t.Fatalf("snapshot %v: _initialize ran %d times for %d instances, want %d", snapshot, n, i+1, want)
			}
		}
		if img, why := m.Snapshot(); snapshot && (img == 0 || why != "") || !snapshot && why == "" {
			t.Fatalf("snapshot %v: Snapshot() = %d, %q", snapshot, img, why)
		}
		m.Close(ctx)

		m, _ = compileSnapinit(t, wasm, snapshot)
		arena := &memory.Arena{}
		_, err := m.Instantiate(ctx, guest.NewCallState(slog.Default, 1<<10, ctx), arena, wazero.NewModuleConfig().WithName(""), Init{buildPrompt, {Export: "_initialize"}})
		arena.Release()
		if err == nil || !strings.Contains(err.Error(), buildPrompt.Export) {
			t.Fatalf("snapshot %v: build_prompt before _initialize: %v, want its trap", snapshot, err)
		}
		m.Close(ctx)
	}
}

// compileSnapinit compiles the snapinit fixture as a loader would, with its
// morph:host/v1 log counting the "initializing" its _initialize logs.
func compileSnapinit(t *testing.T, wasm []byte, snapshot bool) (*Module, *atomic.Int32) {
	t.Helper()
	env := guest.Env{Source: "snapinit.wasm", Limits: guest.Limits{MemoryMiB: 4, MaxStackBytes: 64 << 10},
		Log: slog.Default, Closing: context.Background(), Cache: wazero.NewCompilationCache(), Snapshot: snapshot}
	shape, err := wasmbin.Check(wasm, wasmbin.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sandboxed, err := Sandbox(env, env.Limits.MaxStackBytes, func(stack uint32) ([]byte, error) {
		return interrupt.Instrument(wasm, InterruptPeriod, stack)
	})
	if err != nil {
		t.Fatal(err)
	}
	inits := new(atomic.Int32)
	m, err := Compile(context.Background(), env, shape, sandboxed, func(ctx context.Context, r wazero.Runtime) error {
		_, err := r.NewHostModuleBuilder(abi.HostModule).NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, mod api.Module, stack []uint64) {
			if b, _ := mod.Memory().Read(uint32(stack[1]), uint32(stack[2])); string(b) == "initializing" {
				inits.Add(1)
			}
		}), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).Export(abi.ImportLog).Instantiate(ctx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m, inits
}

// instantiate makes an instance of m with init, released at the test's end.
func instantiate(t *testing.T, m *Module, init Init) api.Module {
	t.Helper()
	ctx := context.Background()
	arena := &memory.Arena{}
	mod, err := m.Instantiate(ctx, guest.NewCallState(slog.Default, 1<<10, ctx), arena, wazero.NewModuleConfig().WithName(""), init)
	if err != nil {
		arena.Release()
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close(ctx); arena.Release() })
	return mod
}

// read is n bytes of mod's memory at off, as a string.
func read(t *testing.T, mod api.Module, off, n uint32) string {
	t.Helper()
	b, ok := mod.Memory().Read(off, n)
	if !ok {
		t.Fatalf("[%d, +%d) is outside the memory", off, n)
	}
	return string(b)
}
