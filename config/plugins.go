package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// Plugin is one [[plugins]] entry: a WebAssembly module implementing ABI v1
// (abi/SPEC.md). Zero limits take the host's defaults.
type Plugin struct {
	// Name names the plugin in logs, errors and events; required, unique.
	Name string `toml:"name"`
	// Path is the .wasm file. Load resolves a relative path against the
	// config file's directory.
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
	// Config is the [plugins.config] table: values the plugin reads with config_get.
	Config map[string]string `toml:"config"`
}

// Wasm is the [wasm] table.
type Wasm struct {
	// CacheDir holds compiled modules across runs; empty means the user
	// cache directory, "off" compiles in memory only.
	CacheDir string `toml:"cache_dir"`
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
		} else {
			if !filepath.IsAbs(p.Path) {
				p.Path = filepath.Join(filepath.Dir(v.c.File), p.Path)
			}
			if _, err := os.Stat(p.Path); err != nil {
				v.fail(key("path"), err, "plugin %q: module %s not found (a relative path is resolved against the config file's directory)", p.Name, p.Path)
			}
		}
		if p.SHA256 != "" && (len(p.SHA256) != 64 || strings.Trim(strings.ToLower(p.SHA256), "0123456789abcdef") != "") {
			v.fail(key("sha256"), nil, "plugin %q: want 64 hex digits", p.Name)
		}
		for _, h := range p.Hooks {
			if _, ok := abi.HookExports[h]; !ok {
				v.fail(key("hooks"), nil, "plugin %q: unknown hook %q (hooks: %s)", p.Name, h, strings.Join(hookNames(), ", "))
			}
		}
		if v.md.IsDefined("plugins", fmt.Sprint(i), "timeout") && p.Timeout <= 0 {
			v.fail(key("timeout"), nil, "plugin %q: must be positive", p.Name)
		}
		if p.MemoryMB < 0 || p.MemoryMB > maxMemoryMB {
			v.fail(key("memory_mb"), nil, "plugin %q: must be between 1 and %d, got %d", p.Name, maxMemoryMB, p.MemoryMB)
		}
		for field, n := range map[string]int{"max_input_kb": p.MaxInputKB, "max_output_kb": p.MaxOutputKB, "max_instances": p.MaxInstances} {
			if n < 0 {
				v.fail(key(field), nil, "plugin %q: must not be negative, got %d", p.Name, n)
			}
		}
	}
}

func hookNames() []string {
	names := make([]string, 0, len(abi.HookExports))
	for h := range abi.HookExports {
		names = append(names, h)
	}
	slices.Sort(names)
	return names
}

// HostConfig is the plugin's load settings for package host.
func (p Plugin) HostConfig() host.Config {
	return host.Config{
		Name:   p.Name,
		Path:   p.Path,
		SHA256: p.SHA256,
		Hooks:  p.Hooks,
		Values: p.Config,
		Limits: host.Limits{
			Timeout:        p.Timeout,
			MemoryMiB:      uint32(p.MemoryMB),
			MaxInputBytes:  p.MaxInputKB << 10,
			MaxOutputBytes: p.MaxOutputKB << 10,
			MaxInstances:   p.MaxInstances,
		},
	}
}

// Runtime is what Open builds from a config: the engine, and the plugins
// it loaded, which Close releases.
type Runtime struct {
	Engine  *engine.Engine
	Plugins []*host.Plugin
	loader  *host.Loader
}

// Close closes the plugins and the compilation cache.
func (r *Runtime) Close(ctx context.Context) error {
	var errs []error
	for _, p := range r.Plugins {
		errs = append(errs, p.Close(ctx))
	}
	if r.loader != nil {
		errs = append(errs, r.loader.Close(ctx))
	}
	return errors.Join(errs...)
}

// Open builds the client and the registry, loads the plugins, and returns
// an engine with EngineOptions, the plugins' hooks and tools (in config
// order: for a hook two plugins implement, the later one is used, with a
// warning), logging to logger (nil: slog.Default()), then opts, which take
// precedence. A plugin that cannot be loaded is an *Error naming it and its
// file, which also matches the host's error kind (host.ErrABIMismatch, ...).
func (c *Config) Open(ctx context.Context, logger *slog.Logger, opts ...engine.Option) (*Runtime, error) {
	if logger == nil {
		logger = slog.Default()
	}
	client, err := c.Client(logger)
	if err != nil {
		return nil, err
	}
	reg, err := c.Registry()
	if err != nil {
		return nil, err
	}
	rt := &Runtime{}
	all := append(c.EngineOptions(), engine.WithLogger(logger))
	if len(c.Plugins) > 0 {
		if rt.loader, err = host.NewLoader(host.LoaderOptions{CacheDir: c.Wasm.CacheDir, Logger: logger}); err != nil {
			return nil, c.errorAt(toml.Key{"wasm", "cache_dir"}, err, err.Error())
		}
		hookOwner := map[string]string{}
		for i, pc := range c.Plugins {
			p, err := rt.loader.Load(ctx, pc.HostConfig())
			if err != nil {
				rt.Close(ctx)
				return nil, c.errorAt(toml.Key{"plugins", fmt.Sprint(i), "path"}, err, err.Error())
			}
			rt.Plugins = append(rt.Plugins, p)
			for _, h := range p.Hooks() {
				if prev, ok := hookOwner[h]; ok {
					logger.Warn("two plugins implement a hook; the later one is used", "hook", h, "used", p.Name(), "ignored", prev)
				}
				hookOwner[h] = p.Name()
			}
			for _, t := range p.Tools() {
				if _, taken := reg.Get(t.Name()); taken {
					logger.Warn("a plugin tool replaces a tool of the same name", "tool", t.Name(), "plugin", p.Name())
				}
				reg.Register(t)
			}
			all = append(all, p.Options()...)
		}
		if err := reg.Check(); err != nil {
			rt.Close(ctx)
			return nil, c.errorAt(toml.Key{"plugins"}, err, err.Error())
		}
	}
	rt.Engine = engine.New(client, reg, append(all, opts...)...)
	return rt, nil
}
