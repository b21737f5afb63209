package guest

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/abi"
)

// What the Extism loader is given beyond a native plugin's Env: the
// configuration that makes a module of the wild usable (host.ExportTool,
// host.Config.HookExports, host.LinkedModule, host.HostFunction), checked
// and resolved by the host.

// ExportTool is a plain export served as a tool: the tool the model sees
// (Spec) and how its arguments become the export's input.
type ExportTool struct {
	Spec   abi.ToolSpec
	Export string
	// Field, when set, is the string argument whose bytes are the input;
	// empty, the arguments object's JSON is.
	Field string
}

// LinkedModule is a module the plugin's main module imports functions
// from, under Name.
type LinkedModule struct {
	Name string
	Wasm []byte
	Sum  [32]byte // sha256 of Wasm: the key of the host's cache of instrumented modules
}

// BlockMemory is the Extism kernel's memory of the call a host function
// serves: blocks the guest allocated, by offset.
type BlockMemory interface {
	// Read is a copy of the block at offset.
	Read(offset uint64) ([]byte, error)
	// Write copies b into a new block and returns its offset.
	Write(b []byte) (uint64, error)
}

// HostFunc is a function an Extism module imports from extism:host/user,
// or from the module Module.
// Call gets the call's context (its deadline), the kernel's memory and the
// wasm values: the parameters in, the results out; an error traps the
// guest's call with it.
type HostFunc struct {
	Module          string // the import's module; "": extism:host/user
	Name            string
	Params, Results []api.ValueType
	Call            func(ctx context.Context, mem BlockMemory, stack []uint64) error
}

// MCPExportPrefix starts the name under which the host calls an Extism
// module for an MCP method besides tools (MCPExport): not a name of ABI
// v1, and a module's own exports are not called by it.
const MCPExportPrefix = "morph:mcp "

// MCPExport is the name the host calls a module by for the MCP method
// (engine.MethodListPrompts, ...): the Extism loader serves it through the
// module's MCP convention, when that has an export for it.
func MCPExport(method string) string { return MCPExportPrefix + method }
