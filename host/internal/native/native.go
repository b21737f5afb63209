// Package native is the native loader: it runs a module that implements
// ABI v1 itself (abi/SPEC.md) directly on wazero, the fast path. Load checks
// the module's imports and exports, has it instrumented (package interrupt:
// its deadline and call stack) and compiles it in a runtime of its own; its
// instances serve ABI v1's calls (native.go) with morph:host/v1's host
// functions, http_request included (imports.go). What it shares with the
// host, and the Extism loader, is package guest.
package native

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// Module is a module that implements ABI v1 itself, run directly on
// wazero: the fast path, with no layer between the host and the guest's
// exports. Each plugin has a runtime of its own, so that its memory cap is
// its own (wazero's limit is per runtime); all share the loader's
// compilation cache.
type Module struct {
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	env      guest.Env // the plugin's grants, config and limits, for its host functions
	snap     *snapshot // nil: every instance initializes itself (see snapshot.go)
	// noSnapshot is why instances initialize themselves (a string), unset
	// while they may start from an image.
	noSnapshot atomic.Value
}

// InterruptPeriod is the budget of work, in units of about one WebAssembly
// instruction, that a guest runs between two calls to CheckInterrupt
// (interrupt.Instrument's budget). Each call costs one exit to Go (about as
// much as 50 iterations of a tight loop), and between two of them neither a
// deadline nor the Go garbage collector can stop the guest: typically 10 to
// 30 microseconds, at worst (a chain of loads that all miss the caches) about
// 20 ms, plus one bulk memory instruction (at most the memory cap: about 5 ms
// for 64 MiB). See BENCHMARKS.md, Deadlines.
const InterruptPeriod = 100_000

// Load instruments the module (instrument, the host's cache of
// interrupt.Instrument's rewrite with the stack budget stack) so that it can be stopped at its deadline
// (see package interrupt: wazero's own mechanism, WithCloseOnContextDone,
// exits to Go at every loop header and made JSON-heavy guests 5-8x slower)
// and its call stack bounded by the plugin's MaxStackBytes, caps its
// tables (wasmbin.CapTables), then compiles it in a runtime of its own,
// checks its exports against ABI v1 and provides its imports (which
// shape, Check's, says are what the host provides). The kind of a
// failure is guest.ErrABIMismatch for exports, guest.ErrLoad otherwise.
func Load(ctx context.Context, env guest.Env, shape *wasmbin.Shape, instrument func(stack uint32) ([]byte, error)) (_ *Module, kind error, err error) {
	if err := checkImports(shape.Imports); err != nil {
		return nil, guest.ErrLoad, err
	}
	if env.Limits.MaxStackBytes > interrupt.MaxStack {
		return nil, guest.ErrLoad, fmt.Errorf("a stack limit of %d bytes: this host allows at most %d", env.Limits.MaxStackBytes, interrupt.MaxStack)
	}
	wasm, err := instrument(uint32(env.Limits.MaxStackBytes))
	if err == nil {
		wasm, err = wasmbin.CapTables(wasm, env.TableEntries)
	}
	if err != nil {
		return nil, guest.ErrLoad, fmt.Errorf("not a module this host can sandbox: %w", err)
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
			m.runtime.Close(ctx)
		}
	}()
	if m.compiled, err = m.runtime.CompileModule(ctx, wasm); err != nil {
		return nil, guest.ErrLoad, fmt.Errorf("compile: %w", err)
	}
	if err := checkExports(m.compiled, shape.Exports); err != nil {
		return nil, guest.ErrABIMismatch, err
	}
	if err := m.instantiateImports(ctx); err != nil {
		return nil, guest.ErrLoad, err
	}
	return m, nil, nil
}

// CheckInterrupt is the import interrupt.Instrument gives the guest, called
// whenever the guest has spent InterruptPeriod units of work. Its panic ends
// the call with an error that wraps the cause (the host tells a deadline
// from a closed plugin); the instance is then discarded as after any fault.
func CheckInterrupt(ctx context.Context, _ api.Module, _ []uint64) {
	if err := ctx.Err(); err != nil {
		panic(err)
	}
	if s := guest.StateOf(ctx); s != nil {
		if err := s.Expired(); err != nil {
			panic(err)
		}
	}
}

// StackLimitError (host.StackLimitError) ends a call whose guest would have taken its call stack
// past the plugin's Limits.MaxStackBytes (a deep or unbounded recursion):
// the call fails with guest.ErrTrap, wrapping it. wazero keeps a call's stack
// outside the linear memory, in a buffer it doubles up to about 100 MB, so
// the native loader bounds it by instrumentation (package interrupt), with
// an upper estimate of every frame: real frames are often ten times
// smaller. The Extism loader's modules are not instrumented: their stacks
// have only wazero's ceiling.
type StackLimitError struct {
	Limit int // the plugin's MaxStackBytes
}

// Error names the limit and the setting that raises it.
func (e *StackLimitError) Error() string {
	return fmt.Sprintf("the guest's call stack would exceed %d bytes; raise the plugin's stack limit (max_stack_kb) if its recursion is genuine", e.Limit)
}

// StackExhausted is the import interrupt.Instrument gives the guest, called
// when a frame would take the stack past limit. Its panic ends the call
// (see CheckInterrupt).
func StackExhausted(limit int) api.GoModuleFunc {
	return func(context.Context, api.Module, []uint64) { panic(&StackLimitError{Limit: limit}) }
}

// Exports reports whether the module exports the ABI v1 export name.
func (m *Module) Exports(name string) bool {
	_, ok := m.compiled.ExportedFunctions()[name]
	return ok
}

// Close closes the plugin's runtime, the module and every instance, and
// releases its snapshot's image.
func (m *Module) Close(ctx context.Context) error {
	err := m.runtime.Close(ctx)
	if m.snap != nil {
		m.snap.close()
	}
	return err
}

// Instantiate makes an anonymous instance (a runtime may hold many
// instances of one module), its WASI and log answering to state, its memory
// arena's: one that runs _initialize, or, with snapshots, one that starts
// from the image of the first (see snapshot.go).
func (m *Module) Instantiate(ctx context.Context, state *guest.CallState, arena *memory.Arena) (guest.Instance, error) {
	ctx = experimental.WithMemoryAllocator(ctx, arena)
	cfg := guest.Config(m.env.Sandbox, state).WithName("")
	var mod api.Module
	var err error
	if m.snap == nil {
		mod, err = m.runtime.InstantiateModule(ctx, m.compiled, cfg.WithStartFunctions("_initialize"))
	} else {
		mod, err = m.snap.instantiate(ctx, m, cfg.WithStartFunctions(), arena, state)
	}
	if err != nil {
		return nil, err
	}
	return &instance{mod: mod, alloc: mod.ExportedFunction(abi.ExportAlloc), fns: map[string]api.Function{}, stack: make([]uint64, 2), state: state}, nil
}

// instance is one instance with its export handles resolved once, on
// first use: ExportedFunction allocates a call stack (about 10 KiB) on every
// lookup, and resolving every export up front doubled the memory of an
// instance whose plugin uses few of its hooks.
type instance struct {
	mod   api.Module
	alloc api.Function
	fns   map[string]api.Function // nil: the module does not export it
	stack []uint64                // reused by CallWithStack
	state *guest.CallState
}

// MemoryBytes is the size of the instance's linear memory.
func (in *instance) MemoryBytes() uint32 { return in.mod.Memory().Size() }

// Close closes the instance.
func (in *instance) Close() { in.mod.Close(context.Background()) }

// neitherConvention is the error for a module that follows neither calling
// convention the host loads (no ABI marker, no Extism import): it says what
// each needs, so that an author can tell which one the module was meant for
// and what it lacks.
func neitherConvention() error {
	return fmt.Errorf("no ABI marker export: found none, this host supports %s. The module is neither a morph plugin nor an Extism plugin: "+
		"a morph ABI v1 plugin (abi/SPEC.md) exports the marker %s () -> (), memory, %s (i32) -> (i32) and %s (i32, i32) -> (i64), "+
		"plus %s for tools and morph_<hook> for each hook its manifest lists; "+
		"an Extism plugin (guests/extism/README.md) is built with an Extism PDK, so imports %s, and exports describe and call "+
		"(or list_tools and call_tool), each () -> i32, for tools (or %s and the morph_<hook> exports for hooks), "+
		"or any () -> i32 export that its [[plugins.tools]] make a tool",
		abi.MarkerV1, abi.MarkerV1, abi.ExportAlloc, abi.ExportDescribe, abi.ExportCallTool, "extism:host/env", abi.ExportDescribe)
}

// checkExports enforces the marker and the shapes of the exports ABI v1
// defines; kinds are all the module's exports, to name one exported as
// something else than a function.
func checkExports(mod wazero.CompiledModule, kinds []wasmbin.Export) error {
	exports := mod.ExportedFunctions()
	if _, ok := exports[abi.MarkerV1]; !ok {
		if k, ok := guest.ExportKind(kinds, abi.MarkerV1); ok {
			return fmt.Errorf("export %s is %s: the ABI marker must be a function () -> ()", abi.MarkerV1, k)
		}
		var found []string
		for name := range exports {
			if strings.HasPrefix(name, abi.MarkerPrefix) {
				found = append(found, name)
			}
		}
		sort.Strings(found)
		if len(found) == 0 {
			return neitherConvention()
		}
		return fmt.Errorf("unsupported ABI: found %s, this host supports %s", strings.Join(found, ", "), abi.MarkerV1)
	}
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	want := func(name string, params, results []api.ValueType, required bool) error {
		def, ok := exports[name]
		if k, other := guest.ExportKind(kinds, name); !ok && other {
			return fmt.Errorf("export %s is %s, not a function %s -> %s", name, k, guest.ValueTypes(params), guest.ValueTypes(results))
		}
		if !ok {
			if required {
				return fmt.Errorf("missing export %s", name)
			}
			return nil
		}
		if !slices.Equal(def.ParamTypes(), params) || !slices.Equal(def.ResultTypes(), results) {
			return fmt.Errorf("export %s has signature %s -> %s, want %s -> %s", name,
				guest.ValueTypes(def.ParamTypes()), guest.ValueTypes(def.ResultTypes()), guest.ValueTypes(params), guest.ValueTypes(results))
		}
		return nil
	}
	errs := []error{
		want(abi.ExportAlloc, []api.ValueType{i32}, []api.ValueType{i32}, true),
		want(abi.ExportDescribe, []api.ValueType{i32, i32}, []api.ValueType{i64}, true),
	}
	for _, name := range guest.CallExports() {
		errs = append(errs, want(name, []api.ValueType{i32, i32}, []api.ValueType{i64}, false))
	}
	if _, ok := mod.ExportedMemories()["memory"]; !ok {
		if k, ok := guest.ExportKind(kinds, "memory"); ok {
			errs = append(errs, fmt.Errorf("export memory is %s: it must be the module's memory", k))
		} else {
			errs = append(errs, errors.New("missing export memory"))
		}
	}
	return errors.Join(errs...)
}

// checkImports refuses, before anything compiles, an import the host
// does not provide: one that is not a function (wazero would fail the
// instantiation, in describe, as if the guest had trapped), or a function of
// another module than morph:host/v1 and WASI.
func checkImports(imports []wasmbin.Import) error {
	var errs []error
	for _, imp := range imports {
		switch {
		case imp.Kind != wasmbin.KindFunction:
			errs = append(errs, fmt.Errorf("imports %s.%s, %s: a plugin imports only functions (it defines its own memory and tables, and exports its memory)",
				imp.Module, imp.Name, wasmbin.KindNames[imp.Kind]))
		case imp.Module == wasi_snapshot_preview1.ModuleName:
		case imp.Module == abi.HostModule:
			if imp.Name != abi.ImportLog && imp.Name != abi.ImportConfigGet && imp.Name != abi.ImportHTTPRequest {
				errs = append(errs, fmt.Errorf("imports %s.%s, which this host does not provide", imp.Module, imp.Name))
			}
		default:
			errs = append(errs, fmt.Errorf("imports %s.%s: only %s and %s are available", imp.Module, imp.Name, abi.HostModule, wasi_snapshot_preview1.ModuleName))
		}
	}
	return errors.Join(errs...)
}

// Call runs one export on this instance and returns its output in place in
// guest memory, valid until the instance's next call. A non-nil kind is the failure.
func (in *instance) Call(ctx context.Context, deadline time.Time, export string, input []byte, maxOut int) (view []byte, err error) {
	ctx = in.state.Begin(ctx, deadline)
	fn, ok := in.fns[export]
	if !ok {
		fn = in.mod.ExportedFunction(export)
		in.fns[export] = fn
	}
	if fn == nil {
		return nil, guest.Fail(guest.ErrABIMismatch, "the module does not export it", nil)
	}
	var ptr uint32
	if len(input) > 0 {
		in.stack[0] = uint64(len(input))
		if err := in.alloc.CallWithStack(ctx, in.stack); err != nil {
			return nil, guest.Fail(guest.ErrTrap, abi.ExportAlloc, err)
		}
		ptr = uint32(in.stack[0])
		if ptr == 0 {
			return nil, guest.Fail(guest.ErrGuest, fmt.Sprintf("%s could not allocate %d bytes", abi.ExportAlloc, len(input)), nil)
		}
		if !in.mod.Memory().Write(ptr, input) {
			return nil, guest.Fail(guest.ErrBadOutput, fmt.Sprintf("%s returned %d, outside guest memory", abi.ExportAlloc, ptr), nil)
		}
	}
	in.stack[0], in.stack[1] = uint64(ptr), uint64(len(input))
	if err := fn.CallWithStack(ctx, in.stack); err != nil {
		return nil, guest.Fail(guest.ErrTrap, "", err)
	}
	rptr, rlen, isErr := abi.Unpack(in.stack[0])
	if int(rlen) > maxOut {
		return nil, guest.Fail(guest.ErrOutputTooLarge, fmt.Sprintf("%d bytes, limit %d", rlen, maxOut), nil)
	}
	view, ok = in.mod.Memory().Read(rptr, rlen)
	if !ok {
		return nil, guest.Fail(guest.ErrBadOutput, fmt.Sprintf("result [%d, +%d) is outside guest memory", rptr, rlen), nil)
	}
	if isErr {
		return nil, guest.Fail(guest.ErrGuest, string(view), nil)
	}
	return view, nil
}

// instantiateImports provides the host module, and WASI for guests whose
// runtime needs it (Go, TinyGo, Rust's wasm32-wasi): no arguments, and only
// the directories and environment variables the plugin's grants give (its
// sandbox, which Instantiate applies to each instance).
func (m *Module) instantiateImports(ctx context.Context) error {
	needWASI := false // the imports are checked (checkImports)
	for _, f := range m.compiled.ImportedFunctions() {
		if mod, _, _ := f.Import(); mod == wasi_snapshot_preview1.ModuleName {
			needWASI = true
		}
	}
	if needWASI {
		if _, err := wasi_snapshot_preview1.Instantiate(guest.WithWASIGuard(ctx), m.runtime); err != nil {
			return fmt.Errorf("wasi: %w", err)
		}
	}
	if err := InstantiateInterrupt(ctx, m.runtime, m.env.Limits.MaxStackBytes); err != nil {
		return err
	}
	return m.instantiateHostModule(ctx)
}

// InstantiateInterrupt provides, in r, the imports interrupt.Instrument
// gives a guest: CheckInterrupt, and StackExhausted with the stack budget
// stack.
func InstantiateInterrupt(ctx context.Context, r wazero.Runtime, stack int) error {
	if _, err := r.NewHostModuleBuilder(interrupt.Module).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(CheckInterrupt), nil, nil).Export(interrupt.Func).
		NewFunctionBuilder().WithGoModuleFunction(StackExhausted(stack), nil, nil).Export(interrupt.StackFunc).
		Instantiate(ctx); err != nil {
		return fmt.Errorf("%s: %w", interrupt.Module, err)
	}
	return nil
}
