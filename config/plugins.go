package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
)

// PluginEntry is one [[plugins]] entry: a WebAssembly module implementing ABI v1
// (abi/SPEC.md). Zero limits take the host's defaults.
type PluginEntry struct {
	// Name names the plugin in logs, errors and events; required, unique.
	Name string `toml:"name"`
	// Path is the .wasm file, or a module in an OCI registry
	// (oci://REGISTRY/REPO:TAG or @sha256:HEX, see oci.go). Load resolves a
	// relative file path against the config file's directory.
	Path string `toml:"path"`
	// SHA256 optionally pins the module's bytes (hex).
	SHA256 string `toml:"sha256"`
	// Hooks are the hooks to enable; absent means every hook the plugin implements.
	Hooks []string `toml:"hooks"`
	// Timeout bounds each call into the plugin (default 2s).
	Timeout time.Duration `toml:"timeout"`
	// MemoryMB caps the plugin's linear memory (default 64).
	MemoryMB int `toml:"memory_mb"`
	// MaxInputKB caps the JSON sent to the plugin in one call (default 4096).
	MaxInputKB int `toml:"max_input_kb"`
	// MaxOutputKB caps what the plugin may answer in one call (default 1024).
	MaxOutputKB int `toml:"max_output_kb"`
	// MaxInstances caps the plugin's concurrent instances (default 4).
	MaxInstances int `toml:"max_instances"`
	// MaxLogKB caps what the plugin may log in one call: stdout, stderr and
	// log calls together, escaped (default 64).
	MaxLogKB int `toml:"max_log_kb"`
	// MaxErrorKB caps the text of one of the plugin's failures: its error
	// messages, a trap's stack of its function names (default 4).
	MaxErrorKB int `toml:"max_error_kb"`
	// MaxJSONDepth caps how deeply the plugin's answers may nest (default 64).
	MaxJSONDepth int `toml:"max_json_depth"`
	// MaxStackKB caps the call stack of each of the plugin's instances, as
	// the host estimates it (default 16384; native plugins only).
	MaxStackKB int `toml:"max_stack_kb"`
	// Config is the [plugins.config] table: values the plugin reads with config_get.
	Config map[string]string `toml:"config"`
	// Policy is what a failing middleware hook means: "fail_open" (default:
	// skip it) or "fail_closed" (a failing before_tool_call denies the call,
	// a failing before_run aborts the turn).
	Policy string `toml:"policy"`
	// QuarantineAfter consecutive faults disable the plugin's middleware (default 5).
	QuarantineAfter int `toml:"quarantine_after"`
	// QuarantineFor is the first quarantine's length (default 30s, doubling to 10m).
	QuarantineFor time.Duration `toml:"quarantine_for"`
	// Tools are the [[plugins.tools]] tables: plain exports of an Extism
	// module (count_vowels, run, ...) served as tools. `morph plugin inspect`
	// prints them for a module's exports.
	Tools []ExportToolEntry `toml:"tools"`
	// HookExports is the [plugins.hook_exports] table: hook name = the
	// Extism module's export that serves it, with the hook's payloads.
	HookExports map[string]string `toml:"hook_exports"`
	// Modules is the [plugins.modules] table: name = the module the Extism
	// plugin's main module (path) imports from by that name, a file or an
	// oci:// reference. Load resolves relative paths against the config
	// file's directory.
	Modules map[string]LinkedModuleEntry `toml:"modules"`
	// Verify is the [plugins.verify] table: who must have signed the
	// plugin (see PluginVerify); nil when absent.
	Verify *PluginVerify `toml:"verify"`

	// Isolation is which calls may share an instance, and so the guest's
	// state: "pooled" (any call reuses an idle instance), "session" (each
	// session has instances of its own until it ends or has made no call
	// for session_idle, then released with morph_destroy) or "call" (a
	// fresh instance per call, without morph_destroy). Default: "session"
	// for a plugin with an enabled middleware hook, "pooled" otherwise.
	Isolation string `toml:"isolation"`
	// SessionIdle, in session isolation, is how long a session may make no
	// call into the plugin before its instances are released (default
	// 10m); a session that calls later runs on a fresh instance, told so.
	SessionIdle time.Duration `toml:"session_idle"`
	// MaxSessions, in session isolation, caps the sessions open at once
	// (default 10000): past it a new session waits for session_wait, then
	// its calls fail naming this key; no open session loses its instance.
	MaxSessions int `toml:"max_sessions"`
	// SessionWait, in session isolation, is how long a new session waits
	// for a place when max_sessions are open (default 10s, shortened by a
	// middleware hook's own deadline).
	SessionWait time.Duration `toml:"session_wait"`

	// Snapshot, true when absent, starts new instances of a native ABI
	// plugin from an image of the first one after its initialization
	// (_initialize), mapped copy-on-write, instead of initializing each
	// (host.Config.NoSnapshot): false for a plugin whose initialization makes
	// something each instance must have its own of, such as a secret drawn
	// from random bytes.
	Snapshot *bool `toml:"snapshot"`

	// Grants, deny by default: without these keys a plugin reaches no file,
	// no environment variable and no host.

	// AllowedPaths are directories the plugin sees through WASI, each
	// "HOST_DIR[:GUEST_DIR][:ro|:rw]": HOST_DIR relative to the config
	// file's directory, GUEST_DIR absolute (default: HOST_DIR's absolute
	// path), read-only unless ":rw". Load checks them and rewrites each as
	// "ABSOLUTE_HOST_DIR:GUEST_DIR[:rw]", so the field holds paths usable
	// from the current directory.
	AllowedPaths []string `toml:"allowed_paths"`
	// AllowedHosts are the hosts the plugin's http_request may reach:
	// "api.example.com", "*.example.com" (names under it), optionally with
	// ":port"; every redirect hop is checked too.
	AllowedHosts []string `toml:"allowed_hosts"`
	// Env names the environment variables the plugin sees, with their
	// values when morph starts; never the model's API key (llm.api_key_env).
	Env []string `toml:"env"`
	// HTTPTimeout bounds one http_request, redirects included (default 10s).
	HTTPTimeout time.Duration `toml:"http_timeout"`
	// HTTPMaxResponseKB caps an HTTP response body (default 1024); a larger
	// one is an error, not a truncated body.
	HTTPMaxResponseKB int `toml:"http_max_response_kb"`
	// HTTPMaxRedirects caps the redirects one request follows (default 5; 0: none).
	HTTPMaxRedirects *int `toml:"http_max_redirects"`
	// Ungranted is what a capability the plugin's manifest requests and
	// these keys do not grant means: "warn" (default: a warning, and its
	// calls that need it fail) or "error" (the plugin fails to load).
	Ungranted string `toml:"ungranted"`
}

// LinkedModuleEntry is a [plugins.modules] value: "PATH", or
// { path = "PATH", sha256 = "HEX" } to pin it (host.LinkedModule).
type LinkedModuleEntry struct {
	Path   string
	SHA256 string
}

// UnmarshalTOML reads either form.
func (m *LinkedModuleEntry) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		m.Path = v
		return nil
	case map[string]any:
		m.Path, _ = v["path"].(string)
		m.SHA256, _ = v["sha256"].(string)
		delete(v, "path")
		delete(v, "sha256")
		if m.Path != "" && len(v) == 0 {
			return nil
		}
	}
	return errors.New(`want "PATH" or { path = "PATH", sha256 = "HEX" }`)
}

// ExportToolEntry is a [[plugins.tools]] table (host.ExportTool).
type ExportToolEntry struct {
	// Export is the module's export the tool calls; required.
	Export string `toml:"export"`
	// Name is the tool's name; default: the export's.
	Name string `toml:"name"`
	// Description is what the model reads of the tool.
	Description string `toml:"description"`
	// Input is "json" (default: the arguments as JSON) or "field:NAME"
	// (the string argument NAME, as bytes).
	Input string `toml:"input"`
	// Parameters is the arguments' JSON Schema: a TOML table, or a string
	// of JSON. Default: see host.ExportTool.
	Parameters any `toml:"parameters"`
}

// Discovery is the [discovery] table: where else plugins are found. Each
// *.wasm file found becomes a plugin named after the file, with default
// limits. Precedence, highest first: [[plugins]], plugins the embedding
// host passes, ./.morph/plugins, ~/.morph/plugins; of two plugins with one
// name the first is loaded and the other skipped (morph plugin status
// shows it).
type Discovery struct {
	// Project enables ./.morph/plugins (relative to the working directory); default true.
	Project *bool `toml:"project"`
	// User enables ~/.morph/plugins; default true.
	User *bool `toml:"user"`
}

// Directories are the discovery directories enabled, highest precedence first.
func (d Discovery) Directories() []string {
	var dirs []string
	if d.Project == nil || *d.Project {
		dirs = append(dirs, filepath.Join(".morph", "plugins"))
	}
	if home, err := os.UserHomeDir(); err == nil && (d.User == nil || *d.User) {
		dirs = append(dirs, filepath.Join(home, ".morph", "plugins"))
	}
	return dirs
}

// isSHA256 reports whether s is 64 hex digits.
func isSHA256(s string) bool {
	return len(s) == 64 && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// maxMemoryMB is the largest memory_mb: wasm32's 4 GiB address space.
const maxMemoryMB = 4096

func (v *validator) plugins() {
	seen := map[string]bool{}
	for i := range v.c.Plugins {
		p := &v.c.Plugins[i]
		key := func(field string) toml.Key { return toml.Key{"plugins", fmt.Sprint(i), field} }
		switch {
		case strings.TrimSpace(p.Name) == "":
			v.fail(key("name"), nil, "missing: every plugin needs a name")
		case seen[p.Name]:
			v.fail(key("name"), nil, "plugin name %q is used twice", p.Name)
		}
		seen[p.Name] = true
		if p.Path == "" {
			v.fail(key("path"), nil, "missing: plugin %q needs the path of its .wasm file", p.Name)
		} else if IsOCI(p.Path) {
			v.ociPath(key("path"), p.Name, p.Path)
		} else {
			if !filepath.IsAbs(p.Path) {
				p.Path = filepath.Join(filepath.Dir(v.c.File), p.Path)
			}
			if _, err := os.Stat(p.Path); err != nil {
				v.fail(key("path"), err, "plugin %q: module %s not found (a relative path is resolved against the config file's directory)", p.Name, p.Path)
			}
		}
		if p.SHA256 != "" && !isSHA256(p.SHA256) {
			v.fail(key("sha256"), nil, "plugin %q: want 64 hex digits", p.Name)
		}
		for _, h := range p.Hooks {
			if !slices.Contains(hookNames(), h) {
				v.fail(key("hooks"), nil, "plugin %q: unknown hook %q (hooks: %s)", p.Name, h, strings.Join(hookNames(), ", "))
			}
		}
		if v.pluginDefined(i, "timeout") && p.Timeout <= 0 {
			v.fail(key("timeout"), nil, "plugin %q: must be positive", p.Name)
		}
		if p.MemoryMB < 0 || p.MemoryMB > maxMemoryMB {
			v.fail(key("memory_mb"), nil, "plugin %q: must be between 1 and %d, got %d", p.Name, maxMemoryMB, p.MemoryMB)
		}
		if p.Policy != "" && p.Policy != PolicyFailOpen && p.Policy != PolicyFailClosed {
			v.fail(key("policy"), nil, "plugin %q: unknown policy %q (policies: %s, %s)", p.Name, p.Policy, PolicyFailOpen, PolicyFailClosed)
		}
		if p.Isolation != "" && !slices.Contains(host.IsolationModes(), p.Isolation) {
			v.fail(key("isolation"), nil, "plugin %q: unknown isolation %q (isolation: %s)", p.Name, p.Isolation, strings.Join(host.IsolationModes(), ", "))
		}
		for field, d := range map[string]time.Duration{"quarantine_for": p.QuarantineFor, "session_idle": p.SessionIdle, "session_wait": p.SessionWait} {
			if v.pluginDefined(i, field) && d <= 0 {
				v.fail(key(field), nil, "plugin %q: must be positive", p.Name)
			}
		}
		for field, n := range map[string]int{"max_input_kb": p.MaxInputKB, "max_output_kb": p.MaxOutputKB, "max_instances": p.MaxInstances,
			"quarantine_after": p.QuarantineAfter, "http_max_response_kb": p.HTTPMaxResponseKB, "max_log_kb": p.MaxLogKB,
			"max_error_kb": p.MaxErrorKB, "max_json_depth": p.MaxJSONDepth, "max_stack_kb": p.MaxStackKB, "max_sessions": p.MaxSessions} {
			top := highest(field)
			if field == "max_stack_kb" {
				top = host.StackLimitCeiling >> 10
			}
			if n < 0 || n > top {
				v.fail(key(field), nil, "plugin %q: must be from 0 to %d, got %d (0 or absent: the default)", p.Name, top, n)
			}
		}
		v.grants(i, p, key)
		v.extism(i, p, key)
	}
}

// extism checks a plugin's keys for Extism modules, and resolves the paths
// of its linked modules.
func (v *validator) extism(i int, p *PluginEntry, key func(string) toml.Key) {
	for j, t := range p.Tools {
		tkey := toml.Key{"plugins", fmt.Sprint(i), "tools", fmt.Sprint(j)}
		switch params := t.Parameters.(type) {
		case nil, map[string]any:
		case string:
			var schema map[string]any
			if err := json.Unmarshal([]byte(params), &schema); err != nil {
				v.fail(append(tkey, "parameters"), err, "plugin %q: not a JSON object (a JSON Schema): %v", p.Name, err)
				continue
			}
		default:
			v.fail(append(tkey, "parameters"), nil, "plugin %q: want a table or a string of JSON (a JSON Schema), got %T", p.Name, params)
			continue
		}
		if _, err := p.exportTool(t); err != nil {
			v.fail(tkey, err, "plugin %q: %v", p.Name, err)
		}
	}
	for hook, export := range p.HookExports {
		if !slices.Contains(hookNames(), hook) || export == "" {
			v.fail(append(key("hook_exports"), hook), nil, "plugin %q: want hook = \"export\" with a hook of %s", p.Name, strings.Join(hookNames(), ", "))
		}
	}
	for name, m := range p.Modules {
		if IsOCI(m.Path) {
			v.ociPath(append(key("modules"), name), p.Name, m.Path)
			continue
		}
		if !filepath.IsAbs(m.Path) {
			m.Path = filepath.Join(filepath.Dir(v.c.File), m.Path)
			p.Modules[name] = m
		}
		if _, err := os.Stat(m.Path); err != nil {
			v.fail(append(key("modules"), name), err, "plugin %q: module %s not found (a relative path is resolved against the config file's directory)", p.Name, m.Path)
		}
		if m.SHA256 != "" && !isSHA256(m.SHA256) {
			v.fail(append(key("modules"), name), nil, "plugin %q: sha256: want 64 hex digits", p.Name)
		}
	}
}

// exportTool is t as package host takes it.
func (p PluginEntry) exportTool(t ExportToolEntry) (host.ExportTool, error) {
	ht := host.ExportTool{Export: t.Export, Name: t.Name, Description: t.Description, Input: t.Input}
	switch params := t.Parameters.(type) {
	case string:
		ht.Parameters = json.RawMessage(params)
	case map[string]any:
		b, err := json.Marshal(params)
		if err != nil {
			return ht, err
		}
		ht.Parameters = b
	}
	return ht, host.CheckExportTool(ht)
}

// pluginDefined reports whether the i-th [[plugins]] entry sets field.
func (v *validator) pluginDefined(i int, field string) bool {
	return v.arrayDefined("plugins", i, field)
}

// arrayDefined reports whether the i-th entry of the array of tables
// called array sets field. toml's MetaData.IsDefined cannot index an array
// of tables; its Keys list the keys in file order, each entry starting
// with the array's key.
func (v *validator) arrayDefined(array string, i int, field string) bool {
	n := -1
	for _, k := range v.md.Keys() {
		switch {
		case len(k) == 1 && k[0] == array:
			n++
		case n == i && len(k) == 2 && k[0] == array && k[1] == field:
			return true
		}
	}
	return false
}

// Failure policies of [[plugins]] policy.
const (
	PolicyFailOpen   = "fail_open"
	PolicyFailClosed = "fail_closed"
)

// hookNames are every hook a plugin may enable: the engine hooks and the
// session middleware hooks.
func hookNames() []string {
	var names []string
	for _, h := range abi.Hooks {
		names = append(names, h.Name)
	}
	slices.Sort(names)
	return names
}

// MiddlewareConfig is how the engine runs the plugin's middleware.
func (p PluginEntry) MiddlewareConfig() engine.MiddlewareConfig {
	c := engine.MiddlewareConfig{QuarantineAfter: p.QuarantineAfter, QuarantineFor: p.QuarantineFor}
	if p.Policy == PolicyFailClosed {
		c.Policy = engine.FailClosed
	}
	return c
}

// HostConfig is the plugin's load settings for package host.
func (p PluginEntry) HostConfig() host.Config {
	return host.Config{
		Grants:      p.Grants(),
		Name:        p.Name,
		Path:        p.Path,
		SHA256:      p.SHA256,
		Hooks:       p.Hooks,
		Values:      p.Config,
		Isolation:   p.Isolation,
		NoSnapshot:  p.Snapshot != nil && !*p.Snapshot,
		Tools:       p.hostTools(),
		HookExports: p.HookExports,
		Modules:     p.linkedModules(),
		Limits: host.Limits{
			Timeout:        p.Timeout,
			MemoryMiB:      uint32(p.MemoryMB),
			MaxInputBytes:  p.MaxInputKB << 10,
			MaxOutputBytes: p.MaxOutputKB << 10,
			MaxInstances:   p.MaxInstances,
			MaxLogBytes:    p.MaxLogKB << 10,
			MaxErrorBytes:  p.MaxErrorKB << 10,
			MaxJSONDepth:   p.MaxJSONDepth,
			MaxStackBytes:  p.MaxStackKB << 10,
			SessionIdle:    p.SessionIdle,
			MaxSessions:    p.MaxSessions,
			SessionWait:    p.SessionWait,
		},
	}
}

// hostTools are the [[plugins.tools]] as package host takes them; Load has
// checked them.
func (p PluginEntry) hostTools() []host.ExportTool {
	var out []host.ExportTool
	for _, t := range p.Tools {
		ht, _ := p.exportTool(t)
		out = append(out, ht)
	}
	return out
}

// linkedModules are the [plugins.modules], sorted by name.
func (p PluginEntry) linkedModules() []host.LinkedModule {
	var out []host.LinkedModule
	for _, name := range slices.Sorted(maps.Keys(p.Modules)) {
		out = append(out, host.LinkedModule{Name: name, Path: p.Modules[name].Path, SHA256: p.Modules[name].SHA256})
	}
	return out
}

// PluginFor is the [[plugins]] entry whose module is the file at path, so
// that a tool looking at a module (morph plugin inspect --config) sees it
// with the name, limits and grants the config gives it.
//
// An oci:// reference is compared as written with the entries' paths.
func (c *Config) PluginFor(path string) (PluginEntry, error) {
	if IsOCI(path) {
		if i := slices.IndexFunc(c.Plugins, func(p PluginEntry) bool { return p.Path == path }); i >= 0 {
			return c.Plugins[i], nil
		}
		return PluginEntry{}, c.errorAt(toml.Key{"plugins"}, nil, fmt.Sprintf("no [[plugins]] entry has the path %s", path))
	}
	want, err := os.Stat(path)
	if err != nil {
		return PluginEntry{}, &Error{File: c.File, Msg: "cannot compare with the [[plugins]] entries: " + err.Error(), Err: err}
	}
	var entries []string
	for _, p := range c.Plugins {
		if got, err := os.Stat(p.Path); err == nil && os.SameFile(got, want) {
			return p, nil
		}
		entries = append(entries, fmt.Sprintf("%s (%s)", p.Name, p.Path))
	}
	if len(entries) == 0 {
		entries = []string{"none"}
	}
	return PluginEntry{}, c.errorAt(toml.Key{"plugins"}, nil, fmt.Sprintf("no [[plugins]] entry has the path %s (entries: %s)", path, strings.Join(entries, ", ")))
}
