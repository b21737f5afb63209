package host

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/extism"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/sandbox"
)

// Report describes a module for `morph plugin inspect` and `check`: what it
// exports and imports, and, when it loads, its manifest.
type Report struct {
	Path     string        `json:"path"`
	Bytes    int           `json:"bytes"`
	SHA256   string        `json:"sha256"`
	Loader   string        `json:"loader"` // LoaderNative or LoaderExtism, by the module's imports
	Markers  []string      `json:"abi_markers"`
	Exports  []Signature   `json:"exports"`
	Imports  []Signature   `json:"imports"`
	Manifest *abi.Manifest `json:"manifest,omitempty"`
	Hooks    []string      `json:"hooks,omitempty"` // implemented hooks the host will call
	// Requests are the capabilities the module requests: its manifest's,
	// and http for an Extism module that imports extism:host/env
	// http_request (an Extism manifest cannot request it; the import is how
	// the module asks for it).
	Requests []string `json:"requested_capabilities,omitempty"`
	// Capabilities compare Requests with the grants of the Config given to
	// Inspect (with none, every request shows as not granted).
	Capabilities []CapabilityStatus `json:"capabilities,omitempty"`
	// Problems are the reasons the module cannot be loaded; empty when it can.
	Problems []string `json:"problems,omitempty"`
	// Suggested are morph.toml lines that would serve what the Config does
	// not of an Extism module that is not morph's: its plain exports as
	// tools, the modules it links to; and comments for the host functions
	// only an embedding host can give it. Strings in them are JSON-quoted,
	// which TOML reads.
	Suggested []string `json:"suggested_config,omitempty"`
}

// Signature is one exported or imported function.
type Signature struct {
	Module string `json:"module,omitempty"` // imports only
	Name   string `json:"name"`
	Type   string `json:"type"` // e.g. "(i32, i32) -> (i64)"
}

// Inspect reads the module at path and reports on it. The error is only for
// a file that cannot be read; everything wrong with the module itself is in
// Report.Problems.
func (l *Loader) Inspect(ctx context.Context, cfg Config) (*Report, error) {
	wasm := cfg.Wasm
	if wasm == nil {
		var err error
		if wasm, err = l.readFile(cfg.Path); err != nil {
			return nil, &Error{Plugin: cfg.Path, Kind: ErrLoad, Err: err}
		}
	}
	sum := sha256.Sum256(wasm)
	rep := &Report{Path: cfg.Path, Bytes: len(wasm), SHA256: hex.EncodeToString(sum[:])}
	if _, err := l.checkModule(wasm, sum); err != nil {
		rep.Problems = append(rep.Problems, err.Error())
		return rep, nil
	}
	rep.Loader = loaderOf(wasm, cfg).name
	if rep.Loader == LoaderExtism {
		rep.Suggested = suggest(cfg, wasm)
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(l.cache))
	defer r.Close(ctx)
	compiled, err := r.CompileModule(ctx, wasm)
	if err != nil {
		rep.Problems = append(rep.Problems, "does not compile: "+err.Error())
		return rep, nil
	}
	for name, def := range compiled.ExportedFunctions() {
		rep.Exports = append(rep.Exports, Signature{Name: name, Type: guest.ValueTypes(def.ParamTypes()) + " -> " + guest.ValueTypes(def.ResultTypes())})
		if strings.HasPrefix(name, abi.MarkerPrefix) {
			rep.Markers = append(rep.Markers, name)
		}
	}
	sort.Slice(rep.Exports, func(i, j int) bool { return rep.Exports[i].Name < rep.Exports[j].Name })
	sort.Strings(rep.Markers)
	for _, def := range compiled.ImportedFunctions() {
		mod, name, _ := def.Import()
		rep.Imports = append(rep.Imports, Signature{Module: mod, Name: name, Type: guest.ValueTypes(def.ParamTypes()) + " -> " + guest.ValueTypes(def.ResultTypes())})
	}
	cfg.Wasm = wasm
	if cfg.Name == "" {
		cfg.Name = cfg.Path
	}
	// Loaded with capabilities not granted put in the report only (not
	// failing the load, nor warned of); under UngrantedError they are a
	// problem, as Load would say.
	strict := cfg.Grants.Ungranted == UngrantedError
	cfg.Grants.Ungranted, cfg.inspecting = UngrantedWarn, true
	p, err := l.Load(ctx, cfg)
	if err != nil {
		// One problem per line: Load joins several reasons with newlines.
		rep.Problems = append(rep.Problems, strings.Split(err.Error(), "\n")...)
		return rep, nil
	}
	defer p.Close(ctx)
	m := p.Manifest()
	rep.Manifest, rep.Hooks, rep.Requests, rep.Capabilities = &m, slices.Clone(p.hooks), slices.Clone(m.Capabilities), p.Capabilities()
	if rep.Loader == LoaderExtism && importsExtismHTTP(rep.Imports) && !slices.Contains(rep.Requests, abi.CapabilityHTTP) {
		rep.Requests = append(rep.Requests, abi.CapabilityHTTP)
		rep.Capabilities = capabilityStatuses(p.sandbox.Capabilities(rep.Requests))
	}
	for _, t := range m.Tools { // what Initialize would refuse, as it would say it
		if err := engine.CheckToolSpec(t.Name, t.Description, string(t.Parameters), cfg.SchemaLimits); err != nil {
			rep.Problems = append(rep.Problems, err.Error())
		}
	}
	if missing := sandbox.NotGranted(p.sandbox.Capabilities(m.Capabilities)); strict && len(missing) > 0 {
		rep.Problems = append(rep.Problems, ungrantedError(p.name, missing).Error())
	}
	return rep, nil
}

// suggest is Report.Suggested for the Extism module wasm, loaded with cfg.
func suggest(cfg Config, wasm []byte) []string {
	exports, hostFuncs, modules, err := extism.Plain(wasm)
	if err != nil {
		return nil
	}
	exports = slices.DeleteFunc(exports, func(e string) bool {
		return slices.ContainsFunc(cfg.Tools, func(t ExportTool) bool { return t.Export == e }) || slices.Contains(slices.Collect(maps.Values(cfg.HookExports)), e)
	})
	modules = slices.DeleteFunc(modules, func(m string) bool {
		return slices.ContainsFunc(cfg.Modules, func(l LinkedModule) bool { return l.Name == m })
	})
	hostFuncs = slices.DeleteFunc(hostFuncs, func(f string) bool {
		return slices.ContainsFunc(cfg.HostFunctions, func(h HostFunction) bool { return h.Name == f }) ||
			slices.ContainsFunc(cfg.Modules, func(l LinkedModule) bool { return l.Name == extism.UserModule }) // Load checks its exports
	})
	if len(exports)+len(modules)+len(hostFuncs) == 0 {
		return nil
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	name := cmp.Or(cfg.Name, strings.TrimSuffix(filepath.Base(cfg.Path), ".wasm"))
	lines := []string{"[[plugins]]", "name = " + q(name), "path = " + q(cfg.Path)}
	for _, e := range exports {
		lines = append(lines, "[[plugins.tools]]", "export = "+q(e))
		if engine.CheckToolName(e) != nil {
			lines = append(lines, `name = "TOOL_NAME"  # the export's name cannot name a tool: letters, digits, '_', '-', '.'`)
		}
		lines = append(lines, "description = "+q("Calls the plugin's "+e+" export.")+"  # say what it does and returns",
			`input = "field:input"  # the text of one string argument; "json": the arguments as JSON`)
	}
	if len(modules) > 0 {
		lines = append(lines, "[plugins.modules]  # the modules it imports from, by name")
		for _, m := range modules {
			lines = append(lines, q(m)+" = "+q(m+".wasm"))
		}
	}
	for _, f := range hostFuncs {
		lines = append(lines, "# imports extism:host/user."+q(f)+": a Go program embedding morph can provide it (host.Config.HostFunctions), "+
			`or a module linked as "extism:host/user" that exports it (under [plugins.modules]: "extism:host/user" = "PATH")`)
	}
	return lines
}

// importsExtismHTTP reports whether imports hold Extism's http_request
// (extism:host/env), which an Extism module calls for the HTTP capability.
func importsExtismHTTP(imports []Signature) bool {
	return slices.ContainsFunc(imports, func(i Signature) bool { return i.Module == "extism:host/env" && i.Name == "http_request" })
}
