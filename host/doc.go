// Package host loads WebAssembly plugins that implement morph's ABI (package
// abi) and turns them into the engine's hooks and tools.
//
// Each plugin gets its own wazero runtime, so that its memory cap is its own
// (wazero's limit is per runtime), while all plugins share one compilation
// cache, in memory and on disk, so a module compiles once per machine rather
// than once per process. Calls run with a deadline on an instance that only
// one goroutine uses at a time, drawn as the plugin's isolation mode says
// (Config.Isolation: pooled, per session or per call); an instance that
// traps or times out is discarded and the next call gets a fresh one.
// Loader.Reload replaces a plugin's module while it serves: new calls go to
// the new module, calls in flight and open sessions stay on the old one,
// which closes once they are gone.
//
// A plugin reaches nothing outside its memory but the log and its own config
// unless its Grants say so (deny by default): directories, environment
// variables and HTTP hosts, fixed at load.
//
// Where each idea lives:
//
//   - The public API: Loader, LoaderOptions, Config, Limits and the module
//     limits (loader.go); Load, Plugin, its calls and Stats (plugin.go);
//     the typed errors (errors.go); Inspect's Report
//     (inspect.go); Loader.Extender and Plugin.Extender, a
//     module as an engine.Extender: the way to embed a whole plugin
//     (extender.go); Grants (grants.go, converted at load for
//     internal/sandbox, which enforces them);
//     StackLimitError (errors.go, told from internal/wasmrt's trap).
//   - Choosing a loader: moduleLoaders, one row per way of running a module
//     (name, detect, load), which Load and Inspect consult (registry.go).
//   - The loaders' rows: the plugin as guest.Env, the native loader's
//     and the Extism loader's cache of instrumented modules (instrument.go,
//     over internal/interrupt; registry.go, over internal/native and
//     internal/extism).
//   - The call path shared by both loaders: the instance type and
//     Plugin.CallFunc (plugin.go); the free lists of the isolation modes,
//     the sessions that own their instances, their admission (max_sessions)
//     and expiry (isolation.go, idle.go).
//   - Hot reload: Loader.Reload, a plugin's versions, the routing of its
//     calls to them and the drain and close of replaced ones (reload.go).
//   - The engine adapters: hooks and tools (adapt.go), session middleware
//     (middleware.go); the pipeline's: a plugin's handle_stage as a
//     pipeline.Handler, and the handlers of an engine's plugins (stage.go).
//
// Internal packages, one idea each:
//
//   - internal/wasmbin: the bounds-checked reader of module binaries, and
//     the check of a module against ModuleLimits before anything compiles it.
//   - internal/interrupt: the rewrite that makes a guest check its deadline
//     and bound its call stack, and merges its data segments (a standard Go
//     module's 40,000 made each new instance several milliseconds slower).
//   - internal/memory: the instances' linear memories, mapped outside Go's
//     heap, and what they really hold (Plugin.Memory).
//   - internal/guest: what the host and the loaders share: the Module and
//     Instance a loader gives the host, the Env the host gives a loader,
//     the kinds of failure (which host re-exports as its Err* values) and a
//     call's failure (CallError), and
//     what a host function knows of the call it serves (CallState: its
//     deadline, its log budget, the bounds on WASI's own functions).
//   - internal/wasmrt: the runtime of a plugin's instrumented module, which
//     the loaders share: its own wazero runtime, compilation, WASI and the
//     imports the deadline and stack instrumentation calls, instances
//     initialized by the loader's Init or started from a snapshot.
//   - internal/native: the native loader, ABI v1 directly on wazero (over
//     internal/wasmrt): export and import checks, the call convention,
//     morph:host/v1's host functions (http_request included).
//   - internal/extism: the Extism loader, modules written with an Extism
//     PDK on internal/wasmrt: detection and the binary's imports and
//     exports (over internal/wasmbin), Extism's kernel in Go and
//     extism:host/env over it, host functions, linked modules, and Extism
//     tool plugins' convention.
//   - internal/sandbox: Grants made ready at load (the directories, the
//     environment, the HTTP client) and enforced for both loaders.
//
// The conformance runner behind `morph plugin test` is package host/conform,
// which uses only this package's public API.
package host
