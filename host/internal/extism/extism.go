// Package extism is the Extism loader: it runs a module written with an
// Extism PDK (one that imports extism:host/env) on the native loader's
// runtime (package wasmrt: instrumented, snapshots), with Extism's kernel
// written in Go (kernel.go) in place of the wasm kernel go-sdk runs, so
// that plugins of the Extism ecosystem work unchanged under the same
// bounds as a native plugin. Detect tells such a module by its imports,
// Load compiles and checks one, and its instances serve ABI v1's calls in
// Extism's calling convention, or, for an Extism tool plugin,
// morph_describe and morph_call_tool through its describe and call.
//
// It reads the binary with package wasmbin (binary.go), provides
// extism:host/env (env.go), the host functions of extism:host/user and an
// embedding host's (user.go) and the plugin's linked modules (linked.go);
// what it shares with the host, and the native loader, is package guest.
// github.com/extism/go-sdk is its tests' oracle, not a dependency.
package extism

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/host/internal/sandbox"
	"github.com/morphhost/morph/host/internal/wasmbin"
	"github.com/morphhost/morph/host/internal/wasmrt"
)

// extismEnv is Extism's host namespace; a module importing from it is an
// Extism module.
const extismEnv = "extism:host/env"

// Module is a module written with an Extism PDK, run as a native one is
// (package wasmrt: instrumented, compiled in the plugin's runtime, its
// instances from the plugin's arena, with snapshots), its extism:host/env
// served by a Kernel in Go per instance (env.go). It follows one of the
// conventions of the Extism ecosystem, which morph serves as ABI v1:
//
//   - morph's: morph_describe and the morph_<hook> exports of ABI v1, in
//     Extism's calling convention;
//   - an MCP tool plugin's (mcp.go): describe and call (mcp.run servlets,
//     hyper-mcp's v1 plugins) or list_tools and call_tool (hyper-mcp v2),
//     whose tools morph serves, and v2's prompts and resources exports,
//     which it serves an MCP client (guest.MCPExport);
//   - plain exports (count_vowels, run, greet, ...) that the plugin's
//     configuration makes tools (Env.Tools) or hooks (Env.HookExports),
//     beside an MCP plugin's tools or alone.
type Module struct {
	*wasmrt.Module
	env      guest.Env
	exported map[string]wasmbin.Signature
	// morph: the module exports morph_describe; mcp: its MCP convention,
	// when it has one (nil otherwise).
	morph bool
	mcp   *mcpConvention
	// tools are the configured export tools by name; hooks maps the ABI v1
	// exports of the configured hooks to the module's.
	tools map[string]guest.ExportTool
	hooks map[string]string
	// name is the name morph gives a module that is not morph's (it has no
	// manifest): the configured one, or the file's.
	name string
	// init is the main module's runtime initialization (runtimeInit), run
	// when an instance is made; a command module's (it exports _start) is
	// lazyInit instead, run before an instance's first call of an export
	// other than _start or _initialize, which initialize the runtime
	// themselves (go-sdk's rule: wasi-libc's _start calls the constructors).
	init, lazyInit wasmrt.Init
	// linked are the plugin's linked modules, compiled in its runtime
	// (linked.go).
	linked []*linkedModule
	// user are the plugin's host functions (userFunctions); those of a
	// linked module's namespace are added to its proxies (compileLinked).
	user map[hostFuncKey]guest.HostFunc
	// ownMemory: the main module defines a memory, rather than import
	// one or have none (instance.MemoryBytes).
	ownMemory bool
	// sharedFrom are the linked modules whose memory a module imports
	// (sharedMemories).
	sharedFrom map[string]bool
	// vars are those the first instance's initialization set, which
	// instances started from its image start with (nil until it ran).
	// While they are not known, an instantiation holds first (a semaphore
	// of one), so that no instance starts from the image without them; a
	// wait for it ends with the caller's context.
	vars  atomic.Pointer[map[string][]byte]
	first chan struct{}
}

// Load checks an Extism module: its imports (extism:host/env's functions
// with go-sdk v1.7.1's signatures, the host functions provided, the linked
// modules' functions and memories (linked.go), WASI) and its exports (its
// convention, see Module).
// It then has it and each linked module made ready (wasmrt.Sandbox:
// instrumented by instrument with its share of the plugin's stack budget,
// which is given the linked module, or nil for wasm, its tables capped)
// and compiles them in a runtime of the plugin's own
// (wasmrt.Compile) beside extism:host/env, the host functions and the
// linked modules' proxies. The kind of a failure is guest.ErrABIMismatch
// for exports, guest.ErrLoad otherwise.
//
// The sandbox is the native loader's: the deadline and the call stack by
// instrumentation, every memory of an instance (the guest's, its linked
// modules' and the kernel's) within Limits.MemoryMiB together, the
// guest's tables capped as a native plugin's; the guest gets no arguments,
// only the directories and environment variables of its grants, its
// http_request goes through the plugin's HTTP grant, it has real clocks and
// the host's CSPRNG, and its stdout and stderr go to the log as a native
// plugin's do. Extism vars share the output limit per instance. shape is
// Check's for wasm.
//
// The ABI v1 marker export (morph_abi_v1) is neither required nor checked:
// it tells the native calling convention's version from the exports, while
// an Extism module is recognized by its imports and its payloads' version
// is its manifest's abi_version.
func Load(ctx context.Context, env guest.Env, shape *wasmbin.Shape, wasm []byte, instrument func(linked *guest.LinkedModule, stack uint32) ([]byte, error)) (_ *Module, kind error, err error) {
	info, err := parseWasm(wasm, true)
	if err != nil {
		return nil, guest.ErrLoad, fmt.Errorf("read the module: %w", err)
	}
	userFuncs := userFunctions(env)
	linkedInfo := map[string]*wasmModule{}
	for _, lm := range env.Linked {
		if linkedInfo[lm.Name], err = parseWasm(lm.Wasm, true); err != nil {
			return nil, guest.ErrLoad, fmt.Errorf("linked module %q: read the module: %w", lm.Name, err)
		}
	}
	if err := checkUserClash(env.HostFuncs, linkedInfo[extismUser]); err != nil {
		return nil, guest.ErrLoad, err
	}
	if err := checkExtismImports(info, userFuncs, linkedInfo); err != nil {
		return nil, guest.ErrLoad, err
	}
	if env.Linked, err = orderLinked(env.Linked, linkedInfo); err != nil {
		return nil, guest.ErrLoad, err
	}
	m := &Module{env: env, exported: info.exports, first: make(chan struct{}, 1), user: userFuncs,
		ownMemory: info.ownMemory, sharedFrom: sharedMemories(info, linkedInfo)}
	if err := m.checkExports(shape.Exports); err != nil {
		return nil, guest.ErrABIMismatch, err
	}
	if !m.morph {
		m.name = env.Name
		if m.name == env.Source { // no configured name: the file's
			m.name = strings.TrimSuffix(filepath.Base(env.Source), ".wasm")
		}
	}
	if env.Limits.MaxLinkedDepth > LinkedDepthCeiling {
		return nil, guest.ErrLoad, fmt.Errorf("max_linked_depth = %d: this host allows at most %d", env.Limits.MaxLinkedDepth, LinkedDepthCeiling)
	}
	// Each module gets an even share of the stack, so that a call crossing
	// modules keeps the plugin's bound.
	stack := env.Limits.MaxStackBytes / (1 + len(env.Linked))
	sandboxed := func(linked *guest.LinkedModule) ([]byte, error) {
		return wasmrt.Sandbox(env, stack, func(stack uint32) ([]byte, error) { return instrument(linked, stack) })
	}
	var linked [][]byte
	declared := []ModuleMemory{{Module: "main", Bytes: info.memory}}
	for i := range env.Linked {
		lm := &env.Linked[i]
		lwasm, mem, err := prepareLinked(lm, userFuncs, linkedInfo, sandboxed)
		if err != nil {
			return nil, guest.ErrLoad, err
		}
		linked = append(linked, lwasm)
		declared = append(declared, ModuleMemory{Module: lm.Name, Bytes: mem})
	}
	if err := checkDeclared(env.Limits.MemoryMiB, declared); err != nil {
		return nil, guest.ErrLoad, err
	}
	if wasm, err = sandboxed(nil); err != nil {
		return nil, guest.ErrLoad, err
	}
	if len(env.Linked) > 0 && env.Snapshot {
		env.Snapshot = false
		wasmrt.LogNoSnapshot(env, errLinkedNoSnapshot)
	}
	m.Module, err = wasmrt.Compile(ctx, env, shape, wasm, func(ctx context.Context, r wazero.Runtime) error {
		if err := instantiateEnv(ctx, r, m.envFunctions()); err != nil {
			return fmt.Errorf("%s: %w", extismEnv, err)
		}
		if err := m.instantiateUser(ctx, r, userFuncs); err != nil {
			return err
		}
		return m.compileLinked(ctx, r, linked, linkedInfo)
	})
	if err != nil {
		return nil, guest.ErrLoad, err
	}
	if err := m.checkLinkedImports(m.Compiled(), ""); err != nil {
		m.Close(ctx)
		return nil, guest.ErrLoad, err
	}
	m.init = runtimeInit(m.Compiled())
	if _, command := m.Compiled().ExportedFunctions()["_start"]; command {
		m.init, m.lazyInit = nil, m.init
	}
	return m, nil, nil
}

// runtimeInit is how an instance of compiled initializes its language's
// runtime, go-sdk's rules (detectGuestRuntime): a Haskell runtime's
// _initialize then hs_init(0, 0); a reactor's _initialize; a command's
// __wasm_call_ctors; none. It runs when the instance is made rather than
// in its first call, except a command module's (Module.lazyInit).
func runtimeInit(compiled wazero.CompiledModule) wasmrt.Init {
	exports := compiled.ExportedFunctions()
	nullary := func(name string) bool {
		f, ok := exports[name]
		return ok && len(f.ParamTypes()) == 0 && len(f.ResultTypes()) == 0
	}
	switch {
	case exports["hs_init"] != nil:
		return wasmrt.Init{{Export: "_initialize"}, {Export: "hs_init", Args: []uint64{0, 0}}}
	case nullary("_initialize"):
		return wasmrt.Init{{Export: "_initialize"}}
	case nullary("__wasm_call_ctors"):
		return wasmrt.Init{{Export: "__wasm_call_ctors"}}
	}
	return nil
}

// prepareLinked checks a linked module as the main one (its imports) and
// makes it ready (sandboxed); it answers that and the bytes its memory
// declares at least. The error names it.
func prepareLinked(lm *guest.LinkedModule, user map[hostFuncKey]guest.HostFunc, linked map[string]*wasmModule, sandboxed func(*guest.LinkedModule) ([]byte, error)) (_ []byte, memBytes uint64, _ error) {
	fail := func(err error) ([]byte, uint64, error) {
		return nil, 0, fmt.Errorf("linked module %q: %w", lm.Name, err)
	}
	info := linked[lm.Name]
	if err := checkExtismImports(info, user, linked); err != nil {
		return fail(err)
	}
	wasm, err := sandboxed(lm)
	if err != nil {
		return fail(err)
	}
	return wasm, info.memory, nil
}

// checkDeclared refuses a plugin whose modules' memories declare more
// than memory_mb (limitMiB) together: the arena (memory.Arena.Limit)
// refuses their growth past it, but not each one's first size.
func checkDeclared(limitMiB uint32, declared []ModuleMemory) error {
	var sum uint64
	for _, d := range declared {
		sum += d.Bytes
	}
	if sum <= uint64(limitMiB)<<20 {
		return nil
	}
	return &MemoryLimitError{LimitMiB: limitMiB, Held: sum, Declared: declared}
}

// checkExtismImports accepts functions of extism:host/env that go-sdk
// provides, with their signatures; functions of
// extism:host/user that are provided (user), with their signatures;
// functions of the linked modules (linked, by name), which a linked module
// named extism:host/user adds to the host functions of that namespace, and
// their memories; and WASI; nothing else, those of a convention morph
// refuses (guest.Refused) first.
func checkExtismImports(info *wasmModule, user map[hostFuncKey]guest.HostFunc, linked map[string]*wasmModule) error {
	var errs []error
	var refused guest.Refused
	for _, imp := range info.imports {
		lm := linked[imp.Module]
		var linkedFn bool // a function lm exports
		if lm != nil {
			_, linkedFn = lm.exports[imp.Name]
		}
		switch {
		case imp.Kind == wasmbin.KindMemory && lm != nil:
			// a memory the linked modules share (js-sdk's circular
			// modules): checkLinkedImports checks that lm exports it
		case imp.Kind == wasmbin.KindMemory:
			errs = append(errs, fmt.Errorf("imports %s.%s, a memory: an Extism plugin may import a memory only from one of its linked modules ([plugins.modules])", imp.Module, imp.Name))
		case imp.Kind != wasmbin.KindFunction && lm != nil:
			errs = append(errs, fmt.Errorf("imports %s.%s, %s: linked modules may share a memory (Extism's circular-module convention) but not tables or globals",
				imp.Module, imp.Name, wasmbin.KindNames[imp.Kind]))
		case imp.Kind != wasmbin.KindFunction:
			errs = append(errs, fmt.Errorf("imports %s.%s, which is not a function: an Extism plugin may import functions only", imp.Module, imp.Name))
		case linkedFn:
			// checkLinkedImports checks it against the linked module, once
			// compiled; a linked extism:host/user's function wins over
			// morph's of that name, as in Extism (checkUserClash refuses
			// an embedding host's)
		case imp.Module == extismEnv:
			want, ok := envSignatures[imp.Name]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("imports %s.%s, which Extism (go-sdk v1.7.1) does not provide", imp.Module, imp.Name))
			case !imp.fn.Equal(want):
				errs = append(errs, fmt.Errorf("imports %s.%s with signature %s, want %s", imp.Module, imp.Name, signature(imp.fn), signature(want)))
			}
		case imp.Module == extismUser || user[hostFuncKey{imp.Module, imp.Name}].Call != nil:
			f, ok := user[hostFuncKey{imp.Module, imp.Name}]
			want := wasmbin.Signature{Params: f.Params, Results: f.Results}
			switch {
			case !ok && lm != nil:
				errs = append(errs, fmt.Errorf("imports %s.%s, a host function neither morph nor the embedding host provides, nor the linked module %q exports "+
					"(morph provides %s)", imp.Module, imp.Name, imp.Module, strings.Join(builtinUserNames(), ", ")))
			case !ok:
				errs = append(errs, fmt.Errorf("imports %s.%s, a host function neither morph nor the embedding host provides "+
					"(morph provides %s; a Go program embedding morph can add one with host.Config.HostFunctions, "+
					"a linked module named %s can export it)",
					imp.Module, imp.Name, strings.Join(builtinUserNames(), ", "), extismUser))
			case !imp.fn.Equal(want):
				errs = append(errs, fmt.Errorf("imports %s.%s with signature %s, but the host function provided is %s", imp.Module, imp.Name, signature(imp.fn), signature(want)))
			}
		case lm != nil:
			// checkLinkedImports names it: lm does not export it
		case imp.Module == "wasi_snapshot_preview1":
		case refused.Add(imp.Module, imp.Name):
		default:
			errs = append(errs, fmt.Errorf("imports %s.%s: an Extism plugin may import only %s, %s (host functions), wasi_snapshot_preview1, "+
				"the modules linked to it (the plugin's modules) and the host functions a Go program embedding morph gives it (host.Config.HostFunctions)",
				imp.Module, imp.Name, extismEnv, extismUser))
		}
	}
	return errors.Join(append(refused.Errors(), errs...)...)
}

// checkExports finds the module's convention (see Module) and checks the
// signatures of the exports morph calls, and that the configured ones
// exist; kinds are all the module's exports, to name one exported as
// something else than a function.
func (m *Module) checkExports(kinds []wasmbin.Export) error {
	// An export that names a convention but is no function is named first:
	// the author meant that convention.
	for _, name := range []string{abi.ExportDescribe, extismExportDescribe, extismExportCall, mcpV2List, mcpV2Call} {
		if _, fn := m.exported[name]; !fn {
			if k, ok := guest.ExportKind(kinds, name); ok {
				return fmt.Errorf("export %s is %s, not a function () -> (i32) (Extism's convention)", name, k)
			}
		}
	}
	_, m.morph = m.exported[abi.ExportDescribe]
	m.mcp = findMCP(m.exported)
	configured := len(m.env.Tools) > 0 || len(m.env.HookExports) > 0
	switch {
	case m.morph && configured:
		return fmt.Errorf("the module exports %s, so it is a morph plugin that lists its own tools and hooks: "+
			"remove the plugin's [[plugins.tools]] and [plugins.hook_exports], which are for modules of other conventions", abi.ExportDescribe)
	case !m.morph && m.mcp == nil && !configured:
		return noConvention(m.exported)
	}
	var errs []error
	check := func(name string, configured bool) {
		f, ok := m.exported[name]
		k, other := guest.ExportKind(kinds, name)
		switch {
		case ok && configured && !plainSignature(f):
			errs = append(errs, fmt.Errorf("export %s has signature %s, want () -> (i32) or () -> () (Extism's convention)", name, signature(f)))
		case ok && !configured && !f.Equal(callSignature):
			errs = append(errs, fmt.Errorf("export %s has signature %s, want %s (Extism's convention)", name, signature(f), signature(callSignature)))
		case !ok && other:
			errs = append(errs, fmt.Errorf("export %s is %s, not a function () -> (i32) (Extism's convention)", name, k))
		case !ok && configured:
			errs = append(errs, fmt.Errorf("the configuration names export %q, which the module does not export; its plain exports are: %s",
				name, strings.Join(PlainExports(m.exported), ", ")))
		}
	}
	switch {
	case m.morph:
		for _, name := range guest.CallExports() {
			check(name, false)
		}
	case m.mcp != nil:
		check(m.mcp.list, true)
		check(m.mcp.call, true)
	}
	m.tools, m.hooks = map[string]guest.ExportTool{}, map[string]string{}
	for _, t := range m.env.Tools {
		m.tools[t.Spec.Name] = t
		check(t.Export, true)
	}
	for export, name := range m.env.HookExports {
		m.hooks[export] = name
		check(name, true)
	}
	return errors.Join(errs...)
}

// callSignature is that of the exports of the conventions morph serves:
// Extism's () -> i32.
var callSignature = wasmbin.Signature{Results: []api.ValueType{api.ValueTypeI32}}

// plainSignature reports whether an export of signature sig can be
// configured: Extism's hosts call a function () -> i32, whose result is its
// return code, and () -> (), which succeeds unless it traps or exits
// non-zero (a command module's _start, a Haskell PDK's exports).
func plainSignature(sig wasmbin.Signature) bool {
	return sig.Equal(callSignature) || len(sig.Params) == 0 && len(sig.Results) == 0
}

// noConvention is the error for an Extism module that follows none of the
// conventions morph serves by itself: it names each, and the module's
// exports that configuration could serve.
func noConvention(exported map[string]wasmbin.Signature) error {
	plain := PlainExports(exported)
	hint := "it exports no function () -> i32 that could be one"
	if len(plain) > 0 {
		hint = "its exports that could be are " + strings.Join(plain, ", ") + "; `morph plugin inspect` prints the lines to add"
	}
	return fmt.Errorf("an Extism plugin must export %s (a morph plugin), describe and call or list_tools and call_tool (an MCP tool plugin), "+
		"or have its plain exports made tools or hooks by its configuration ([[plugins.tools]], [plugins.hook_exports]): "+
		"this one does none of these; %s", abi.ExportDescribe, hint)
}

// PlainExports are the module's exports that configuration can make tools
// or hooks: functions () -> i32 or () -> () that are not a runtime's entry
// points. A command module's _start can be configured, but is not listed:
// it exits, and so ends its instance, at each call.
func PlainExports(exported map[string]wasmbin.Signature) []string {
	var out []string
	for name, sig := range exported {
		if plainSignature(sig) && !runtimeExports[name] && !strings.HasPrefix(name, "asyncify_") { // TinyGo's
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// runtimeExports are exports of language runtimes and of the conventions
// morph serves by itself, never a plain export.
var runtimeExports = map[string]bool{"_start": true, "_initialize": true, "__wasm_call_ctors": true, "hs_init": true,
	extismExportDescribe: true, extismExportCall: true, mcpV2List: true, mcpV2Call: true,
	// hyper-mcp v2's other exports, which morph does not call
	"complete": true, "get_prompt": true, "list_prompts": true, "list_resource_templates": true, "list_resources": true,
	"on_roots_list_changed": true, "read_resource": true}

// Plain is what configuration could serve of the Extism module wasm, for
// `morph plugin inspect` to suggest: its plain exports (PlainExports), the
// extism:host/user functions it imports that morph does not provide, and
// the modules it imports from (linked modules, or an embedding host's host
// functions) besides Extism's, WASI and those of a convention no
// configuration provides (guest.IsRefused). A module that
// exports morph_describe has none of these to configure.
func Plain(wasm []byte) (exports, hostFuncs, modules []string, err error) {
	info, err := parseWasm(wasm, true)
	if err != nil {
		return nil, nil, nil, err
	}
	if _, morph := info.exports[abi.ExportDescribe]; morph {
		return nil, nil, nil, nil
	}
	builtin := userFunctions(guest.Env{})
	for _, imp := range info.imports {
		switch {
		case imp.Module == extismUser:
			if _, ok := builtin[hostFuncKey{imp.Module, imp.Name}]; !ok {
				hostFuncs = append(hostFuncs, imp.Name)
			}
		case imp.Module != extismEnv && imp.Module != "wasi_snapshot_preview1" && !guest.IsRefused(imp.Module, imp.Name) && !slices.Contains(modules, imp.Module):
			modules = append(modules, imp.Module)
		}
	}
	return PlainExports(info.exports), hostFuncs, modules, nil
}

// Exports reports whether the module serves the ABI v1 export name: its
// own for a morph plugin; otherwise describe, and call_tool and the hooks
// it has through configuration or an MCP convention.
func (m *Module) Exports(name string) bool {
	if m.morph {
		_, ok := m.exported[name]
		return ok
	}
	if _, ok := m.hooks[name]; ok {
		return true
	}
	if m.mcp != nil && m.mcp.methods[name] != "" {
		return true
	}
	return name == abi.ExportDescribe || name == abi.ExportCallTool && (m.mcp != nil || len(m.tools) > 0)
}

// errLinkedNoSnapshot is why a plugin with linked modules has no snapshot.
var errLinkedNoSnapshot = errors.New("the plugin has linked modules: an image holds one module's memory")

// Snapshot is what the module's snapshot holds, or why its instances
// initialize themselves (wasmrt.Module.Snapshot). A plugin with linked
// modules has none: an image holds one memory, and the main module's may
// point into its linked modules' state.
func (m *Module) Snapshot() (imageBytes uint64, why string) {
	if len(m.linked) > 0 {
		return 0, errLinkedNoSnapshot.Error()
	}
	return m.Module.Snapshot()
}

// Instantiate makes an instance: its Kernel, its linked modules and the
// main module, each initialized by its runtime's rules (runtimeInit), all
// their memories from arena, and their WASI and log answering to state.
// With snapshots the main module starts from the first instance's image
// (wasmrt), and its Kernel from the vars that instance's initialization set.
// The kernel's memory is allocated first: the image goes to the next
// memory the arena allocates, the main module's (memory.Arena.Image).
func (m *Module) Instantiate(ctx context.Context, state *guest.CallState, arena *memory.Arena) (_ guest.Instance, err error) {
	// The limit wasmrt sets for the main module holds from the first
	// memory: the kernel's and the linked modules', which initialize first.
	arena.Limit = uint64(m.env.Limits.MemoryMiB) << 20
	opts := KernelOptions{Config: m.env.Values, MaxVarBytes: m.env.Limits.MaxOutputBytes}
	if m.vars.Load() == nil { // the first instance, or one made beside it
		select {
		case m.first <- struct{}{}:
			defer func() { <-m.first }()
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the plugin's first instance to initialize: %w", context.Cause(ctx))
		}
	}
	imaged, _ := m.Module.Snapshot()
	if vars := m.vars.Load(); vars != nil && imaged > 0 {
		opts.Vars = *vars
	}
	g := &instance{m: m, state: state, fns: map[string]api.Function{}, stack: make([]uint64, 1),
		kernel: NewKernel(arena, arena.Limit, opts)}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	ictx := g.ctx(ctx)
	cfg := guest.Config(m.env.Sandbox, state).WithName("")
	if err := g.instantiateLinked(ictx, arena, cfg); err != nil {
		return nil, err
	}
	if g.mod, err = m.Module.Instantiate(g.resolving(ictx), state, arena, cfg, m.init); err != nil {
		return nil, err
	}
	// Stored before anything else can fail: the image may be taken, and
	// every instance started from it needs them.
	if m.vars.Load() == nil {
		vars := g.kernel.Vars()
		m.vars.Store(&vars)
	}
	// The arena refuses growth past the limit, but not a memory's first
	// size: modules whose declared minimums add up past it are refused here.
	if n := uint64(g.MemoryBytes()); n > arena.Limit {
		return nil, &MemoryLimitError{LimitMiB: m.env.Limits.MemoryMiB, Held: n}
	}
	return g, nil
}

// MemoryLimitError refuses an Extism plugin whose modules (the main one,
// its linked ones and the kernel) would hold more memory than its
// memory_mb together. Load refuses one whose modules' memories declare
// more than that at least (Declared; guest.ErrLoad). An instance that
// holds more once initialized is refused too (guest.ErrTrap, wrapping it),
// which the arena's bound on growth and Load's check leave no way to
// reach: it stays as the bound's last check, cheap beside an
// instantiation.
type MemoryLimitError struct {
	LimitMiB uint32 // the plugin's memory_mb
	Held     uint64 // the bytes its modules declare at least, or held
	// Declared is, at load, what each module's memory declares: "main"
	// for the plugin's module, then its linked modules by name (but a
	// module whose memory another imports before that one; an imported
	// memory is counted by its exporter only). Nil for an instance refused
	// once initialized.
	Declared []ModuleMemory
}

// ModuleMemory is the bytes a module's memory declares at least.
type ModuleMemory struct {
	Module string
	Bytes  uint64
}

// Error names the limit, the modules and the setting that raises it.
func (e *MemoryLimitError) Error() string {
	if e.Declared == nil {
		return fmt.Sprintf("the plugin's modules hold %d bytes of memory once initialized, over memory_mb = %d; raise memory_mb", e.Held, e.LimitMiB)
	}
	var each []string
	for _, d := range e.Declared {
		each = append(each, fmt.Sprintf("%s %d", d.Module, d.Bytes))
	}
	return fmt.Sprintf("the plugin's modules declare memories of %d bytes together (%s), over memory_mb = %d; raise memory_mb or link fewer modules",
		e.Held, strings.Join(each, ", "), e.LimitMiB)
}

// instance is one instance of the main module, its linked modules' and its
// Kernel, with what morph's host functions keep of its current call. Its
// export handles are resolved once, on first use (as the native loader's).
type instance struct {
	m      *Module
	mod    api.Module
	linked []linkedInstance
	kernel *Kernel
	state  *guest.CallState
	fns    map[string]api.Function // nil: the module does not export it
	stack  []uint64                // reused by CallWithStack
	cctx   callContext

	// initialized: the module's lazyInit ran in this instance.
	initialized bool

	// linkedDepth is how deep calls through linked modules' proxies nest
	// now, bounded by Limits.MaxLinkedDepth.
	linkedDepth int

	// The last http_request's response status and headers, for
	// http_status_code and http_headers.
	httpStatus  int32
	httpHeaders map[string]string
}

// callContext is a call's context that answers instanceKey with its
// instance: the instance holds one, so that a call's context costs no
// allocation (context.WithValue would allocate one per call).
type callContext struct {
	context.Context
	g *instance
}

// Value answers the instance for instanceKey, else what the call's context does.
func (c *callContext) Value(key any) any {
	if key == (instanceKey{}) {
		return c.g
	}
	return c.Context.Value(key)
}

// ctx is ctx as the context of a call on g: its host functions find g in it.
func (g *instance) ctx(ctx context.Context) context.Context {
	g.cctx = callContext{Context: ctx, g: g}
	return &g.cctx
}

// MemoryBytes is the size of the instance's memories together, all within
// memory_mb: the main module's, its linked modules' and its kernel's, each
// counted once, by the module that defines it (a shared one is its
// exporter's: sharedMemories).
func (g *instance) MemoryBytes() uint32 {
	size := func(mod api.Module) uint64 {
		if mem := guest.MemoryOf(mod); mem != nil {
			return uint64(mem.Size())
		}
		return 0
	}
	n := uint64(len(g.kernel.buf))
	if g.m.ownMemory {
		n += size(g.mod)
	}
	for i, l := range g.linked {
		if g.m.linked[i].ownMemory {
			n += size(l.mod)
		}
	}
	return uint32(min(n, math.MaxUint32))
}

// Close closes the instance's modules and gives its kernel's memory back.
func (g *instance) Close() {
	ctx := context.Background()
	if g.mod != nil {
		g.mod.Close(ctx)
	}
	for _, l := range g.linked {
		l.mod.Close(ctx)
	}
	g.kernel.Close()
}

// instanceKey is the context key under which morph's host functions
// find the guest whose call they serve.
type instanceKey struct{}

// guestOf is the guest of the call ctx belongs to.
func guestOf(ctx context.Context) *instance {
	g, ok := ctx.Value(instanceKey{}).(*instance)
	if !ok {
		panic("morph: Extism host function called outside a call")
	}
	return g
}

// Call runs export in the module's convention. The deadline, the caller's
// cancellation and the plugin's Close reach the guest through its
// instrumentation (guest.CallState), as a native plugin's.
func (g *instance) Call(ctx context.Context, deadline time.Time, export string, input []byte, maxOut int) (view []byte, err error) {
	ctx = g.ctx(g.state.Begin(ctx, deadline))
	switch {
	case g.m.morph:
		if !g.m.Exports(export) {
			return nil, guest.Fail(guest.ErrABIMismatch, "the module does not export it", nil)
		}
		return g.invoke(ctx, export, input, maxOut)
	case export == abi.ExportDescribe:
		return g.describe(ctx, maxOut)
	case export == abi.ExportCallTool:
		return g.callTool(ctx, input, maxOut)
	case g.m.mcp != nil && g.m.mcp.methods[export] != "":
		return g.mcpRequest(ctx, g.m.mcp.methods[export], input, maxOut)
	}
	if name, ok := g.m.hooks[export]; ok {
		return g.invoke(ctx, name, input, maxOut)
	}
	return nil, guest.Fail(guest.ErrABIMismatch, "the module does not serve it", nil)
}

// invoke calls export, as go-sdk's Plugin.Call does, and returns the
// output in place in the kernel's memory. A trap, or an exit other than 0
// (a command module's _start), is guest.ErrTrap, which the plugin tells
// from a timeout; else the error the guest set is guest.ErrGuest, and so
// is a non-zero return code without one.
func (g *instance) invoke(ctx context.Context, export string, input []byte, maxOut int) (view []byte, err error) {
	fn, ok := g.fns[export]
	if !ok {
		fn = g.mod.ExportedFunction(export)
		g.fns[export] = fn
	}
	if fn == nil {
		return nil, guest.Fail(guest.ErrABIMismatch, "the module does not export it", nil)
	}
	if len(g.m.lazyInit) > 0 && !g.initialized && export != "_start" && export != "_initialize" {
		g.initialized = true
		if err := g.m.lazyInit.Run(ctx, g.mod); err != nil {
			return nil, guest.Fail(guest.ErrTrap, "the runtime's initialization", err)
		}
	}
	g.kernel.Reset()
	if err := g.kernel.SetInput(input); err != nil {
		return nil, err
	}
	g.stack[0] = 0
	if err := fn.CallWithStack(ctx, g.stack); err != nil {
		var exit *sys.ExitError
		switch {
		case errors.As(err, &exit) && exit.ExitCode() == 0:
		case errors.Is(err, sandbox.ErrNotGranted) || errors.Is(err, sandbox.ErrHostNotAllowed):
			return nil, guest.Fail(sandbox.ErrNotGranted, "", err) // a refused http_request (Module.httpRequest)
		default:
			return nil, guest.Fail(guest.ErrTrap, "", err)
		}
	}
	if msg := g.kernel.Error(); len(msg) > 0 {
		return nil, guest.Fail(guest.ErrGuest, string(msg), nil)
	}
	if rc := int32(g.stack[0]); len(fn.Definition().ResultTypes()) > 0 && rc != 0 {
		return nil, guest.Fail(guest.ErrGuest, fmt.Sprintf("returned %d without an error message", rc), nil)
	}
	return g.kernel.Output(maxOut)
}
