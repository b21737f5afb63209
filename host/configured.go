package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/extism"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/interrupt"
)

// Modules of the Extism ecosystem that follow neither morph's ABI nor an
// MCP tool convention are made usable by configuration: their plain exports
// become tools (ExportTool) or hooks (Config.HookExports), several modules
// link by name (LinkedModule), and the embedding host provides the host
// functions they import (HostFunction). A module with any of it set runs on
// the Extism loader, whether or not it imports anything of Extism's. A
// module that exports morph_describe says itself what it serves: one with
// Tools or HookExports set fails to load.

// ExportTool makes a plain export of an Extism module (count_vowels, run,
// greet, ...: a function () -> i32 that reads its input and sets its
// output in Extism's calling convention) a tool the model can call.
type ExportTool struct {
	Export      string // the module's export
	Name        string // the tool's name; default Export
	Description string // what the model reads of the tool; say what it returns
	// Input is how the call's arguments become the export's input: "json"
	// (or empty), the arguments object as JSON; "field:NAME", the bytes of
	// the string argument NAME, for exports that take plain text.
	Input string
	// Parameters is the JSON Schema of the arguments. Default: for
	// "field:NAME", an object whose one property NAME is a required string;
	// for "json", any object.
	Parameters json.RawMessage
	// The export's output is the tool's result, which must be UTF-8 text:
	// bytes that are not are a bad output (ErrBadOutput).
}

// LinkedModule is a module an Extism plugin's main module (Config.Path)
// imports functions from by name, as Extism manifests with several
// modules link them (go-sdk's Manifest.Wasm). It is read and checked as
// the main module is, and runs in the same sandbox, under the same limits:
// its memory counts within the plugin's memory_mb with the main module's,
// and the main module and its linked modules share max_stack_kb evenly.
// Each instance of the plugin has its own instance of it; a plugin with
// linked modules has no snapshot (Config.NoSnapshot).
type LinkedModule struct {
	Name   string // the module name the main module imports from
	Path   string // the .wasm file; ignored when Wasm is set
	Wasm   []byte
	SHA256 string // optional pin, as Config.SHA256: pin every module of a plugin whose main one is pinned
}

// HostFunction is a Go function an Extism plugin imports from
// extism:host/user, for an embedding host to give plugins what they need of
// it (morph provides those of hyper-mcp's MCP plugin interface: see
// Config.HostFunctions). Params and Results are the wasm signature the
// import must have; Extism passes memory as i64 offsets of blocks, which
// HostCall reads and writes.
type HostFunction struct {
	// Module is the module the plugin imports it from; "": extism:host/user.
	Module          string
	Name            string
	Params, Results []api.ValueType
	// Func runs on the guest's call: ctx ends at the call's deadline (or
	// when the plugin closes), and Func must return by then. ctx, call and
	// stack are valid only until Func returns: the instance reuses them for
	// its next call, so Func must not keep them, nor use them from another
	// goroutine after it returned. stack holds the parameters in and takes
	// the results out. An error traps the guest's call, which fails with
	// ErrTrap and its message, and the instance is replaced.
	Func func(ctx context.Context, call *HostCall, stack []uint64) error
}

// HostCall is what a HostFunction knows of the call it serves.
type HostCall struct {
	Plugin string // the plugin's name
	// Grants are the plugin's: a function that reaches files, the
	// environment or the network on the plugin's behalf should reach only
	// what they grant.
	Grants Grants
	mem    guest.BlockMemory
}

// Read is a copy of the Extism memory block at offset, which the guest
// passed: at most the plugin's output limit.
func (c *HostCall) Read(offset uint64) ([]byte, error) { return c.mem.Read(offset) }

// Write copies b into a new Extism memory block and returns its offset,
// for the guest to read: at most the plugin's input limit.
func (c *HostCall) Write(b []byte) (uint64, error) { return c.mem.Write(b) }

// extismParts are the checked Extism-only parts of a plugin's Config, as
// the Extism loader takes them.
type extismParts struct {
	tools       []guest.ExportTool
	hookExports map[string]string // ABI v1 export -> the module's
	linked      []guest.LinkedModule
	hostFuncs   []guest.HostFunc
}

// extismParts checks cfg's Extism-only parts and resolves them: each
// error names the setting.
func (l *Loader) extismParts(cfg Config) (extismParts, error) {
	var x extismParts
	var errs []error
	for i, t := range cfg.Tools {
		et, err := exportTool(t)
		if err != nil {
			errs = append(errs, fmt.Errorf("tools[%d]: %w", i, err))
			continue
		}
		if slices.ContainsFunc(x.tools, func(o guest.ExportTool) bool { return o.Spec.Name == et.Spec.Name }) {
			errs = append(errs, fmt.Errorf("tools[%d]: a second tool named %q", i, et.Spec.Name))
		}
		x.tools = append(x.tools, et)
	}
	for hook, export := range cfg.HookExports {
		h, ok := abi.HookByName(hook)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("hook_exports: %q is no hook (see abi.Hooks)", hook))
		case export == "":
			errs = append(errs, fmt.Errorf("hook_exports: %s names no export", hook))
		default:
			if x.hookExports == nil {
				x.hookExports = map[string]string{}
			}
			x.hookExports[h.Export] = export
		}
	}
	names := map[string]bool{}
	for i, lm := range cfg.Modules {
		if lm.Name == "" || lm.Name == "main" || strings.HasPrefix(lm.Name, "extism:") && lm.Name != extism.UserModule || extism.ReservedModule(lm.Name) || names[lm.Name] {
			errs = append(errs, fmt.Errorf("modules[%d]: name %q: give each linked module the unique name its importer uses "+
				"(not main, extism:* but %s, WASI's or %s, the namespace of morph's instrumentation)", i, lm.Name, extism.UserModule, interrupt.Module))
			continue
		}
		names[lm.Name] = true
		src, err := l.readModule(Config{Path: lm.Path, Wasm: lm.Wasm, SHA256: lm.SHA256})
		if err != nil {
			errs = append(errs, fmt.Errorf("modules[%d] (%s): %w", i, lm.Name, err))
			continue
		}
		x.linked = append(x.linked, guest.LinkedModule{Name: lm.Name, Wasm: src.wasm, Sum: src.sum})
	}
	for i, f := range cfg.HostFunctions {
		switch {
		case f.Name == "" || f.Func == nil:
			errs = append(errs, fmt.Errorf("host_functions[%d]: a host function needs a Name and a Func", i))
			continue
		case extism.ReservedModule(f.Module) || names[f.Module] && f.Module != extism.UserModule:
			// a linked module named extism:host/user adds to the
			// namespace's host functions (extism.checkUserClash)
			errs = append(errs, fmt.Errorf("host_functions[%d] (%s): module %q is Extism's, morph's, WASI's or a linked module's", i, f.Name, f.Module))
			continue
		}
		grants := cfg.Grants
		x.hostFuncs = append(x.hostFuncs, guest.HostFunc{Module: f.Module, Name: f.Name, Params: f.Params, Results: f.Results,
			Call: func(ctx context.Context, mem guest.BlockMemory, stack []uint64) error {
				return f.Func(ctx, &HostCall{Plugin: cfg.Name, Grants: grants, mem: mem}, stack)
			}})
	}
	return x, errors.Join(errs...)
}

// CheckExportTool reports what is wrong with t, as Load would: for a
// configuration file's checks.
func CheckExportTool(t ExportTool) error {
	_, err := exportTool(t)
	return err
}

// exportTool checks t and fills in its defaults.
func exportTool(t ExportTool) (guest.ExportTool, error) {
	et := guest.ExportTool{Export: t.Export, Spec: abi.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters}}
	if t.Export == "" {
		return et, errors.New("export: name the module's export the tool calls")
	}
	if et.Spec.Name == "" {
		et.Spec.Name = t.Export
	}
	if err := engine.CheckToolName(et.Spec.Name); err != nil {
		return et, fmt.Errorf("name: %w", err)
	}
	switch field, isField := strings.CutPrefix(t.Input, "field:"); {
	case t.Input == "" || t.Input == "json":
		if len(et.Spec.Parameters) == 0 {
			et.Spec.Parameters = json.RawMessage(`{"type":"object"}`)
		}
	case isField && field != "":
		et.Field = field
		if len(et.Spec.Parameters) == 0 {
			et.Spec.Parameters, _ = json.Marshal(map[string]any{"type": "object",
				"properties": map[string]any{field: map[string]any{"type": "string"}}, "required": []string{field}})
		}
	default:
		return et, fmt.Errorf("input %q: want \"json\" (the arguments as JSON) or \"field:NAME\" (the string argument NAME)", t.Input)
	}
	var schema map[string]any
	if err := json.Unmarshal(et.Spec.Parameters, &schema); err != nil {
		return et, fmt.Errorf("parameters: not a JSON Schema object: %w", err)
	}
	return et, nil
}

// toolWatch is how a plugin's tools follow its notify_tool_list_changed:
// the call that said so ends with its instance describing its tools again,
// and the engine gets the new list. A plugin has one list for every
// session, so this holds only for a plugin that runs one instance, pooled
// (isolation = "pooled", max_instances = 1, as an MCP server is one
// process): with several instances, or one per session, one instance's
// list would be offered for all of them, and the change is ignored, with a
// warning. When the instance is discarded (a fault), the engine gets the
// initial list back: the instance that replaces it starts with it.
type toolWatch struct {
	mu      sync.Mutex
	changed bool           // tools replaces the manifest's
	tools   []abi.ToolSpec // the current list, once changed
	update  func(ctx context.Context, tools []engine.Tool) error
	warned  atomic.Bool
}

// refreshTools describes inst again, the call it has just run having said
// the plugin's tools changed, and gives the engine the new list. The caller
// holds inst, so nothing else runs on it meanwhile. Failures are logged:
// the old list stays.
//
// The description has the plugin's timeout of its own (Details.CallBound
// counts it apart from the call's), not the deadline of the middleware
// hook call ctx may belong to (callDeadline): the call that said the tools
// changed may have used that up, and the change would be lost.
func (p *Plugin) refreshTools(ctx context.Context, inst *instance) {
	if p.mode != IsolationPooled || p.limits.MaxInstances != 1 {
		if !p.watch.warned.Swap(true) {
			p.log.WarnContext(ctx, "the plugin says its tools changed, which morph applies only to a plugin of one pooled instance "+
				"(its tools are one list for every session): set isolation = \"pooled\" and max_instances = 1; ignored",
				"isolation", p.mode, "max_instances", p.limits.MaxInstances)
		}
		return
	}
	view, err := inst.g.Call(ctx, time.Now().Add(p.limits.Timeout), abi.ExportDescribe, nil, p.limits.MaxOutputBytes)
	var m abi.Manifest
	if err == nil {
		if derr := guest.DecodeJSON(view, p.limits.MaxJSONDepth, &m); derr != nil {
			err = guest.Fail(ErrBadOutput, "", derr)
		}
	}
	if err != nil {
		p.log.WarnContext(ctx, "the plugin's tools changed, but describing them failed; the old list stays",
			"err", p.failure(abi.ExportDescribe, p.classified(ctx, err)))
		return
	}
	p.watch.mu.Lock()
	defer p.watch.mu.Unlock() // held through update: lists reach the engine in order
	p.watch.changed, p.watch.tools = true, m.Tools
	p.log.InfoContext(ctx, "the plugin's tool list changed", "tools", len(m.Tools))
	if p.watch.update != nil {
		if err := p.watch.update(ctx, p.toolsOf(m.Tools)); err != nil {
			p.log.WarnContext(ctx, "the engine refused the plugin's new tools", "err", err)
		}
	}
}

// resetTools gives the engine the plugin's initial tools again when the
// instance whose list changed is discarded (a fault): the instance that
// replaces it starts with them, and the engine must not offer a tool it
// has not (see toolWatch).
func (p *Plugin) resetTools(ctx context.Context) {
	p.watch.mu.Lock()
	defer p.watch.mu.Unlock() // held through update: lists reach the engine in order
	if !p.watch.changed {
		return
	}
	p.watch.changed, p.watch.tools = false, nil
	p.log.InfoContext(ctx, "the plugin's instance was replaced: its tool list is its initial one again", "tools", len(p.manifest.Tools))
	if p.watch.update != nil {
		if err := p.watch.update(ctx, p.toolsOf(p.manifest.Tools)); err != nil {
			p.log.WarnContext(ctx, "the engine refused the plugin's initial tools", "err", err)
		}
	}
}

// toolSpecs are the plugin's tools: its manifest's, or the list its last
// change gave (see toolWatch).
func (p *Plugin) toolSpecs() []abi.ToolSpec {
	p.watch.mu.Lock()
	defer p.watch.mu.Unlock()
	if p.watch.changed {
		return p.watch.tools
	}
	return p.manifest.Tools
}
