// Package guest is what the host and its loaders share about running a
// module: the Module and Instance a loader gives the host, the Env the host
// gives a loader, the kinds of failure a call ends with, and what an
// instance's host functions know of the call they serve (CallState: its
// deadline, its caller's cancellation, its log budget, and the bounds on
// WASI's functions that follow from them).
//
// The loaders cannot import package host (it imports them): whatever both
// sides need is here, passed in as values.
package guest

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/host/internal/sandbox"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// Module is a compiled plugin as one loader holds it: ABI v1 directly on
// wazero or a module written with an Extism PDK. Everything above it
// (isolation, deadlines, fault classification, the engine adapters) is the
// host's, the same for every loader.
type Module interface {
	// Instantiate makes a fresh instance whose host functions and output
	// answer to state, its memories allocated by arena; ctx carries state,
	// which has the instantiation's deadline.
	Instantiate(ctx context.Context, state *CallState, arena *memory.Arena) (Instance, error)
	// Exports reports whether the module exports the ABI v1 export name.
	Exports(name string) bool
	// Close releases the compiled module and every instance of it.
	Close(ctx context.Context) error
}

// Instance is one live instance of a module, used by one goroutine at a time.
type Instance interface {
	// Call runs export with input and returns its output in place, valid
	// until the next call; a failure is a *CallError (its kind one of the
	// Err* kinds), and a success a nil error. The call ends at deadline, or
	// when ctx is done, whichever comes first.
	Call(ctx context.Context, deadline time.Time, export string, input []byte, maxOut int) (view []byte, err error)
	// MemoryBytes is the size of the instance's memories: its linear
	// memory, and an Extism instance's linked modules' and kernel's.
	MemoryBytes() uint32
	// Close closes the instance.
	Close()
}

// Env is what the host gives a loader about the plugin it loads, so that
// the loader reaches nothing of the host's Plugin but these values.
type Env struct {
	Name   string            // the plugin's name as configured (or its source)
	Source string            // the module's file, or "(bytes)"
	Limits Limits            // the plugin's limits a loader reads
	Values map[string]string // the plugin's own config (config_get)
	// Log is the plugin's logger: a function, because the plugin is named
	// after its manifest once loaded and its instances then log under that.
	Log     func() *slog.Logger
	Closing context.Context  // done when the plugin closes: calls in flight end
	Sandbox *sandbox.Sandbox // the plugin's grants, ready for its instances
	// Cache is the loader's compilation cache, shared by every plugin.
	Cache wazero.CompilationCache
	// TableEntries caps the module's tables altogether (wasmbin.CapTables).
	TableEntries uint32
	// Snapshot lets a loader start new instances from an image of the
	// first one after its initialization (see package wasmrt).
	Snapshot bool

	// For the Extism loader only (see extism.go): the host gives a plugin
	// with any of these to that loader.
	Tools       []ExportTool      // plain exports served as tools
	HookExports map[string]string // ABI v1 export -> the module's export that serves it
	Linked      []LinkedModule    // modules the main module imports from by name
	HostFuncs   []HostFunc        // extism:host/user functions, over morph's own
}

// Limits are the plugin's limits (host.Limits, with defaults) that a
// loader reads.
type Limits struct {
	MemoryMiB      uint32
	MaxInputBytes  int
	MaxOutputBytes int
	MaxJSONDepth   int
	MaxStackBytes  int // an instance's budget for its call stack (both loaders; see wasmrt.StackLimitError)
	MaxLinkedDepth int // how deep calls through an Extism plugin's linked modules nest (extism.LinkedDepthError)
}

// Config is the module configuration of an instance in any loader: real
// clocks (a standard Go guest stalls on wazero's fake ones), sleeps and the
// host's CSPRNG bounded by each call's deadline (see CallState), stdout and
// stderr into the instance's log budget, the directories and environment
// variables of the plugin's grants, and no arguments.
func Config(s *sandbox.Sandbox, state *CallState) wazero.ModuleConfig {
	return s.Configure(wazero.NewModuleConfig().
		WithSysNanotime().WithSysWalltime().WithNanosleep(state.sleep).
		WithRandSource(randReader{state}).
		WithStdout(state.log).WithStderr(state.log))
}

// DecodeJSON is how the host reads JSON a guest wrote: refused when it
// nests deeper than depth (abi.CheckDepth), which a few KB of brackets can,
// to make every later encoder and pretty-printer of it do quadratic work
// (an 18 KB fallback final became 324 MB of indented output).
func DecodeJSON(data []byte, depth int, v any) error {
	if err := abi.CheckDepth(data, depth); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// Truncate is at most the first n bytes of b, marked when cut: how a
// message quotes what a guest wrote.
func Truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// ValueTypes names value types as messages and reports show a signature's
// half: "(i32, i64)".
func ValueTypes(ts []api.ValueType) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = api.ValueTypeName(t)
	}
	return "(" + strings.Join(names, ", ") + ")"
}

// ExportKind names the kind of the export called name, if the module
// exports it (as what it is: a function, a memory, ...), so that a loader
// can say what a required export is instead of a function.
func ExportKind(exports []wasmbin.Export, name string) (kind string, ok bool) {
	for _, e := range exports {
		if e.Name == name {
			return wasmbin.KindNames[e.Kind], true
		}
	}
	return "", false
}

// CallExports lists every export of ABI v1 that the host calls with an
// input and that answers an output: those whose signature each loader
// checks in its own calling convention. The hooks' come from abi.Hooks, so
// that a hook added there is checked too.
func CallExports() []string {
	out := []string{abi.ExportDescribe, abi.ExportCallTool, abi.ExportDestroy, abi.ExportInstanceReplaced}
	for _, h := range abi.Hooks {
		out = append(out, h.Export)
	}
	return out
}
