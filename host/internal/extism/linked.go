package extism

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/morphhost/morph/host/internal/guest"
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
//
// Two of Extism's conventions need more than functions:
//
//   - a linked module named extism:host/user (Extism's linking example)
//     adds its exports to the host functions of that namespace, as the
//     Rust runtime's linker and js-sdk do: its proxies and the host's
//     functions it does not export are one host module (compileLinked),
//     its export winning over morph's of the same name and an embedding
//     host's of the same name refused (checkUserClash);
//   - linked modules may share a memory, one importing another's (js-sdk's
//     circular modules). A host module exports functions only, so imports
//     from a module whose memory is imported resolve to the instance's
//     instance of it directly (resolving), which is instantiated before
//     its importers (orderLinked). Its functions are then called without a
//     proxy, and so without a Go frame: max_linked_depth bounds proxies,
//     and a direct call always goes to a module instantiated earlier, so
//     every cycle of calls still passes a proxy, while each module's share
//     of max_stack_kb bounds its own frames either way. The memory is
//     counted once, by its exporter (Module.ownMemory, instance.MemoryBytes).

// linkedModule is a linked module compiled in the plugin's runtime.
type linkedModule struct {
	name     string
	compiled wazero.CompiledModule
	init     wasmrt.Init
	exports  []string // its functions' names, in the order of linkedInstance.fns
	// ownMemory: it defines a memory (one it imports is counted by its
	// exporter).
	ownMemory bool
}

// linkedInstance is an instance's instance of a linked module.
type linkedInstance struct {
	mod api.Module
	fns []api.Function // by the index of the export in linkedModule.exports, resolved on first use; nil while one runs
}

// compileLinked compiles the linked modules wasm (sandboxed, in the order
// of Env.Linked; infos are their binaries read, by name) in r and
// instantiates their proxies there, with the host functions of their
// namespace they do not export (m.user).
func (m *Module) compileLinked(ctx context.Context, r wazero.Runtime, wasm [][]byte, infos map[string]*wasmModule) error {
	for i, w := range wasm {
		name := m.env.Linked[i].Name
		compiled, err := r.CompileModule(ctx, w)
		if err != nil {
			return fmt.Errorf("linked module %q: compile: %w", name, err)
		}
		l := &linkedModule{name: name, compiled: compiled, init: runtimeInit(compiled), ownMemory: infos[name].ownMemory}
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
		for key, f := range m.user {
			if key.module == name && defs[key.name] == nil {
				b.NewFunctionBuilder().WithGoModuleFunction(m.hostFunc(f), f.Params, f.Results).WithName(f.Name).Export(f.Name)
			}
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
		case d == nil && m.user[hostFuncKey{module, fn}].Call != nil:
			// a host function of the linked module's namespace
			// (checkExtismImports checked its signature)
		case d == nil:
			errs = append(errs, fmt.Errorf("imports %s.%s, which the linked module %q does not export", module, fn, module))
		case !slices.Equal(d.ParamTypes(), imp.ParamTypes()) || !slices.Equal(d.ResultTypes(), imp.ResultTypes()):
			want := wasmbin.Signature{Params: d.ParamTypes(), Results: d.ResultTypes()}
			have := wasmbin.Signature{Params: imp.ParamTypes(), Results: imp.ResultTypes()}
			errs = append(errs, fmt.Errorf("imports %s.%s with signature %s, but the linked module exports %s", module, fn, signature(have), signature(want)))
		}
	}
	for _, imp := range compiled.ImportedMemories() {
		module, mem, _ := imp.Import()
		i := slices.IndexFunc(m.linked, func(l *linkedModule) bool { return l.name == module })
		if i >= 0 && m.linked[i].compiled.ExportedMemories()[mem] == nil {
			errs = append(errs, fmt.Errorf("imports %s.%s, a memory the linked module %q does not export", module, mem, module))
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
	actx := experimental.WithMemoryAllocator(g.resolving(ctx), arena)
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

// resolving is ctx resolving the imports from a linked module whose memory
// is shared (Module.sharedFrom) to g's instance of it once made: a host
// module (its proxies) exports no memory. Others resolve to the proxies.
func (g *instance) resolving(ctx context.Context) context.Context {
	if len(g.m.sharedFrom) == 0 {
		return ctx
	}
	return experimental.WithImportResolver(ctx, func(name string) api.Module {
		if !g.m.sharedFrom[name] {
			return nil
		}
		for i, l := range g.linked {
			if g.m.linked[i].name == name {
				return l.mod
			}
		}
		return nil
	})
}

// sharedMemories are the linked modules (infos, by name) whose memory the
// main module (main) or a linked one imports.
func sharedMemories(main *wasmModule, infos map[string]*wasmModule) map[string]bool {
	shared := map[string]bool{}
	for _, info := range append(slices.Collect(maps.Values(infos)), main) {
		for _, imp := range info.imports {
			if imp.Kind == wasmbin.KindMemory && infos[imp.Module] != nil {
				shared[imp.Module] = true
			}
		}
	}
	return shared
}

// orderLinked is linked (Env.Linked, by name; infos are their binaries
// read) ordered so that a module whose memory another imports comes first:
// modules are instantiated in that order, and an import of a memory
// resolves to the instance of its exporter (resolving). Otherwise the
// order stays. A cycle of memory imports, which no order satisfies, is
// refused naming the modules in it.
func orderLinked(linked []guest.LinkedModule, infos map[string]*wasmModule) ([]guest.LinkedModule, error) {
	ordered := make([]guest.LinkedModule, 0, len(linked))
	placed := map[string]bool{}
	waits := func(lm guest.LinkedModule) bool { // on a memory not placed yet
		return slices.ContainsFunc(infos[lm.Name].imports, func(imp wasmImport) bool {
			return imp.Kind == wasmbin.KindMemory && infos[imp.Module] != nil && !placed[imp.Module]
		})
	}
	for len(ordered) < len(linked) {
		n := len(ordered)
		for _, lm := range linked {
			if !placed[lm.Name] && !waits(lm) {
				ordered, placed[lm.Name] = append(ordered, lm), true
			}
		}
		if len(ordered) == n {
			var cycle []string
			for _, lm := range linked {
				if !placed[lm.Name] {
					cycle = append(cycle, strconv.Quote(lm.Name))
				}
			}
			return nil, fmt.Errorf("linked modules %s import each other's memory (a cycle): a shared memory must be defined by one of them, which the others import", strings.Join(cycle, ", "))
		}
	}
	return ordered, nil
}

// checkUserClash refuses an embedding host's function (fns) of
// extism:host/user that the linked module of that name (user; nil: none)
// exports too. Extism's runtime lets the module's shadow the host's:
// morph refuses, so that a host's function never goes unused without a
// word.
func checkUserClash(fns []guest.HostFunc, user *wasmModule) error {
	if user == nil {
		return nil
	}
	var errs []error
	for _, f := range fns {
		if _, ok := user.exports[f.Name]; ok && cmp.Or(f.Module, extismUser) == extismUser {
			errs = append(errs, fmt.Errorf("host function %s.%s is given both by the embedding host (host.Config.HostFunctions) and by the linked module %q: rename one",
				extismUser, f.Name, extismUser))
		}
	}
	return errors.Join(errs...)
}
