package config

import (
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/mcp"
)

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

// WatchTargets are the runtime's plugins a watcher reloads (mcp.Watcher,
// morph mcp serve --watch): each [[plugins]] entry of c with a path, with
// its configuration as loaded. Discovered plugins are not among them, nor
// oci:// plugins: their module is a file of the cache, named by its
// digest, which never changes (a new version comes by morph plugin lock
// and a restart). A local plugin's oci:// linked modules are watched at
// their cache files, as Open fetched them.
func (r *Runtime) WatchTargets(c *Config) []mcp.WatchTarget {
	var targets []mcp.WatchTarget
	for _, p := range c.Plugins {
		if hp := r.Plugin(p.Name); hp != nil && p.Path != "" && !IsOCI(p.Path) {
			hc, ok := r.hostConfigs[p.Name]
			if !ok {
				hc = p.HostConfig()
			}
			targets = append(targets, mcp.WatchTarget{Plugin: hp, Config: hc})
		}
	}
	return targets
}
