// Package extism is the Extism loader: it runs a module written with an
// Extism PDK (one that imports extism:host/env) through
// github.com/extism/go-sdk, in morph's sandbox and under its limits, so that
// plugins of the Extism ecosystem work unchanged. Detect tells such a module
// by its imports, Load compiles and checks one, and its instances serve
// ABI v1's calls in Extism's calling convention, or, for an Extism tool
// plugin, morph_describe and morph_call_tool through its describe and call.
//
// It reads the binary with package wasmbin (binary.go) and provides the
// host functions morph overrides in place of go-sdk's (imports.go); what it
// shares with the host, and the native loader, is package guest.
package extism

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/host/internal/sandbox"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// extismEnv is Extism's host namespace; a module importing from it is an
// Extism module. extismMorphEnv is where the functions morph provides in
// place of go-sdk's own are (extismOverrideTypes).
const (
	extismEnv      = "extism:host/env"
	extismMorphEnv = "morph:extism/env"
)

// extismEnvFunctions are the functions go-sdk v1.7.1 provides in
// extism:host/env (host.go, instantiateEnvModule); importing any other
// name from it fails the load.
var extismEnvFunctions = map[string]bool{
	"alloc": true, "free": true, "load_u8": true, "input_load_u8": true, "store_u64": true, "store_u8": true,
	"input_set": true, "output_set": true, "input_length": true, "input_offset": true, "output_length": true,
	"output_offset": true, "length": true, "length_unsafe": true, "reset": true, "error_set": true, "error_get": true,
	"memory_bytes": true, "input_load_u64": true, "load_u64": true, "config_get": true, "var_get": true,
	"var_set": true, "http_request": true, "http_status_code": true, "http_headers": true, "get_log_level": true,
	"log_trace": true, "log_debug": true, "log_info": true, "log_warn": true, "log_error": true,
}

// KernelPages is the initial size, in 64 KiB pages, of the memory of
// the Extism kernel embedded in go-sdk v1.7.1 (extism-runtime.wasm v1.7.0:
// `(memory 16)`), which holds each call's input and output. The kernel
// accounts for only its first page and grows from its initial size, so its
// first block after a reset holds at most (max pages - 15) pages less its
// 64-byte root, counted twice, and the block's 12-byte header (extism
// kernel/src/lib.rs, MemoryRoot::alloc); TestExtismInputLimit checks that
// arithmetic against the real kernel.
const KernelPages = 16

// extismKernelReserve is kept free in the kernel's memory beside the
// input: block headers, config values and log messages the guest reads or
// writes during a call (the output is reserved on top, see InputCap).
const extismKernelReserve = 64 << 10

// InputCap is the largest input the kernel can hold, with a memory of
// pages pages, beside an output of maxOut bytes. go-sdk does not report an
// input that does not fit: the kernel's alloc fails, go-sdk writes nowhere
// and the guest reads an empty or garbage input, so the host must not send
// one.
func InputCap(pages uint32, maxOut int) int {
	return (int(pages)-KernelPages+1)*PageBytes - 2*64 - 12 - extismKernelReserve - maxOut
}

// PageBytes is the size of a WebAssembly page, the unit of MaxPages.
const PageBytes = 64 << 10

// Module is a module written with an Extism PDK, compiled once by
// go-sdk; each instance is a go-sdk Plugin (instance). It follows one of
// the conventions of the Extism ecosystem, which morph serves as ABI v1:
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
	compiled *sdk.CompiledPlugin
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
	// maxInput is the plugin's input limit, lowered to what the kernel can
	// hold beside an output (InputCap).
	maxInput int
}

// Load compiles an Extism module with go-sdk and checks it: its
// imports (extism:host/env and WASI only; Extism's http_request, its
// output and its log functions renamed to morph's, see extismOverrideTypes),
// and its exports (morph_describe, or describe and call; each `() -> i32`).
// The kind of a failure is guest.ErrABIMismatch for exports, guest.ErrLoad otherwise.
//
// The sandbox is morph's, not go-sdk's defaults: the plugin's runtime has
// the loader's compilation cache, closes a module when its call's context
// ends (wazero's WithCloseOnContextDone, not the native loader's
// instrumentation: the Extism kernel is go-sdk's to compile, and a guest can
// drive it into an endless loop by corrupting its own kernel memory, which
// only wazero's mechanism stops), and caps every memory at
// Limits.MemoryMiB, the guest's and the Extism kernel's alike (so an
// Extism plugin may use up to twice that) and the guest's tables as a
// native plugin's (wasmbin.CapTables); the guest gets no arguments,
// only the directories and environment variables of its grants (the
// plugin's sandbox, as a native plugin), its http_request goes through the
// plugin's HTTP grant, it has real clocks and the host's CSPRNG, and its
// stdout and stderr go to the log as a native plugin's do.
// The input limit is lowered to what the kernel can hold (InputCap, see
// Module.MaxInputBytes), and Extism vars share the output limit per
// instance. exports are all the module's exports (wasmbin.Shape's).
//
// The ABI v1 marker export (morph_abi_v1) is neither required nor checked:
// it tells the native calling convention's version from the exports, while
// an Extism module is recognized by its imports and its payloads' version
// is its manifest's abi_version.
func Load(ctx context.Context, env guest.Env, wasm []byte, exports []wasmbin.Export) (_ *Module, kind error, err error) {
	info, err := parseWasm(wasm, true)
	if err != nil {
		return nil, guest.ErrLoad, fmt.Errorf("read the module: %w", err)
	}
	userFuncs := userFunctions(env)
	linkedNames := map[string]bool{}
	for _, lm := range env.Linked {
		linkedNames[lm.Name] = true
	}
	if err := checkExtismImports(info, userFuncs, linkedNames); err != nil {
		return nil, guest.ErrLoad, err
	}
	m := &Module{env: env, exported: info.exports, maxInput: env.Limits.MaxInputBytes}
	if err := m.checkExports(exports); err != nil {
		return nil, guest.ErrABIMismatch, err
	}
	if !m.morph {
		m.name = env.Name
		if m.name == env.Source { // no configured name: the file's
			m.name = strings.TrimSuffix(filepath.Base(env.Source), ".wasm")
		}
	}
	pages := env.Limits.MemoryMiB * (1 << 20 / PageBytes)
	limit := InputCap(pages, env.Limits.MaxOutputBytes)
	if limit <= 0 {
		return nil, guest.ErrLoad, fmt.Errorf("memory_mb %d leaves the Extism kernel no room for an input beside a %d-byte output; raise memory_mb or lower max_output_kb",
			env.Limits.MemoryMiB, env.Limits.MaxOutputBytes)
	}
	if limit < env.Limits.MaxInputBytes {
		env.Log().InfoContext(ctx, "Extism plugin: input limit lowered to what its kernel memory holds",
			"max_input_bytes", limit, "configured", env.Limits.MaxInputBytes, "memory_mib", env.Limits.MemoryMiB)
		m.maxInput = limit
	}
	if _, ok := os.LookupEnv("EXTISM_ENABLE_WASI_OUTPUT"); ok {
		env.Log().WarnContext(ctx, "EXTISM_ENABLE_WASI_OUTPUT is set: go-sdk sends this Extism plugin's stdout and stderr to the process's, past morph's log limit")
	}
	// go-sdk makes the last module of the manifest the main one.
	var modules []sdk.Wasm
	for _, lm := range env.Linked {
		lwasm, err := prepareLinked(lm, userFuncs, linkedNames, env.TableEntries)
		if err != nil {
			return nil, guest.ErrLoad, err
		}
		modules = append(modules, sdk.WasmData{Data: lwasm, Name: lm.Name})
	}
	if wasm, err = prepare(wasm, info, env.TableEntries); err != nil {
		return nil, guest.ErrLoad, err
	}
	manifest := sdk.Manifest{
		Wasm:   append(modules, sdk.WasmData{Data: wasm, Name: "main"}),
		Memory: &sdk.ManifestMemory{MaxPages: pages, MaxVarBytes: int64(env.Limits.MaxOutputBytes)},
		Config: env.Values,
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	m.compiled, err = sdk.NewCompiledPlugin(guest.WithWASIGuard(ctx), manifest, sdk.PluginConfig{ // see wasiGuard
		RuntimeConfig: wazero.NewRuntimeConfig().
			WithCompilationCache(env.Cache).
			WithCloseOnContextDone(true).
			WithMemoryLimitPages(pages),
		EnableWasi: true, // go-sdk runs a WASI reactor's _initialize only then
	}, append(m.hostFunctions(), m.userHostFunctions(userFuncs)...))
	if err != nil {
		return nil, guest.ErrLoad, fmt.Errorf("compile: %w", err)
	}
	return m, nil, nil
}

// compileMu makes Extism compilations one at a time. Runtimes that share
// a compilation cache share wazero's engine, and its CompileModule sets
// the listeners of a module it already holds without a lock (wazevo
// engine.go, wazero v1.12.0): go-sdk compiles its kernel into every
// plugin's runtime, with morph's WASI guard as listener factory, so two
// Extism loads at once wrote the same compiled kernel (a data race the
// race detector reported with parallel loads).
var compileMu sync.Mutex

// prepare is wasm as go-sdk compiles it: the imports morph overrides
// renamed to its namespace, its tables capped.
func prepare(wasm []byte, info *wasmModule, tableEntries uint32) ([]byte, error) {
	return wasmbin.CapTables(renameImports(wasm, info, extismEnv, extismMorphEnv, extismOverridden), tableEntries)
}

// prepareLinked checks a linked module as the main one (its imports) and
// prepares it; the error names it.
func prepareLinked(lm guest.LinkedModule, user map[hostFuncKey]guest.HostFunc, linked map[string]bool, tableEntries uint32) ([]byte, error) {
	fail := func(err error) ([]byte, error) { return nil, fmt.Errorf("linked module %q: %w", lm.Name, err) }
	info, err := parseWasm(lm.Wasm, true)
	if err != nil {
		return fail(fmt.Errorf("read the module: %w", err))
	}
	if err := checkExtismImports(info, user, linked); err != nil {
		return fail(err)
	}
	wasm, err := prepare(lm.Wasm, info, tableEntries)
	if err != nil {
		return fail(err)
	}
	return wasm, nil
}

// checkExtismImports accepts functions of extism:host/env that go-sdk
// provides, with the signatures of those morph overrides; functions of
// extism:host/user that are provided (user), with their signatures;
// functions of the linked modules; and WASI; nothing else.
func checkExtismImports(info *wasmModule, user map[hostFuncKey]guest.HostFunc, linked map[string]bool) error {
	var errs []error
	for _, imp := range info.imports {
		switch {
		case imp.Kind != wasmbin.KindFunction:
			errs = append(errs, fmt.Errorf("imports %s.%s, which is not a function: an Extism plugin may import functions only", imp.Module, imp.Name))
		case imp.Module == extismEnv && !extismEnvFunctions[imp.Name]:
			errs = append(errs, fmt.Errorf("imports %s.%s, which Extism (go-sdk v1.7.1) does not provide", imp.Module, imp.Name))
		case imp.Module == extismEnv:
			if want, ok := extismOverrideTypes[imp.Name]; ok && !imp.fn.Equal(want) {
				errs = append(errs, fmt.Errorf("imports %s.%s with signature %s, want %s", imp.Module, imp.Name, signature(imp.fn), signature(want)))
			}
		case imp.Module == extismUser || user[hostFuncKey{imp.Module, imp.Name}].Call != nil:
			f, ok := user[hostFuncKey{imp.Module, imp.Name}]
			want := wasmbin.Signature{Params: f.Params, Results: f.Results}
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("imports %s.%s, a host function neither morph nor the embedding host provides "+
					"(morph provides %s; a Go program embedding morph can add one with host.Config.HostFunctions)",
					imp.Module, imp.Name, strings.Join(builtinUserNames(), ", ")))
			case !imp.fn.Equal(want):
				errs = append(errs, fmt.Errorf("imports %s.%s with signature %s, but the host function provided is %s", imp.Module, imp.Name, signature(imp.fn), signature(want)))
			}
		case linked[imp.Module]:
			// go-sdk links it; a missing or mistyped function fails the compile, named
		case imp.Module != "wasi_snapshot_preview1":
			errs = append(errs, fmt.Errorf("imports %s.%s: an Extism plugin may import only %s, %s (host functions), wasi_snapshot_preview1, "+
				"the modules linked to it (the plugin's modules) and the host functions a Go program embedding morph gives it (host.Config.HostFunctions)",
				imp.Module, imp.Name, extismEnv, extismUser))
		}
	}
	return errors.Join(errs...)
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
// configured: go-sdk calls a function () -> i32, whose result is its
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
// the modules it imports from besides Extism's and WASI (linked modules,
// or an embedding host's host functions). A module that
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
		case imp.Module != extismEnv && imp.Module != "wasi_snapshot_preview1" && !slices.Contains(modules, imp.Module):
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

// MaxInputBytes is the plugin's input limit, lowered to what the Extism
// kernel's memory holds: the host refuses a larger input before the call,
// since go-sdk would hand the guest an empty or garbage one.
func (m *Module) MaxInputBytes() int { return m.maxInput }

// Close releases the compiled module and its instances.
func (m *Module) Close(ctx context.Context) error { return m.compiled.Close(ctx) }

// Instantiate makes a go-sdk Plugin of the module whose WASI and output
// answer to state.
func (m *Module) Instantiate(ctx context.Context, state *guest.CallState, arena *memory.Arena) (guest.Instance, error) {
	pl, err := m.compiled.Instance(experimental.WithMemoryAllocator(ctx, arena), sdk.PluginInstanceConfig{ModuleConfig: guest.Config(m.env.Sandbox, state)})
	if err != nil {
		return nil, err
	}
	return &instance{m: m, plugin: pl, state: state}, nil
}

// instance is one go-sdk Plugin, with what morph's host functions keep
// of its current call.
type instance struct {
	m      *Module
	plugin *sdk.Plugin
	state  *guest.CallState

	// out is the output range the guest last set with output_set: morph's
	// output_set records it, and the host reads it in place after the call.
	out struct{ offset, length uint64 }
	// The last http_request's response status and headers, for
	// http_status_code and http_headers.
	httpStatus  int32
	httpHeaders map[string]string
}

// MemoryBytes is the size of the Extism kernel's memory, where the calls'
// inputs and outputs are: go-sdk does not expose the guest module's own.
func (g *instance) MemoryBytes() uint32 { return g.plugin.Memory().Size() }

// Close closes the go-sdk Plugin.
func (g *instance) Close() { g.plugin.Close(context.Background()) }

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

// Call enforces the deadline through the context, as go-sdk's runtime
// closes a module whose context is done (Extism modules are not instrumented).
func (g *instance) Call(ctx context.Context, deadline time.Time, export string, input []byte, maxOut int) (view []byte, err error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	defer context.AfterFunc(g.m.env.Closing, cancel)() // the plugin's Close ends the call
	ctx = g.state.Begin(ctx, deadline)
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

// invoke calls export through go-sdk and returns the output in place in the
// kernel's memory. The kernel's error, set by the guest, is guest.ErrGuest; a
// failure of the call itself is guest.ErrTrap, which the plugin tells from a
// timeout.
func (g *instance) invoke(ctx context.Context, export string, input []byte, maxOut int) (view []byte, err error) {
	g.out.offset, g.out.length = 0, 0
	rc, _, err := g.plugin.CallWithContext(context.WithValue(ctx, instanceKey{}, g), export, input)
	if err != nil {
		// go-sdk returns the kernel's error as errors.New(message) and a
		// failed call as wazero's error, which is an exit or carries the wasm
		// stack: a message with a stack is a trap even if the guest set it.
		var exit *sys.ExitError
		if m := g.plugin.GetError(); m != "" && m == err.Error() && !errors.As(err, &exit) && !strings.Contains(m, "wasm stack trace") {
			return nil, guest.Fail(guest.ErrGuest, m, nil)
		}
		if errors.Is(err, sandbox.ErrNotGranted) || errors.Is(err, sandbox.ErrHostNotAllowed) {
			return nil, guest.Fail(sandbox.ErrNotGranted, "", err) // a refused http_request (Module.httpRequest)
		}
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err) // go-sdk's "failed to initialize runtime: %v" drops the cause
		}
		return nil, guest.Fail(guest.ErrTrap, "", err)
	}
	if rc != 0 {
		return nil, guest.Fail(guest.ErrGuest, fmt.Sprintf("returned %d without an error message", int32(rc)), nil)
	}
	off, n := g.out.offset, g.out.length
	if n > uint64(maxOut) {
		return nil, guest.Fail(guest.ErrOutputTooLarge, fmt.Sprintf("%d bytes, limit %d", n, maxOut), nil)
	}
	if off > math.MaxUint32 {
		return nil, guest.Fail(guest.ErrBadOutput, fmt.Sprintf("output [%d, +%d) is outside the Extism memory", off, n), nil)
	}
	view, ok := g.plugin.Memory().Read(uint32(off), uint32(n))
	if !ok {
		return nil, guest.Fail(guest.ErrBadOutput, fmt.Sprintf("output [%d, +%d) is outside the Extism memory", off, n), nil)
	}
	return view, nil
}
