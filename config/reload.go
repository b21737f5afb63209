package config

import "github.com/morphhost/morph/host"

// Loader is the loader the runtime's plugins were loaded with: the one
// that reloads them (host.Loader.Reload).
func (r *Runtime) Loader() *host.Loader { return r.loader }

// Plugin is the WebAssembly plugin the engine loaded under name (a
// [[plugins]] entry's name, or a discovered file's), nil when none is: for
// a host that reloads it (morph mcp serve --watch).
func (r *Runtime) Plugin(name string) *host.Plugin {
	for _, ps := range r.Plugins() {
		if d, ok := ps.Details.(*host.Details); ok && ps.Name == name {
			return d.Plugin()
		}
	}
	return nil
}
