package config

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/mcp"
	"github.com/morphhost/morph/telemetry"
)

// Runtime is what Open builds from a config: an initialized engine, which
// owns the plugins, and the loader they share.
type Runtime struct {
	Engine  *engine.Engine
	loader  *host.Loader
	servers *mcp.Servers         // the [[mcp_servers]]
	loaded  func() engine.Status // the Status once initialized: see Plugins
	// telemetry are the providers of [telemetry] (see telemetry.go).
	telemetry *telemetry.Providers
	// hostConfigs are the [[plugins]] as loaded, by name: an oci:// module
	// at its file in the cache.
	hostConfigs map[string]host.Config
}

// Close closes the engine (each plugin's destroy hook runs once), stops
// the MCP servers, closes the compilation cache, and flushes the spans and
// metrics not yet exported ([telemetry]), all within ctx.
func (r *Runtime) Close(ctx context.Context) error {
	return errors.Join(r.Engine.Close(ctx), r.servers.Close(ctx), r.loader.Close(ctx), r.telemetry.Shutdown(ctx))
}

// Open builds the client and the registry of built-in tools, and an engine
// with EngineOptions, the [[plugins]], the [[mcp_servers]], then opts (an event handler, plugins
// of the embedding host, ...), then the plugins found in the discovery
// directories; and initializes it. A plugin that cannot be loaded, or
// whose tool schema is invalid, is an *Error at its own [[plugins]] entry,
// naming it and its file or tool, which also matches the engine's ErrInit
// and the host's error kind (host.ErrABIMismatch, ...); any failure to
// initialize comes wrapped in an *InitError. An oci:// module is fetched
// (the cache first), checked against morph.lock and verified first (see
// OCIFetcher.Fetch); a refusal is an *Error at its key wrapping the
// *oci.Error, in an *InitError.
func (c *Config) Open(ctx context.Context, logger *slog.Logger, opts ...engine.Option) (*Runtime, error) {
	if logger == nil {
		logger = slog.Default()
	}
	// Under [verify] require, a plugin that appeared in a discovery
	// directory since Load is refused as Load would. The directories are
	// listed once: the plugins checked are the plugins loaded, whatever
	// appears there while the registries are asked.
	discovered := discoveredFiles(c.Discovery.Directories())
	if err := c.unverifiedDiscovered(pluginNames(discovered)); err != nil {
		return nil, &InitError{Err: c.errorAt(toml.Key{"verify", "require"}, err, err.Error())}
	}
	// oci:// modules are fetched and verified before anything starts.
	hostConfigs, err := c.hostConfigs(ctx, logger)
	if err != nil {
		return nil, &InitError{Err: err}
	}
	client, err := c.Client(logger)
	if err != nil {
		return nil, err
	}
	reg, err := c.Registry()
	if err != nil {
		return nil, err
	}
	mcpServers, err := c.MCPServerConfigs()
	if err != nil {
		return nil, err
	}
	tel, err := c.setupTelemetry(ctx)
	if err != nil {
		return nil, err
	}
	loader, err := host.NewLoader(host.LoaderOptions{CacheDir: c.Wasm.CacheDir, Logger: logger, SecretEnv: c.SecretEnv(),
		ModuleLimits: c.Wasm.Limits.Host(), Recorder: c.Record.Recorder, Telemetry: tel.Telemetry})
	if err != nil {
		return nil, errors.Join(c.errorAt(toml.Key{"wasm", "cache_dir"}, err, err.Error()), tel.Shutdown(ctx))
	}
	var configured []engine.Extender
	for i, p := range c.Plugins {
		configured = append(configured, loader.Extender(hostConfigs[i], p.MiddlewareConfig()))
	}
	servers := mcp.NewServers(mcpServers, mcp.ServersOptions{Logger: logger, Check: reg.CheckTool, AuthPrompt: c.AuthPrompt})
	all := append(c.EngineOptions(), engine.WithLogger(logger), engine.WithTelemetry(tel.Telemetry), engine.WithExtenders(configured...), engine.WithExtenders(servers.Extenders()...))
	all = append(all, opts...)
	all = append(all, engine.WithExtenders(discover(loader, discovered, logger)...))
	rt := &Runtime{Engine: engine.New(client, reg, all...), loader: loader, servers: servers, hostConfigs: map[string]host.Config{}, telemetry: tel}
	for i, p := range c.Plugins {
		rt.hostConfigs[p.Name] = hostConfigs[i]
	}
	rt.loaded = sync.OnceValue(rt.Engine.Status)
	if err := rt.Engine.Initialize(ctx); err != nil {
		st := rt.Engine.Status()
		rt.Close(ctx)
		return nil, &InitError{Status: st, Err: c.initError(err)}
	}
	return rt, nil
}

// InitError is Open's error when the engine could not be initialized. It
// reads as the located problems it wraps, and carries the engine's Status
// at the failure, so that a command can still report the plugins that
// failed (with their load times) and those skipped.
type InitError struct {
	Status engine.Status
	Err    error
}

// Error is the located problems' text, unchanged.
func (e *InitError) Error() string { return e.Err.Error() }

// Unwrap returns the located problems: an *Error, or several joined.
func (e *InitError) Unwrap() error { return e.Err }

// initError locates the problems of a failed initialization: a plugin's at
// its own [[plugins]] entry; the others (a discovered plugin's, a plugin's
// of the embedding host, a dependency cycle) at the file. Several problems
// come joined, one a line.
func (c *Config) initError(err error) error {
	var ie *engine.InitError
	if !errors.As(err, &ie) || len(ie.Errs) == 0 {
		return &Error{File: c.File, Msg: err.Error(), Err: err}
	}
	errs := make([]error, len(ie.Errs))
	for i, e := range ie.Errs {
		var key toml.Key
		var pe *engine.PluginError
		if errors.As(e, &pe) {
			if j := slices.IndexFunc(c.Plugins, func(p PluginEntry) bool { return p.Name == pe.Plugin }); j >= 0 {
				key = toml.Key{"plugins", strconv.Itoa(j)}
			} else if j := slices.IndexFunc(c.MCPServers, func(s MCPServerEntry) bool { return s.Name == pe.Plugin }); j >= 0 {
				key = toml.Key{"mcp_servers", strconv.Itoa(j)}
			}
		}
		errs[i] = c.errorAt(key, e, e.Error())
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// discover makes the discovered plugins' files (discoveredFiles) plugins.
func discover(l *host.Loader, files []string, logger *slog.Logger) []engine.Extender {
	var found []engine.Extender
	for _, f := range files {
		logger.Debug("plugin discovered", "file", f)
		found = append(found, l.Extender(host.Config{Path: f}, engine.MiddlewareConfig{}))
	}
	return found
}

// discoveredFiles are the *.wasm files of the discovery directories, in
// precedence order, each directory's sorted. A directory that does not
// exist is not an error.
func discoveredFiles(dirs []string) []string {
	var found []string
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.wasm"))
		if err != nil {
			continue
		}
		slices.Sort(files)
		found = append(found, files...)
	}
	return found
}

// Plugins are the engine's loaded plugins as Status told of them the first
// time it was asked, once initialized: which plugins there are and their
// details do not change after, while their calls, memory and tools do (ask
// Status for those). It is for code that asks often (a worker, at every
// workflow and every stage call), where Status reads every plugin's memory
// (tens of milliseconds with 10,000 live sessions).
func (r *Runtime) Plugins() []engine.PluginStatus {
	return r.loaded().Plugins
}

// StageHandlers are the pipeline stage handlers of the engine's loaded
// plugins (those exporting morph_handle_stage), for a pipeline.Runner's
// handler registry: each handles nodes of type "wasm:<plugin>". They are
// found once (see Plugins).
func (r *Runtime) StageHandlers() []*host.StageHandler {
	return host.StageHandlers(r.loaded())
}
