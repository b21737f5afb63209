package host

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// Extender makes a module an engine.Extender: the engine loads it at
// Initialize (so a module that cannot load fails initialization, naming it)
// and closes it, calling its destroy export, at Close. It is the complete
// way to embed a plugin: the engine gets everything the plugin implements
// and has enabled, its engine hooks, tools, session middleware (so a
// before_tool_call guard denies) and stage handler, and its hook events and warnings carry the
// plugin's name (engine.Event.Plugin). mw sets how the engine runs its
// middleware hooks; a zero Timeout becomes the plugin's call timeout plus a
// margin, so the host's own typed timeout is the one reported.
//
//	e := engine.New(client, reg, engine.WithExtenders(
//		l.Extender(host.Config{Path: "guard.wasm"}, engine.MiddlewareConfig{Policy: engine.FailClosed})))
//
// Plugin.Extender does the same for a plugin already loaded.
func (l *Loader) Extender(cfg Config, mw engine.MiddlewareConfig) engine.Extender {
	return &extender{l: l, cfg: cfg, mw: mw}
}

type extender struct {
	l   *Loader
	cfg Config
	mw  engine.MiddlewareConfig
}

// Name is the configured name, or the file's base name without ".wasm".
func (ep *extender) Name() string {
	if ep.cfg.Name != "" {
		return ep.cfg.Name
	}
	return strings.TrimSuffix(filepath.Base(ep.cfg.Path), ".wasm")
}

func (ep *extender) Open(ctx context.Context) (*engine.Extension, error) {
	cfg := ep.cfg
	cfg.Name = ep.Name()
	p, err := ep.l.Load(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return p.extension(ep.mw), nil
}

// Extender makes a loaded plugin an engine.Extender, for a host that loads
// (or inspects) the plugin itself before handing it to an engine: like
// Loader.Extender, it gives the engine everything the plugin implements,
// its engine hooks, tools, middleware and stage handler, under the plugin's name, and the engine owns the plugin
// from then on (Engine.Close closes it, calling its destroy export). Hand
// it to one engine only. mw is as for Loader.Extender.
func (p *Plugin) Extender(mw engine.MiddlewareConfig) engine.Extender {
	return &loaded{p: p, mw: mw}
}

type loaded struct {
	p  *Plugin
	mw engine.MiddlewareConfig
}

// Name is the plugin's name (Plugin.Name).
func (lp *loaded) Name() string { return lp.p.Name() }

func (lp *loaded) Open(context.Context) (*engine.Extension, error) {
	return lp.p.extension(lp.mw), nil
}

// extension is everything p implements, as an engine extension.
func (p *Plugin) extension(mw engine.MiddlewareConfig) *engine.Extension {
	m := p.Manifest()
	if mw.Timeout <= 0 {
		mw.Timeout = p.limits.Timeout + callTimeoutMargin
	}
	details := &Details{Loader: p.Loader(), Capabilities: p.Capabilities(),
		CallBound: 3 * p.limits.Timeout, plugin: p} // instantiation, call, description: see Details.CallBound
	details.stage, _ = p.StageHandler()
	ext := &engine.Extension{
		Version:          m.Version,
		Source:           p.source,
		ABIVersion:       m.ABIVersion,
		Requires:         m.Requires,
		Details:          details,
		Options:          p.hookOptions(),
		Tools:            p.engineTools(),
		MiddlewareConfig: mw,
		Close:            p.Close,
		WatchTools: func(update func(context.Context, []engine.Tool) error) {
			p.watch.mu.Lock()
			defer p.watch.mu.Unlock()
			p.watch.update = update
		},
	}
	if mw := p.middleware(); mw != nil {
		ext.Middleware = mw
	}
	ext.MCP = p.mcpProvider()
	if details.stage != nil {
		ext.OtherHooks = []string{abi.HookHandleStage}
	}
	return ext
}

// callTimeoutMargin lets the host's deadline fire before the engine's.
const callTimeoutMargin = 100 * time.Millisecond
