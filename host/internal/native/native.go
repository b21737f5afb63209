// Package native is the native loader: it runs a module that implements
// ABI v1 itself (abi/SPEC.md) directly on wazero, the fast path. Load checks
// the module's imports and exports, and has it instrumented (package
// interrupt: its deadline and call stack) and compiled in a runtime of its
// own (package wasmrt); its instances serve ABI v1's calls (native.go) with
// morph:host/v1's host functions, http_request included (imports.go). What
// it shares with the host, and the Extism loader, is package guest.
package native

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/host/internal/wasmbin"
	"github.com/morphhost/morph/host/internal/wasmrt"
)

// Module is a module that implements ABI v1 itself, run directly on
// wazero: the fast path, with no layer between the host and the guest's
// exports. Its runtime is package wasmrt's.
type Module struct {
	*wasmrt.Module
	env guest.Env // the plugin's grants, config and limits, for its host functions
}

// initialize is ABI v1's initialization of an instance, after the
// module's start function: its runtime's _initialize, when it exports one.
var initialize = wasmrt.Init{{Export: "_initialize"}}

// Load has the module made ready (wasmrt.Sandbox: instrumented with the
// plugin's stack budget by instrument, the host's cache of
// interrupt.Instrument, and its tables capped), compiles it in a runtime of
// its own (wasmrt.Compile), checks its exports against ABI v1 and provides
// morph:host/v1 for its imports (which shape, Check's, says are what the
// host provides). The kind of a failure is guest.ErrABIMismatch for
// exports, guest.ErrLoad otherwise.
func Load(ctx context.Context, env guest.Env, shape *wasmbin.Shape, instrument func(stack uint32) ([]byte, error)) (_ *Module, kind error, err error) {
	if err := checkImports(shape.Imports); err != nil {
		return nil, guest.ErrLoad, err
	}
	wasm, err := wasmrt.Sandbox(env, env.Limits.MaxStackBytes, instrument)
	if err != nil {
		return nil, guest.ErrLoad, err
	}
	m := &Module{env: env}
	if m.Module, err = wasmrt.Compile(ctx, env, shape, wasm, m.instantiateHostModule); err != nil {
		return nil, guest.ErrLoad, err
	}
	if err := checkExports(m.Compiled(), shape.Exports); err != nil {
		m.Close(ctx)
		return nil, guest.ErrABIMismatch, err
	}
	return m, nil, nil
}

// Exports reports whether the module exports the ABI v1 export name.
func (m *Module) Exports(name string) bool {
	_, ok := m.Compiled().ExportedFunctions()[name]
	return ok
}

// Instantiate makes an anonymous instance (a runtime may hold many
// instances of one module), its WASI and log answering to state, its memory
// arena's: one that runs _initialize, or, with snapshots, one that starts
// from the image of the first (see package wasmrt).
func (m *Module) Instantiate(ctx context.Context, state *guest.CallState, arena *memory.Arena) (guest.Instance, error) {
	mod, err := m.Module.Instantiate(ctx, state, arena, guest.Config(m.env.Sandbox, state).WithName(""), initialize)
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
// another module than morph:host/v1 and WASI, those of a convention morph
// refuses (guest.Refused) first.
func checkImports(imports []wasmbin.Import) error {
	var errs []error
	var refused guest.Refused
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
		case refused.Add(imp.Module, imp.Name):
		default:
			errs = append(errs, fmt.Errorf("imports %s.%s: only %s and %s are available", imp.Module, imp.Name, abi.HostModule, wasi_snapshot_preview1.ModuleName))
		}
	}
	return errors.Join(append(refused.Errors(), errs...)...)
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
