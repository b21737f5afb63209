package engine

import "fmt"

// Mode is how an engine treats the tools that change things (see
// Mutator): ModeNormal runs them; ModePlan refuses them, so that an agent
// can look around and plan before it is let act, and the run goes on.
type Mode string

// The modes.
const (
	ModeNormal Mode = "normal"
	ModePlan   Mode = "plan"
)

// ConfigMode is the engine's config key of its mode (Mode, SetMode), so
// that whatever sets config keys can switch it.
const ConfigMode = "mode"

// modeKey is the engine's own key of ConfigMode; neither the host nor a
// plugin may declare another.
var modeKey = ConfigKey{Name: ConfigMode, Type: ConfigString, Default: string(ModeNormal), Values: []string{string(ModeNormal), string(ModePlan)},
	Doc: "normal runs every tool; plan refuses the tools that change things"}

// Mutator is implemented by a tool that says whether it changes things
// (writes a file, sends a message, spends money): in ModePlan the engine
// refuses to call one that does. A tool that does not implement it is
// taken not to change anything. A WebAssembly plugin's tools cannot say
// so yet; their manifest could, in a later ABI.
type Mutator interface {
	Mutates() bool
}

// mutates reports whether t says it changes things.
func mutates(t Tool) bool {
	m, ok := t.(Mutator)
	return ok && m.Mutates()
}

// Mode returns the engine's mode.
func (e *Engine) Mode() Mode {
	v, _ := e.Config(ConfigMode) // declared by New
	return Mode(v.(string))
}

// SetMode switches the engine's mode, at once: a run in progress that has
// no mode of its own (RunOptions.Mode) sees it at its next tool call. A
// mode that is neither ModeNormal nor ModePlan is a *ConfigValueError.
func (e *Engine) SetMode(m Mode) error { return e.SetConfig(ConfigMode, m) }

// checkMode refuses a RunOptions.Mode that is no mode.
func (r *run) checkMode() error {
	if r.opts.Mode == "" {
		return nil
	}
	if _, err := modeKey.coerce(r.opts.Mode); err != nil {
		return fmt.Errorf("%w in RunOptions.Mode", err)
	}
	return nil
}

// mode is the run's mode: its own, or the engine's as it is now.
func (r *run) mode(e *Engine) Mode {
	if r.opts.Mode != "" {
		return r.opts.Mode
	}
	return e.Mode()
}
