package guest

import (
	"fmt"
	"slices"
	"strings"
)

// refusedConventions are the conventions of imports a plugin may be built
// for that no loader provides, each with what to do instead: both loaders
// refuse such imports through Refused, so that a module gets the same
// answer whichever loader it reaches (an unconfigured pre-1.0 Extism
// plugin, which does not import extism:host/env, reaches the native one).
var refusedConventions = []refusedConv{
	{
		name:  "Extism's pre-1.0 ABI",
		match: func(module, name string) bool { return module == "env" && strings.HasPrefix(name, "extism_") },
		// extism/extism f3447a5 (#511), released in 1.0.0.
		advice: "Extism 1.0 (2023) moved its host functions to extism:host/env and extism:host/user, " +
			"and neither morph nor any Extism 1.x host provides the old ones: rebuild the plugin with a 1.x Extism PDK " +
			"(extism-pdk 1.x for Rust, github.com/extism/go-pdk 1.x for Go, or the 1.x JS, C, Haskell, AssemblyScript, .NET or Zig PDK)",
	},
	{
		name: "Dylibso's Observe SDK",
		// observe-sdk's namespaces: dylibso_observe (instrument_*, metric,
		// log, …), dylibso:observe/instrument (its instrumenting compiler's),
		// dylibso:observe/api (the observe-api bindings').
		match: func(module, _ string) bool {
			return module == "dylibso_observe" || module == "dylibso:observe/instrument" || module == "dylibso:observe/api"
		},
		advice: "the module is instrumented for it (by its instrumenting compiler or the observe-api bindings), " +
			"and morph does not provide its host functions: load the module as built before instrumentation, " +
			"or rebuild it without the observe-api calls",
	},
}

// refusedConv is a convention of refusedConventions: its name, which
// imports are its, and what to do instead.
type refusedConv struct {
	name   string
	match  func(module, name string) bool
	advice string
}

// Refused collects the imports a loader does not provide that belong to a
// refused convention (see refusedConventions), to refuse them with one
// error per convention rather than one per import. The zero value is
// ready.
type Refused struct {
	imports [][]string // by convention, in refusedConventions' order
}

// Add records module.name if it belongs to a refused convention, and
// reports whether it did; the caller refuses any other import itself.
func (r *Refused) Add(module, name string) bool {
	i := refusedConvention(module, name)
	if i < 0 {
		return false
	}
	if r.imports == nil {
		r.imports = make([][]string, len(refusedConventions))
	}
	r.imports[i] = append(r.imports[i], module+"."+name)
	return true
}

// IsRefused reports whether module.name belongs to a refused convention:
// no configuration can provide it (`morph plugin inspect` suggests none).
func IsRefused(module, name string) bool { return refusedConvention(module, name) >= 0 }

// refusedConvention is the index in refusedConventions of the one
// module.name belongs to, or -1.
func refusedConvention(module, name string) int {
	return slices.IndexFunc(refusedConventions, func(c refusedConv) bool { return c.match(module, name) })
}

// Errors is one error per convention with imports recorded, naming the
// convention, its first imports and what to do.
func (r *Refused) Errors() []error {
	var errs []error
	for i, imps := range r.imports {
		if len(imps) == 0 {
			continue
		}
		list := strings.Join(imps[:min(len(imps), 3)], ", ")
		if len(imps) > 3 {
			list += fmt.Sprintf(" and %d more", len(imps)-3)
		}
		c := refusedConventions[i]
		errs = append(errs, fmt.Errorf("imports %s, of %s: %s", list, c.name, c.advice))
	}
	return errs
}
