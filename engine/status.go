package engine

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Status is a snapshot of an engine: its state, its plugins, its tools
// with where each came from, and how many implementations each hook has.
type Status struct {
	State   string          `json:"state"`
	Mode    Mode            `json:"mode"`
	Plugins []PluginStatus  `json:"plugins"`
	Skipped []SkippedPlugin `json:"skipped,omitempty"`
	Failed  []FailedPlugin  `json:"failed,omitempty"` // when Initialize failed: the plugins to blame
	Tools   []ToolStatus    `json:"tools"`
	Hooks   map[string]int  `json:"hooks"`
	// Warnings are what Initialize found questionable but went on with: a
	// plugin's tool, engine hook, service or config key replacing another
	// plugin's (a tool: or a built-in), or not used because the host's is. Names in them are quoted (%q); show them
	// with safetext.Line all the same.
	Warnings []string `json:"warnings,omitempty"`
}

// PluginStatus describes one loaded plugin.
type PluginStatus struct {
	Name       string   `json:"name"`
	Version    string   `json:"version,omitempty"`
	Source     string   `json:"source,omitempty"`
	ABIVersion int      `json:"abi_version,omitempty"`
	Requires   []string `json:"requires,omitempty"`
	// Details are the Extension's: what the code that made the plugin
	// reports of it (*host.Details for a WebAssembly module), refreshed
	// when they are a DetailsRefresher.
	Details     any           `json:"details,omitempty"`
	Hooks       []string      `json:"hooks,omitempty"`       // engine and middleware hooks it implements
	Tools       []string      `json:"tools,omitempty"`       // its tools in use (not shadowed)
	Services    []string      `json:"services,omitempty"`    // its services in use (not shadowed)
	ConfigKeys  []string      `json:"config_keys,omitempty"` // its config keys in use (not shadowed)
	State       string        `json:"state"`                 // "active" or "quarantined"
	LoadTime    time.Duration `json:"load_time_ns"`
	Calls       uint64        `json:"calls"`  // middleware hook calls
	Faults      uint64        `json:"faults"` // failed middleware hook calls
	Quarantines uint64        `json:"quarantines"`
	P50         time.Duration `json:"p50_ns"` // middleware hook latency over the last 1024 calls
	P99         time.Duration `json:"p99_ns"`
}

// DetailsRefresher is Extension.Details that change while the plugin runs
// (a WebAssembly plugin's memory, which grows and shrinks with its
// sessions): Status reports what Refresh answers when Status is read, not
// the Details as Open made them. Refresh must be safe while the plugin's
// calls run, and cheap enough for a status report.
type DetailsRefresher interface{ Refresh() any }

// SkippedPlugin is a plugin Initialize did not load, and why.
type SkippedPlugin struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// FailedPlugin is a plugin that failed Initialize, and why: it did not
// load, it declared a tool, service or config key that cannot be used, or
// it requires a plugin that is not loaded. The reasons may quote the
// plugin; show them with safetext.Line.
type FailedPlugin struct {
	Name     string        `json:"name"`
	Reasons  []string      `json:"reasons"`
	LoadTime time.Duration `json:"load_time_ns"` // of its Open, which may have succeeded
}

// ToolStatus is one tool, its source (SourceHost, SourceBuiltin, or
// PluginSource(name)), and whether it changes things (see Mutator), which
// ModePlan refuses.
type ToolStatus struct {
	Name    string `json:"name"`
	Source  string `json:"source"`
	Mutates bool   `json:"mutates,omitempty"`
}

// Status returns the engine's snapshot: the initialization report (each
// plugin's load time, hooks, tools, services and config keys; those
// skipped, and when Initialize failed those to blame) and the state since.
// Before Initialize it lists no plugins; during Initialize it waits for
// it, since the hooks and middleware it reports are being set.
func (e *Engine) Status() Status {
	e.life.mu.Lock()
	st := Status{State: e.life.state.String(), Mode: e.Mode(), Hooks: map[string]int{}}
	loaded := append([]*loadedPlugin(nil), e.life.loaded...)
	st.Skipped = append(st.Skipped, e.life.skipped...)
	for _, f := range e.life.failed {
		f.Reasons = slices.Clone(f.Reasons)
		st.Failed = append(st.Failed, f)
	}
	st.Warnings = append(st.Warnings, e.life.warnings...)
	for hook := range e.hookFuncs {
		st.Hooks[hook] = 1
	}
	chain := e.chain()
	e.life.mu.Unlock()

	for _, t := range e.reg.All() {
		src, _ := e.reg.Source(t.Name())
		st.Tools = append(st.Tools, ToolStatus{Name: t.Name(), Source: src, Mutates: mutates(t)})
	}
	for _, m := range chain {
		for _, h := range m.f.Hooks() {
			st.Hooks[h]++
		}
	}
	stats := map[string]MiddlewareStats{}
	for _, s := range e.statsOf(chain) {
		stats[s.Name] = s
	}
	for _, lp := range loaded {
		details := lp.ext.Details
		if r, ok := details.(DetailsRefresher); ok {
			details = r.Refresh()
		}
		ps := PluginStatus{Name: lp.name, Version: lp.ext.Version, Source: lp.ext.Source, ABIVersion: lp.ext.ABIVersion,
			Requires: lp.ext.Requires, Details: details, State: "active", LoadTime: lp.loadTime}
		ps.Hooks = append([]string(nil), lp.hooks...)
		if lp.mw != nil {
			ps.Hooks = append(ps.Hooks, lp.mw.f.Hooks()...)
			s := stats[lp.mw.f.ID]
			ps.Calls, ps.Faults, ps.Quarantines, ps.P50, ps.P99 = s.Calls, s.Faults, s.Quarantines, s.P50, s.P99
			if s.Quarantined {
				ps.State = "quarantined"
			}
		}
		for _, t := range st.Tools {
			if t.Source == PluginSource(lp.name) {
				ps.Tools = append(ps.Tools, t.Name)
			}
		}
		ps.Services, ps.ConfigKeys = e.servicesOf(lp.name), e.configKeysOf(lp.name)
		st.Plugins = append(st.Plugins, ps)
	}
	return st
}

// Summary is Status in one line, for a CLI's stderr.
func (s Status) Summary() string {
	var parts []string
	for _, p := range s.Plugins {
		parts = append(parts, p.Name+" "+p.Version)
	}
	hooks := make([]string, 0, len(s.Hooks))
	for h := range s.Hooks {
		hooks = append(hooks, h)
	}
	sort.Strings(hooks)
	plugins := "no plugins"
	if len(parts) > 0 {
		plugins = plural(len(parts), "plugin") + " (" + strings.Join(parts, ", ") + ")"
	}
	return plugins + ", " + plural(len(s.Tools), "tool") + ", hooks: " + orNone(hooks)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
