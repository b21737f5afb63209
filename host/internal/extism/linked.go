package extism

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/host/internal/wasmbin"
	"github.com/morphhost/morph/host/internal/wasmrt"
)

// A plugin's linked modules (go-sdk's manifest modules besides the main
// one) are compiled in the plugin's runtime. Each instance of the plugin
// has its own instance of each, anonymous, made from its arena before the
// main module. What a module imports from a linked module's name is a host
// module of that name (one per runtime) whose functions call the calling
// instance's linked instance (proxy): go-sdk's wrapper idea, with each
// function resolved once per instance rather than on every call.

// linkedModule is a linked module compiled in the plugin's runtime.
type linkedModule struct {
	name     string
	compiled wazero.CompiledModule
	init     wasmrt.Init
	exports  []string // its functions' names, in the order of linkedInstance.fns
}

// linkedInstance is an instance's instance of a linked module.
type linkedInstance struct {
	mod api.Module
	fns []api.Function // by the index of the export in linkedModule.exports, resolved on first use; nil while one runs
}

// compileLinked compiles the linked modules wasm (sandboxed, in the order
// of Env.Linked) in r and instantiates their proxies there.
func (m *Module) compileLinked(ctx context.Context, r wazero.Runtime, wasm [][]byte) error {
	for i, w := range wasm {
		name := m.env.Linked[i].Name
		compiled, err := r.CompileModule(ctx, w)
		if err != nil {
			return fmt.Errorf("linked module %q: compile: %w", name, err)
		}
		l := &linkedModule{name: name, compiled: compiled, init: runtimeInit(compiled)}
		defs := compiled.ExportedFunctions()
		l.exports = slices.Sorted(func(yield func(string) bool) {
			for name := range defs {
				if !yield(name) {
					return
				}
			}
		})
		b := r.NewHostModuleBuilder(name)
		for j, export := range l.exports {
			d := defs[export]
			b.NewFunctionBuilder().WithGoModuleFunction(proxy(len(m.linked), j), d.ParamTypes(), d.ResultTypes()).WithName(export).Export(export)
		}
		// Compiled and instantiated by hand: Instantiate would run a
		// proxied _start outside any call.
		host, err := b.Compile(ctx)
		if err == nil {
			_, err = r.InstantiateModule(ctx, host, wazero.NewModuleConfig().WithName(name).WithStartFunctions())
		}
		if err != nil {
			return fmt.Errorf("linked module %q: %w", name, err)
		}
		m.linked = append(m.linked, l)
	}
	for _, l := range m.linked {
		if err := m.checkLinkedImports(l.compiled, l.name); err != nil {
			return err
		}
	}
	return nil
}

// LinkedDepthCeiling is the largest Limits.MaxLinkedDepth, which bounds
// how deep calls through linked modules' proxies nest in one call. Each
// nested call is Go frames of the host's and, in a recursion, a wazero
// stack of its own on Go's heap, which neither max_stack_kb nor memory_mb
// counts: a recursion through linked modules ends at the plugin's depth,
// with a LinkedDepthError, instead of growing them, and this ceiling keeps
// what the setting can let grow small (some KiB a level).
const LinkedDepthCeiling = 1024

// LinkedDepthError ends a call whose calls through linked modules nested
// deeper than Limit (the plugin's max_linked_depth): a recursion through a
// linked module that imports itself, or a cycle of them. The call fails
// with guest.ErrTrap, wrapping it.
type LinkedDepthError struct {
	Limit int
}

// Error names the limit, what reaches it and the setting that raises it.
func (e *LinkedDepthError) Error() string {
	return fmt.Sprintf("calls through linked modules would nest deeper than %d (a recursion through linked modules); raise max_linked_depth", e.Limit)
}

// proxy is the host function that calls function fn of the calling
// instance's linked module i. A trap there traps the caller with it.
func proxy(i, fn int) api.GoModuleFunc {
	return func(ctx context.Context, _ api.Module, stack []uint64) {
		g := guestOf(ctx)
		if i >= len(g.linked) {
			panic(fmt.Errorf("linked module %q is not instantiated yet: modules initialize in [plugins.modules] order", g.m.linked[i].name))
		}
		if limit := g.m.env.Limits.MaxLinkedDepth; g.linkedDepth >= limit {
			panic(&LinkedDepthError{Limit: limit})
		}
		// A wazero api.Function holds one call's execution state, which a
		// call re-entering it (a recursion through the proxy) would corrupt,
		// or crash the process with: it leaves the slot while it runs, so
		// that a re-entering call gets a fresh one.
		l := &g.linked[i]
		f := l.fns[fn]
		if f == nil {
			f = l.mod.ExportedFunction(g.m.linked[i].exports[fn])
		}
		l.fns[fn] = nil
		g.linkedDepth++
		err := f.CallWithStack(ctx, stack)
		g.linkedDepth--
		l.fns[fn] = f
		if err != nil {
			panic(err)
		}
	}
}

// checkLinkedImports checks what compiled (the main module, or the linked
// module name) imports from the linked modules against their exports:
// names and signatures.
func (m *Module) checkLinkedImports(compiled wazero.CompiledModule, name string) error {
	var errs []error
	for _, imp := range compiled.ImportedFunctions() {
		module, fn, _ := imp.Import()
		i := slices.IndexFunc(m.linked, func(l *linkedModule) bool { return l.name == module })
		if i < 0 {
			continue
		}
		d := m.linked[i].compiled.ExportedFunctions()[fn]
		switch {
		case d == nil:
			errs = append(errs, fmt.Errorf("imports %s.%s, which the linked module %q does not export", module, fn, module))
		case !slices.Equal(d.ParamTypes(), imp.ParamTypes()) || !slices.Equal(d.ResultTypes(), imp.ResultTypes()):
			want := wasmbin.Signature{Params: d.ParamTypes(), Results: d.ResultTypes()}
			have := wasmbin.Signature{Params: imp.ParamTypes(), Results: imp.ResultTypes()}
			errs = append(errs, fmt.Errorf("imports %s.%s with signature %s, but the linked module exports %s", module, fn, signature(have), signature(want)))
		}
	}
	err := errors.Join(errs...)
	if err != nil && name != "" {
		err = fmt.Errorf("linked module %q: %w", name, err)
	}
	return err
}

// instantiateLinked instantiates g's linked modules from arena with cfg
// (anonymous, no start function), each initialized by its runtime's
// rules, in the order of Env.Linked; ctx is g's.
func (g *instance) instantiateLinked(ctx context.Context, arena *memory.Arena, cfg wazero.ModuleConfig) error {
	if len(g.m.linked) == 0 {
		return nil
	}
	actx := experimental.WithMemoryAllocator(ctx, arena)
	cfg = cfg.WithStartFunctions()
	for _, l := range g.m.linked {
		mod, err := g.m.Runtime().InstantiateModule(actx, l.compiled, cfg)
		if err != nil {
			return fmt.Errorf("linked module %q: %w", l.name, err)
		}
		g.linked = append(g.linked, linkedInstance{mod: mod, fns: make([]api.Function, len(l.exports))})
		if err := l.init.Run(actx, mod); err != nil {
			return fmt.Errorf("linked module %q: %w", l.name, err)
		}
	}
	return nil
}
