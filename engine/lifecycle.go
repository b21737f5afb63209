package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// State is where an engine is in its lifecycle: constructed ->
// initialized, then running while runs are in progress and initialized
// again when the last ends, until closed; or constructed -> failed, when
// Initialize fails, until closed.
type State int32

// Lifecycle states.
const (
	StateConstructed State = iota // New returned it; plugins not loaded
	StateInitialized              // Initialize loaded the plugins; no run in progress
	StateRunning                  // runs are in progress
	StateClosed                   // Close released everything; runs fail with ErrClosed
	StateFailed                   // Initialize failed; it and runs return its *InitError
)

func (s State) String() string {
	return [...]string{"constructed", "initialized", "running", "closed", "failed"}[s]
}

// ErrClosed is returned by runs of a closed engine.
var ErrClosed = errors.New("engine: closed")

// ErrInit is matched (errors.Is) by every initialization failure.
var ErrInit = errors.New("engine: initialization failed")

// InitError is an initialization failure: plugins that failed to load or
// whose tool schemas are invalid, a dependency between plugins that is
// missing or circular, or a host tool's invalid schema. Initialize and every
// later run return the same error: an engine never runs half-configured.
type InitError struct {
	Problems []string // one per problem, each naming the plugins
	// Errs are the problems' errors, in the same order: a *PluginError for
	// a problem of one plugin.
	Errs []error
}

func (e *InitError) Error() string {
	return "engine: initialization failed: " + strings.Join(e.Problems, "; ")
}

// Is matches ErrInit.
func (e *InitError) Is(target error) bool { return target == ErrInit }

// Unwrap returns the problems' errors.
func (e *InitError) Unwrap() []error { return e.Errs }

func (e *InitError) add(err error) {
	e.Problems = append(e.Problems, err.Error())
	e.Errs = append(e.Errs, err)
}

// PluginError is the initialization failure of one plugin: it did not
// load, one of its tool schemas is invalid (the error names the tool), or
// it requires a plugin that is not loaded. It matches ErrInit.
type PluginError struct {
	Plugin string
	Err    error
}

// Error reads "plugin <name>: <error>", without the prefix when the error
// names the plugin itself (see Named), so that it is not said twice.
func (e *PluginError) Error() string {
	var n Named
	if errors.As(e.Err, &n) && n.PluginName() == e.Plugin {
		return e.Err.Error()
	}
	return fmt.Sprintf("plugin %q: %v", e.Plugin, e.Err)
}

// Named is an error that names, in its text, the plugin it comes from;
// host.Error is one.
type Named interface {
	error
	PluginName() string
}

// Unwrap returns the plugin's error.
func (e *PluginError) Unwrap() error { return e.Err }

// Is matches ErrInit.
func (e *PluginError) Is(target error) bool { return target == ErrInit }

// Extender is a plugin as the engine sees it: a name, and an Open that
// returns what it adds (its Extension), called at Initialize; the
// Extension's Close releases it at the engine's Close. A WebAssembly module
// is one (host.Loader.Extender), and so is anything else that adds hooks,
// middleware, tools, services or config keys. (host.Plugin is the loaded
// module itself, config.PluginEntry its [[plugins]] entry.)
type Extender interface {
	Name() string
	// Open loads the plugin. Initialize calls it once.
	Open(ctx context.Context) (*Extension, error)
}

// Extension is what an opened plugin adds.
type Extension struct {
	Version    string
	Source     string // where it was loaded from (a file, "host", ...)
	ABIVersion int
	Requires   []string // names of plugins that must come before it
	// Details is what the code that made the plugin reports of it, which
	// Status passes on as is, or refreshed when it is a DetailsRefresher
	// (for a WebAssembly module, *host.Details: its loader, its
	// capabilities requested and granted, its instances' memory). The
	// engine does not read it: how a plugin is run is not the engine's
	// business.
	Details any
	// Options set engine hooks (prompt and params builders, tool success,
	// fallback final). The host's hook is used over a plugin's, and a later
	// plugin's over an earlier one's (see Precedence in the package doc),
	// with a warning. Only the hooks they set count: another option given
	// here (WithService, WithIdentity, WithLogger, ...) does nothing, so
	// that a plugin cannot take what only the host may set.
	Options          []Option
	Middleware       Middleware // nil: none
	MiddlewareConfig MiddlewareConfig
	Tools            []Tool
	// Services are Go values the plugin offers other code by name (see
	// Engine.Service): a client or store its tools and another plugin's
	// share. A WebAssembly module has none.
	Services map[string]any
	// ConfigKeys declare settings of the plugin's in the engine's config
	// (see Engine.Config), which the host may then set.
	ConfigKeys []ConfigKey
	// Close releases the plugin (its destroy hook); called once, by Engine.Close.
	Close func(ctx context.Context) error
	// OtherHooks name hooks the plugin implements that the engine does not
	// call, for its status: a pipeline stage handler, which a pipeline
	// runner finds through Details.
	OtherHooks []string
	// WatchTools, if set, is how a plugin whose tools change while it runs
	// (an MCP plugin's notify_tool_list_changed) tells the engine:
	// Initialize calls it once with update, which the plugin then calls
	// with its whole new list. update checks each tool's name, description
	// and schema as Initialize does and replaces the plugin's tools with the
	// list, except a name another source (the host, a built-in, another
	// plugin) has, which keeps its tool, with a warning; a list that fails
	// the checks, or names a tool twice, is refused with the error and the
	// old one kept. A built-in the plugin's tool had replaced comes back when
	// the plugin drops it. Tool calls see the new list at once; a run's
	// system prompt, built at its start, lists the tools it had then.
	WatchTools func(update func(ctx context.Context, tools []Tool) error)
	// MCP, if set, serves prompts and resources to an MCP client (see
	// MCPProvider); nil: none.
	MCP MCPProvider
	// Warnings are what Open found questionable but went on with (an
	// optional MCP server that did not start, a server's tool left out):
	// Initialize logs them and adds them to Status.Warnings, which a CLI
	// shows whatever its log level.
	Warnings []string
}

// WithExtenders appends plugins to load at Initialize, in order (their
// `requires` may reorder them). Of several plugins with one name, the first
// is loaded and the others are skipped, as Status reports.
func WithExtenders(ps ...Extender) Option {
	return func(e *Engine) { e.plugins = append(e.plugins, ps...) }
}

// WithBuiltinTools adds tools of the lowest precedence: a plugin tool or a
// host tool of the same name replaces them.
func WithBuiltinTools(ts ...Tool) Option {
	return func(e *Engine) { e.builtins = append(e.builtins, ts...) }
}

// lifecycle is the engine's state and what Initialize loaded.
type lifecycle struct {
	mu       sync.Mutex
	state    State
	initErr  error
	loaded   []*loadedPlugin
	skipped  []SkippedPlugin
	failed   []FailedPlugin // when Initialize failed
	warnings []string       // Status.Warnings
	running  int            // runs in progress, for the state
	active   sync.WaitGroup // runs in progress, which Close waits for
	// release keeps a refused turn's end (its middleware told of it, see
	// refused), which no run count holds, from running while Close releases
	// the plugins and middleware: one comes wholly before the other.
	release sync.RWMutex
}

type loadedPlugin struct {
	name     string
	ext      *Extension
	loadTime time.Duration
	hooks    []string // the engine hooks its options set
	mw       *mw      // nil when it has no middleware
}

// State returns the engine's lifecycle state.
func (e *Engine) State() State {
	e.life.mu.Lock()
	defer e.life.mu.Unlock()
	return e.life.state
}

// Initialize loads the plugins, orders them by their dependencies, merges
// their tools and hooks, and logs a report. It is idempotent and safe for
// concurrent callers: the first does the work, the others wait for it and
// get its result. A run initializes the engine implicitly.
func (e *Engine) Initialize(ctx context.Context) error {
	e.life.mu.Lock()
	defer e.life.mu.Unlock()
	switch e.life.state {
	case StateClosed:
		return ErrClosed
	case StateFailed:
		return e.life.initErr
	case StateInitialized, StateRunning:
		return nil
	}
	if err := e.initialize(ctx); err != nil {
		e.life.initErr, e.life.state = err, StateFailed
		return err
	}
	e.life.state = StateInitialized
	return nil
}

func (e *Engine) initialize(ctx context.Context) error {
	type opened struct {
		p     Extender
		ext   *Extension
		took  time.Duration
		tools []*registered // ext.Tools, checked and compiled
		keys  []ConfigKey   // ext.ConfigKeys, checked
	}
	var ok []opened
	fail := &InitError{}
	seen := map[string]bool{}
	took := map[string]time.Duration{} // how long each plugin's Open took, for Status.Failed
	for _, p := range e.plugins {
		if seen[p.Name()] {
			reason := "a plugin of the same name comes first (the first of a name wins)"
			e.life.skipped = append(e.life.skipped, SkippedPlugin{Name: p.Name(), Reason: reason})
			e.log.InfoContext(ctx, "plugin skipped", "plugin", p.Name(), "reason", reason)
			continue
		}
		seen[p.Name()] = true
		start := time.Now()
		ext, err := p.Open(ctx)
		took[p.Name()] = time.Since(start)
		if err == nil && ext == nil {
			err = errors.New("its Open returned no extension")
		}
		if err != nil {
			fail.add(&PluginError{Plugin: p.Name(), Err: err})
			e.log.ErrorContext(ctx, "plugin failed to load", "plugin", p.Name(), "duration", took[p.Name()], "error", err)
			continue
		}
		// Its tool schemas are checked now, so that a bad one is blamed on
		// this plugin and tool (shadowed tools too: the plugin is broken),
		// and kept compiled.
		o := opened{p: p, ext: ext, took: took[p.Name()]}
		for _, t := range ext.Tools {
			checked, err := e.reg.checkTool(t)
			if err != nil {
				fail.add(&PluginError{Plugin: p.Name(), Err: err})
			}
			o.tools = append(o.tools, checked)
		}
		var errs []error
		o.keys, errs = checkKeys(ext.ConfigKeys)
		for _, err := range append(errs, checkServices(ext.Services)...) {
			fail.add(&PluginError{Plugin: p.Name(), Err: err})
		}
		ok = append(ok, o)
	}
	names := make([]string, len(ok))
	requires := make([][]string, len(ok))
	for i, o := range ok {
		names[i], requires[i] = o.p.Name(), o.ext.Requires
	}
	order, problems := dependencyOrder(names, requires)
	for _, p := range problems {
		fail.add(p)
	}
	for _, err := range checkServices(e.hostServices()) {
		fail.add(fmt.Errorf("host %w", err))
	}
	for _, err := range e.conf.hostErrs {
		fail.add(err)
	}
	if len(fail.Problems) > 0 {
		e.life.failed = failedPlugins(fail, took)
		for _, o := range ok {
			if o.ext.Close != nil {
				o.ext.Close(ctx)
			}
		}
		return fail
	}
	for _, t := range e.builtins {
		if _, taken := e.reg.Get(t.Name()); !taken {
			e.reg.RegisterFrom(SourceBuiltin, t)
		}
	}
	for _, i := range order {
		o := ok[i]
		name := o.p.Name()
		lp := &loadedPlugin{name: name, ext: o.ext, loadTime: o.took}
		for _, w := range o.ext.Warnings {
			e.initWarning(ctx, fmt.Sprintf("plugin %q: %s", name, w))
		}
		for j, t := range o.ext.Tools {
			switch src, taken := e.reg.Source(t.Name()); {
			case taken && src == SourceHost:
				e.initWarning(ctx, fmt.Sprintf("the tool %q of plugin %q is not used: the host's tool of that name is", t.Name(), name))
				continue
			case taken && src == SourceBuiltin:
				e.initWarning(ctx, fmt.Sprintf("the tool %q of plugin %q replaces the built-in tool %q", t.Name(), name, t.Name()))
			case taken:
				e.initWarning(ctx, fmt.Sprintf("the tool %q of plugin %q replaces plugin %q's", t.Name(), name, strings.TrimPrefix(src, "plugin:")))
			}
			e.reg.registerChecked(PluginSource(name), o.tools[j])
		}
		if o.ext.WatchTools != nil {
			o.ext.WatchTools(func(ctx context.Context, tools []Tool) error { return e.replaceTools(ctx, name, tools) })
		}
		lp.hooks = append(e.applyHooks(ctx, name, o.ext.Options), o.ext.OtherHooks...)
		e.addServices(ctx, name, o.ext.Services)
		e.addConfigKeys(ctx, name, o.keys)
		if o.ext.Middleware != nil {
			lp.mw = newMW(o.ext.Middleware, []MiddlewareConfig{o.ext.MiddlewareConfig})
			e.middleware = append(e.middleware, lp.mw)
		}
		e.life.loaded = append(e.life.loaded, lp)
		e.log.InfoContext(ctx, "plugin loaded", "plugin", name, "version", o.ext.Version, "source", o.ext.Source,
			"load_time", o.took, "tools", len(o.ext.Tools), "services", len(o.ext.Services), "middleware", o.ext.Middleware != nil)
	}
	if err := e.reg.Check(); err != nil { // the host's tools; the plugins' are compiled
		fail.add(err)
		return fail
	}
	e.log.InfoContext(ctx, "engine initialized", "plugins", len(e.life.loaded), "skipped", len(e.life.skipped),
		"tools", len(e.reg.Names()), "middleware", len(e.chain()))
	return nil
}

// replaceTools makes tools the tools of the plugin called name, in place of
// those it had (Extension.WatchTools).
func (e *Engine) replaceTools(ctx context.Context, name string, tools []Tool) error {
	checked := make([]*registered, len(tools))
	seen := map[string]bool{}
	for i, t := range tools {
		if seen[t.Name()] {
			err := fmt.Errorf("%w: tool %s listed twice", ErrInvalidTool, quoteName(t.Name()))
			e.log.WarnContext(ctx, "plugin's new tool list refused; its tools stay as they were", "plugin", name, "error", err)
			return &PluginError{Plugin: name, Err: err}
		}
		seen[t.Name()] = true
		c, err := e.reg.checkTool(t)
		if err != nil {
			e.log.WarnContext(ctx, "plugin's new tool list refused; its tools stay as they were", "plugin", name, "error", err)
			return &PluginError{Plugin: name, Err: err}
		}
		checked[i] = c
	}
	kept := e.reg.replaceFrom(PluginSource(name), checked)
	for _, t := range kept {
		src, _ := e.reg.Source(t)
		e.log.WarnContext(ctx, "the plugin's new tool is not used: another source has a tool of that name", "plugin", name, "tool", t, "source", src)
	}
	for _, t := range e.builtins { // one the plugin's tool had replaced at Initialize, now free
		if _, taken := e.reg.Get(t.Name()); !taken {
			e.reg.RegisterFrom(SourceBuiltin, t)
		}
	}
	e.log.InfoContext(ctx, "plugin's tools changed", "plugin", name, "tools", len(tools)-len(kept))
	e.toolsChanged(ctx)
	return nil
}

// failedPlugins are the plugins with a problem in fail, in the order of
// their first, each with its problems and how long its Open took.
func failedPlugins(fail *InitError, took map[string]time.Duration) []FailedPlugin {
	var out []FailedPlugin
	for _, err := range fail.Errs {
		var pe *PluginError
		if !errors.As(err, &pe) {
			continue
		}
		i := slices.IndexFunc(out, func(f FailedPlugin) bool { return f.Name == pe.Plugin })
		if i < 0 {
			out = append(out, FailedPlugin{Name: pe.Plugin, LoadTime: took[pe.Plugin]})
			i = len(out) - 1
		}
		out[i].Reasons = append(out[i].Reasons, pe.Err.Error())
	}
	return out
}

// initWarning logs msg and keeps it for Status.Warnings, which a CLI
// shows whatever its log level: a plugin that quietly takes a tool's name
// can change what the agent does.
func (e *Engine) initWarning(ctx context.Context, msg string) {
	e.life.warnings = append(e.life.warnings, msg)
	e.log.WarnContext(ctx, msg)
}

// applyHooks applies a plugin's hook options and names the engine hooks
// they set. Of each hook, the host's is used over the plugin's, and the
// plugin's over an earlier plugin's (see Precedence in the package doc);
// either way a warning names both.
func (e *Engine) applyHooks(ctx context.Context, plugin string, opts []Option) []string {
	offered := New(e.client, e.reg, opts...).hookFuncs // the hooks only: a plugin's option sets nothing else of e's
	var names []string
	for _, hook := range engineHookNames {
		fn := offered[hook]
		if fn == nil {
			continue
		}
		names = append(names, hook)
		switch prev, byPlugin := e.hookOwner[hook]; {
		case e.hookFuncs[hook] != nil && !byPlugin:
			e.initWarning(ctx, fmt.Sprintf("the %s hook of plugin %q is not used: the host's is", hook, plugin))
			continue
		case byPlugin:
			e.initWarning(ctx, fmt.Sprintf("the %s hook of plugin %q replaces plugin %q's", hook, plugin, prev))
		}
		e.hookFuncs[hook] = fn
		e.hookOwner[hook] = plugin
	}
	return names
}

// dependencyOrder sorts plugins so each comes after those it requires,
// keeping the given order otherwise. It names every missing dependency (a
// *PluginError of the plugin that requires it) and every plugin caught in
// a cycle.
func dependencyOrder(names []string, requires [][]string) ([]int, []error) {
	index := map[string]int{}
	for i, n := range names {
		index[n] = i
	}
	var problems []error
	for i, reqs := range requires {
		for _, r := range reqs {
			if _, ok := index[r]; !ok {
				problems = append(problems, &PluginError{Plugin: names[i], Err: fmt.Errorf("requires %s, which is not loaded", quoteName(r))})
			}
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	state := make([]int, len(names)) // 0 new, 1 visiting, 2 done
	var order []int
	var visit func(i int, path []string) bool
	visit = func(i int, path []string) bool {
		switch state[i] {
		case 1:
			start := slices.Index(path, names[i])
			problems = append(problems, errors.New("plugins require each other in a cycle: "+strings.Join(append(path[start:], names[i]), " -> ")))
			return false
		case 2:
			return true
		}
		state[i] = 1
		for _, r := range requires[i] {
			if !visit(index[r], append(path, names[i])) {
				return false
			}
		}
		state[i] = 2
		order = append(order, i)
		return true
	}
	for i := range names {
		if state[i] == 0 && !visit(i, nil) {
			return nil, problems
		}
	}
	return order, nil
}

// begin admits a run: it initializes the engine if need be and counts the
// run in, so Close can wait for it.
func (e *Engine) begin(ctx context.Context) error {
	if err := e.Initialize(ctx); err != nil {
		return err
	}
	e.life.mu.Lock()
	defer e.life.mu.Unlock()
	if e.life.state == StateClosed {
		return ErrClosed
	}
	e.life.state = StateRunning
	e.life.running++
	e.life.active.Add(1)
	return nil
}

// join counts a session's end (Session.Close) in as begin counts a run,
// but only on an engine that is initialized: it never initializes one,
// and false means there is nothing to tell.
func (e *Engine) join() bool {
	e.life.mu.Lock()
	defer e.life.mu.Unlock()
	if e.life.state != StateInitialized && e.life.state != StateRunning {
		return false
	}
	e.life.state = StateRunning
	e.life.running++
	e.life.active.Add(1)
	return true
}

// refused ends a turn begin refused (err): its middleware hear of it as of
// any turn's end, never while Close is releasing them.
func (e *Engine) refused(r *run, err error) {
	e.life.release.RLock()
	defer e.life.release.RUnlock()
	e.endTurn(r, nil, err)
}

// end counts a run that begin admitted out; the last to end makes the
// engine initialized again, unless it was closed meanwhile.
func (e *Engine) end() {
	e.life.mu.Lock()
	e.life.running--
	if e.life.running == 0 && e.life.state == StateRunning {
		e.life.state = StateInitialized
	}
	e.life.mu.Unlock()
	e.life.active.Done()
}

// Close waits for runs in progress (until ctx is done), then calls every
// plugin's Close (its destroy hook) and every native middleware's io.Closer,
// each exactly once, in reverse load order. Later runs fail with ErrClosed;
// a second Close does nothing.
func (e *Engine) Close(ctx context.Context) error {
	e.life.mu.Lock()
	if e.life.state == StateClosed {
		e.life.mu.Unlock()
		return nil
	}
	e.life.state = StateClosed
	e.life.mu.Unlock()

	done := make(chan struct{})
	go func() { e.life.active.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		e.log.WarnContext(ctx, "closing with runs still in progress", "error", ctx.Err())
	}
	e.life.release.Lock() // refused turns telling their middleware end first, later ones wait
	defer e.life.release.Unlock()
	var errs []error
	for i := len(e.life.loaded) - 1; i >= 0; i-- {
		lp := e.life.loaded[i]
		if lp.ext.Close != nil {
			if err := lp.ext.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("plugin %q: %w", lp.name, err))
			}
		}
	}
	for _, m := range e.chain() {
		if c, ok := m.orig.(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("middleware %q: %w", m.f.ID, err))
			}
		}
	}
	return errors.Join(errs...)
}
