package host

import "github.com/morphhost/morph/host/internal/sandbox"

// CapabilityStatus is one capability of a plugin: whether its manifest
// requested it and whether the host granted it, with what (hosts,
// directories, variable names), so that an operator sees a missing grant
// before a call fails for want of it, and a grant nobody asked for.
type CapabilityStatus = sandbox.CapabilityStatus

// Details is what the host reports of a WebAssembly plugin in the engine's
// Status (engine.PluginStatus.Details): how it is run and what it may
// reach, which the engine itself knows nothing of.
type Details struct {
	Loader string `json:"loader"` // LoaderNative or LoaderExtism
	// Capabilities compare what the plugin asked for with what it was
	// granted, capability by capability (least privilege: a grant it did
	// not ask for shows too).
	Capabilities []CapabilityStatus `json:"capabilities,omitempty"`

	// stage is the plugin's stage handler, nil when it has none: how
	// StageHandlers finds it among the engine's plugins, which the
	// engine knows only by their Extension.
	stage *StageHandler
}
