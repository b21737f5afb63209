// Package wasmrt is the runtime of one plugin's instrumented module, which
// every loader shares: a wazero runtime of the plugin's own (its memory cap
// is per runtime), the module checked, instrumented (package interrupt: its
// deadline and call stack) and compiled in it, WASI and the instrumentation's
// imports provided, and its instances made with the plugin's memory arena,
// initialized by the loader's Init or started from a pre-initialized
// snapshot (snapshot.go). What a loader adds is its calling convention: its
// host functions (Compile's imports) and its calls on the instances.
package wasmrt

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// Module is a plugin's instrumented module, compiled in a runtime of its
// own, so that its memory cap is its own (wazero's limit is per runtime);
// all share the loader's compilation cache. It is safe for concurrent use.
type Module struct {
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	env      guest.Env // the plugin's grants, config and limits
	snap     *snapshot // nil: every instance initializes itself (see snapshot.go)
	// noSnapshot is why instances initialize themselves (a string), unset
	// while they may start from an image.
	noSnapshot atomic.Value
}

// Init is what initializes a new instance, after what instantiating the
// module does by itself (its data segments and start function): exports
// called in order, each with its arguments. A loader's runtime convention
// says which (ABI v1: _initialize; a command module's constructors, a
// Haskell runtime's hs_init). An export the module does not have is
// skipped. With snapshots it runs once, on the first instance, before its
// image is taken: it must be the same for every instance of a module.
type Init []InitCall

// InitCall is one export an Init calls, and its arguments.
type InitCall struct {
	Export string
	Args   []uint64
}

// MaxMemoryMiB is the largest memory cap: 65,536 pages of 64 KiB, all a
// 32-bit memory can address (wazero panics past it).
const MaxMemoryMiB = 4096

// Sandbox is wasm made ready for Compile: instrumented by instrument (the
// host's cache of interrupt.Instrument) with the stack budget stack (the
// plugin's Limits.MaxStackBytes, or a linked module's share of it), so that
// it can be stopped at its deadline and its call stack bounded (wazero's
// own mechanism, WithCloseOnContextDone, exits to Go at every loop header
// and made JSON-heavy guests 5-8x slower), and its tables capped
// (wasmbin.CapTables). Its errors are load errors.
func Sandbox(env guest.Env, stack int, instrument func(stack uint32) ([]byte, error)) ([]byte, error) {
	if stack > interrupt.MaxStack {
		return nil, fmt.Errorf("a stack limit of %d bytes: this host allows at most %d", stack, interrupt.MaxStack)
	}
	wasm, err := instrument(uint32(stack))
	if err == nil {
		wasm, err = wasmbin.CapTables(wasm, env.TableEntries)
	}
	if err != nil {
		return nil, fmt.Errorf("not a module this host can sandbox: %w", err)
	}
	return wasm, nil
}

// Compile compiles wasm, a module Sandbox made ready whose shape (Check's)
// says its imports are ones the loader provides, in a runtime of its own
// capped at the plugin's memory, rewritten for snapshots when the plugin
// allows them (snapshot.go). It then provides WASI when the module imports
// it (no arguments, and only the directories and environment variables the
// plugin's grants give: its sandbox, which each instance's configuration
// applies), the instrumentation's imports, and the loader's own: imports,
// given the runtime. Its errors are load errors.
func Compile(ctx context.Context, env guest.Env, shape *wasmbin.Shape, wasm []byte, imports func(context.Context, wazero.Runtime) error) (_ *Module, err error) {
	if env.Limits.MemoryMiB > MaxMemoryMiB {
		return nil, fmt.Errorf("memory_mb = %d: a 32-bit module's memory holds at most %d MiB", env.Limits.MemoryMiB, MaxMemoryMiB)
	}
	wasm, snap, why := prepareSnapshot(env, shape, wasm)
	m := &Module{env: env, snap: snap, runtime: wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCompilationCache(env.Cache).
		WithMemoryLimitPages(env.Limits.MemoryMiB*16))} // 64 KiB pages
	switch {
	case !env.Snapshot:
		m.noSnapshot.Store("turned off (snapshot = false)")
	case why != nil:
		m.refuseSnapshot(why)
	}
	defer func() {
		if err != nil {
			m.Close(ctx)
		}
	}()
	if m.compiled, err = m.runtime.CompileModule(ctx, wasm); err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	for _, f := range m.compiled.ImportedFunctions() {
		if mod, _, _ := f.Import(); mod == wasi_snapshot_preview1.ModuleName {
			if _, err := wasi_snapshot_preview1.Instantiate(guest.WithWASIGuard(ctx), m.runtime); err != nil {
				return nil, fmt.Errorf("wasi: %w", err)
			}
			break
		}
	}
	if err := InstantiateInterrupt(ctx, m.runtime, env.Limits.MaxStackBytes); err != nil {
		return nil, err
	}
	if err := imports(ctx, m.runtime); err != nil {
		return nil, err
	}
	return m, nil
}

// Compiled is the compiled module, for the loader's checks of its exports.
func (m *Module) Compiled() wazero.CompiledModule { return m.compiled }

// Runtime is the plugin's runtime, where a loader may compile and
// instantiate more modules (they share its memory cap).
func (m *Module) Runtime() wazero.Runtime { return m.runtime }

// Close closes the plugin's runtime, the module and every instance, and
// releases its snapshot's image.
func (m *Module) Close(ctx context.Context) error {
	err := m.runtime.Close(ctx)
	if m.snap != nil {
		m.snap.close()
	}
	return err
}

// Instantiate makes an instance of the module with cfg (the loader's: its
// WASI and log answering to state, usually anonymous; a runtime may hold
// many instances of one module), its memories arena's, which may hold no
// more than the plugin's memory cap together: one initialized by init, or,
// with snapshots, one that starts from the image of the first (see
// snapshot.go). No export runs but init's (cfg's start functions are not
// called).
func (m *Module) Instantiate(ctx context.Context, state *guest.CallState, arena *memory.Arena, cfg wazero.ModuleConfig, init Init) (api.Module, error) {
	arena.Limit = uint64(m.env.Limits.MemoryMiB) << 20
	ctx = experimental.WithMemoryAllocator(ctx, arena)
	cfg = cfg.WithStartFunctions()
	if m.snap != nil {
		return m.snap.instantiate(ctx, m, cfg, arena, state, init)
	}
	mod, err := m.runtime.InstantiateModule(ctx, m.compiled, cfg)
	if err != nil {
		return nil, err
	}
	if err := init.Run(ctx, mod); err != nil {
		mod.Close(ctx)
		return nil, err
	}
	return mod, nil
}

// Run calls init's exports on mod, in order: what Instantiate does after
// instantiating the module, and what a loader does for a module it
// instantiates itself (an Extism plugin's linked modules).
func (init Init) Run(ctx context.Context, mod api.Module) error {
	for _, c := range init {
		if fn := mod.ExportedFunction(c.Export); c.Export != "" && fn != nil {
			if _, err := fn.Call(ctx, c.Args...); err != nil {
				return fmt.Errorf("%s: %w", c.Export, err)
			}
		}
	}
	return nil
}
