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
// and closes it, calling its destroy export, at Close. mw sets how the
// engine runs its middleware hooks; a zero Timeout becomes the plugin's
// call timeout plus a margin, so the host's own typed timeout is the one
// reported.
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
	m := p.Manifest()
	mwc := ep.mw
	if mwc.Timeout <= 0 {
		mwc.Timeout = p.limits.Timeout + callTimeoutMargin
	}
	details := &Details{Loader: p.Loader(), Capabilities: p.Capabilities()}
	details.stage, _ = p.StageHandler()
	ext := &engine.Extension{
		Version:          m.Version,
		Source:           p.source,
		ABIVersion:       m.ABIVersion,
		Requires:         m.Requires,
		Details:          details,
		Options:          p.Options(),
		Tools:            p.Tools(),
		MiddlewareConfig: mwc,
		Close:            p.Close,
	}
	if mw := p.Middleware(); mw != nil {
		ext.Middleware = mw
	}
	if details.stage != nil {
		ext.OtherHooks = []string{abi.HookHandleStage}
	}
	return ext, nil
}

// callTimeoutMargin lets the host's deadline fire before the engine's.
const callTimeoutMargin = 100 * time.Millisecond
