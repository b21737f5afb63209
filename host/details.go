package host

import (
	"time"

	"github.com/morphhost/morph/host/internal/sandbox"
)

// CapabilityStatus is one capability of a plugin: whether its manifest
// requested it and whether the host granted it, with what (hosts,
// directories, variable names), so that an operator sees a missing grant
// before a call fails for want of it, and a grant nobody asked for.
type CapabilityStatus struct {
	Name      string   `json:"name"` // abi.Capability*, or a name the host does not know
	Requested bool     `json:"requested"`
	Granted   bool     `json:"granted"`
	Grants    []string `json:"grants,omitempty"` // what is granted, when more than yes or no
}

// String reads "http (requested, granted: api.example.com)", "fs (requested,
// NOT granted)" or "env (granted: LANG, not requested)".
func (c CapabilityStatus) String() string { return sandbox.CapabilityStatus(c).String() }

// capabilityStatuses are the sandbox's statuses as this package's.
func capabilityStatuses(in []sandbox.CapabilityStatus) []CapabilityStatus {
	out := make([]CapabilityStatus, len(in))
	for i, c := range in {
		out[i] = CapabilityStatus(c)
	}
	return out
}

// Details is what the host reports of a WebAssembly plugin in the engine's
// Status (engine.PluginStatus.Details): how it is run and what it may
// reach, which the engine itself knows nothing of.
type Details struct {
	Loader string `json:"loader"` // LoaderNative or LoaderExtism
	// Capabilities compare what the plugin asked for with what it was
	// granted, capability by capability (least privilege: a grant it did
	// not ask for shows too).
	Capabilities []CapabilityStatus `json:"capabilities,omitempty"`
	// CallBound is the longest one call into the plugin runs once an
	// instance is free for it: a fresh instance's instantiation, the call
	// and, for a plugin that says during the call that its tools changed,
	// their description, each within the plugin's timeout (Limits.Timeout).
	// A call that waits for a free instance waits as long as its caller
	// lets it. For a host that runs the call on another's behalf and must
	// bound it (package temporal's activity timeouts).
	CallBound time.Duration `json:"call_bound_ns"`
	// Memory is what the linear memories of the plugin's idle instances
	// (in session isolation, one per live session) cost the host when the
	// status was read (Plugin.Memory): they change with every session, so
	// the engine's Status asks for them each time (Refresh), and an
	// operator sees what sessions hold before the machine runs short.
	Memory *MemoryStatus `json:"memory,omitempty"`
	// Sessions, in session isolation, are the plugin's open sessions, its
	// limit, and the sessions replaced or refused (Plugin.Sessions), read
	// with Memory.
	Sessions *SessionStatus `json:"sessions,omitempty"`

	plugin *Plugin // whose Memory Refresh reads

	// stage is the plugin's stage handler, nil when it has none: how
	// StageHandlers finds it among the engine's plugins, which the
	// engine knows only by their Extension.
	stage *StageHandler
}

// Refresh implements engine.DetailsRefresher: a copy of the details with
// the plugin's memory and sessions now. It reads the page tables of the plugin's idle
// instances (see Plugin.Memory for the cost) and is safe while calls run.
// Details made by other code than a plugin's extension have no plugin to
// ask, and are answered as they are.
func (d *Details) Refresh() any {
	if d.plugin == nil {
		return d
	}
	now := *d
	m := d.plugin.Memory()
	now.Memory = &m
	if ss, ok := d.plugin.Sessions(); ok {
		now.Sessions = &ss
	}
	return &now
}

// Plugin is the plugin the details are of: the one the engine serves, for
// a host that reloads it (Loader.Reload). Nil for Details made by other
// code than a plugin's extension.
func (d *Details) Plugin() *Plugin { return d.plugin }
