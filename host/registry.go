package host

import (
	"context"

	"github.com/morphhost/morph/host/internal/guest"
)

// Loader names, as Plugin.Loader and Report.Loader give them: which of the
// host's ways of running a module a plugin uses.
const (
	// LoaderNative runs a module that implements ABI v1 itself (abi/SPEC.md)
	// directly on wazero: the fast path.
	LoaderNative = "morph-abi-v1"
	// LoaderExtism runs a module written with an Extism PDK (it imports
	// extism:host/env) through github.com/extism/go-sdk, so that plugins of
	// the Extism ecosystem work unchanged. See loadExtism.
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
	{name: LoaderExtism, detect: importsExtism, load: (*Loader).loadExtism},
	{name: LoaderNative, detect: func([]byte) bool { return true }, load: (*Loader).loadNative},
}

// loaderOf is the loader that runs wasm: the first of moduleLoaders that
// detects it.
func loaderOf(wasm []byte) moduleLoader {
	for _, ml := range moduleLoaders {
		if ml.detect(wasm) {
			return ml
		}
	}
	panic("host: no loader detects the module; the last of moduleLoaders must take any")
}
