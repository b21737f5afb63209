package host

import (
	"context"
	"log/slog"

	"github.com/morphhost/morph/host/internal/extism"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/native"
)

// Loader names, as Plugin.Loader and Report.Loader give them: which of the
// host's ways of running a module a plugin uses.
const (
	// LoaderNative runs a module that implements ABI v1 itself (abi/SPEC.md)
	// directly on wazero: the fast path. See package internal/native.
	LoaderNative = "morph-abi-v1"
	// LoaderExtism runs a module written with an Extism PDK (it imports
	// extism:host/env) on the native loader's runtime, with Extism's kernel
	// in Go, so that plugins of the Extism ecosystem work unchanged. See
	// package internal/extism.
	LoaderExtism = "extism"
)

// moduleLoader is one of the host's ways of running a module. Load, Inspect
// and the conformance runner all pick a module's loader from moduleLoaders,
// so that adding a loader is adding a row, not another branch in each.
type moduleLoader struct {
	name string // LoaderNative, LoaderExtism, ...
	// detect reports whether wasm, whose header and limits have been
	// checked, is a module of this loader (by its imports, say).
	detect func(wasm []byte) bool
	// load compiles src for p and checks it against the loader's calling
	// convention; the kind of a failure is ErrABIMismatch for the module's
	// exports, ErrLoad otherwise.
	load func(l *Loader, ctx context.Context, p *Plugin, src *source) (_ guest.Module, kind error, err error)
}

// moduleLoaders are the host's loaders in the order detect is tried; the
// last, the native loader, takes every module the others do not (its
// compiler then says what is wrong with one that is neither).
var moduleLoaders = []moduleLoader{
	{name: LoaderExtism, detect: extism.Detect, load: (*Loader).loadExtism},
	{name: LoaderNative, detect: func([]byte) bool { return true }, load: (*Loader).loadNative},
}

// loaderOf is the loader that runs wasm, loaded with cfg: the Extism
// loader when cfg has Extism-only parts (a module of plain exports need not
// import anything of Extism's: Extism's hosts run any module), else the first of
// moduleLoaders that detects it.
func loaderOf(wasm []byte, cfg Config) moduleLoader {
	configured := len(cfg.Tools)+len(cfg.HookExports)+len(cfg.Modules)+len(cfg.HostFunctions) > 0
	for _, ml := range moduleLoaders {
		if configured && ml.name == LoaderExtism || !configured && ml.detect(wasm) {
			return ml
		}
	}
	panic("host: no loader detects the module; the last of moduleLoaders must take any")
}

// env is what a loader is given of p (see guest.Env): its limits, log,
// grants and closing, and the loader's compilation cache.
func (l *Loader) env(p *Plugin) guest.Env {
	return guest.Env{
		Name: p.name, Source: p.source, Values: p.values,
		Limits: guest.Limits{MemoryMiB: p.limits.MemoryMiB, MaxInputBytes: p.limits.MaxInputBytes,
			MaxOutputBytes: p.limits.MaxOutputBytes, MaxJSONDepth: p.limits.MaxJSONDepth, MaxStackBytes: p.limits.MaxStackBytes,
			MaxLinkedDepth: p.limits.MaxLinkedDepth},
		Log:     func() *slog.Logger { return p.log },
		Closing: p.closing, Sandbox: p.sandbox, Cache: l.cache, TableEntries: l.limits.TableEntries, Snapshot: p.snapshot,
		Tools: p.ext.tools, HookExports: p.ext.hookExports, Linked: p.ext.linked, HostFuncs: p.ext.hostFuncs,
	}
}

// loadNative is the native loader's row (package native), with the
// loader's cache of instrumented modules.
func (l *Loader) loadNative(ctx context.Context, p *Plugin, src *source) (_ guest.Module, kind error, err error) {
	m, kind, err := native.Load(ctx, l.env(p), src.shape, func(stack uint32) ([]byte, error) { return l.instrumented(src, stack) })
	if err != nil {
		return nil, kind, err
	}
	return m, nil, nil
}

// loadExtism is the Extism loader's row (package extism), with the
// loader's cache of instrumented modules for the main module and each
// linked one.
func (l *Loader) loadExtism(ctx context.Context, p *Plugin, src *source) (_ guest.Module, kind error, err error) {
	m, kind, err := extism.Load(ctx, l.env(p), src.shape, src.wasm, func(lm *guest.LinkedModule, stack uint32) ([]byte, error) {
		if lm != nil {
			return l.instrumented(&source{wasm: lm.Wasm, sum: lm.Sum}, stack)
		}
		return l.instrumented(src, stack)
	})
	if err != nil {
		return nil, kind, err
	}
	return m, nil, nil
}
