package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// Hot reload: Loader.Reload loads a plugin's changed module as a new
// version of the plugin callers already hold (the root), and routes the
// root's calls to it from then on:
//
//   - A call enters a version (enter) and leaves it when it ends (leave),
//     counted on the version's shard of the calling core, as the calls
//     counter is, so that a call pays no shared write for the reload it
//     may never see. A call that entered a version finishes on it.
//   - New calls go to the newest version (versions.cur); in session
//     isolation a call of a session with instances in an older version
//     still open goes there (route): a session keeps its instances, and
//     the plugin's state of it, until it ends or expires.
//   - The replaced version is retired in the background (retireVersion):
//     once it has no open session (session isolation), it is marked
//     retired, after which no call enters it (a call that loaded it just
//     before enters the newest instead), then waits for the calls that
//     entered it to leave, and closes, calling morph_destroy on its idle
//     instances as Close does. Its calls are bounded by its deadlines; its
//     sessions by their end or Limits.SessionIdle.
//
// A call marks its entry before it reads whether the version is retired,
// and retireVersion marks the version before it reads the entries (both
// sequentially consistent atomics): either the call sees the mark and goes
// elsewhere, or retireVersion sees the call and waits for it.

// versions is a root plugin's record of its versions. mu serializes
// reloads and Close; cur and old are read by every call without it.
type versions struct {
	mu     sync.Mutex
	cur    atomic.Pointer[Plugin]    // the version new calls go to; nil: the root itself, never reloaded
	old    atomic.Pointer[[]*Plugin] // replaced versions not yet closed, oldest first (copied on write)
	closed bool                      // Close was called: Reload refuses
	wg     sync.WaitGroup            // retire goroutines
}

// retiring is a version's state once a reload replaced it.
type retiring struct {
	done atomic.Bool   // no call enters it any more: its calls are draining
	left chan struct{} // a call left the version once done (buffered: one pending wake-up)
}

// current is the version new calls of the root p go to.
func (p *Plugin) current() *Plugin {
	if v := p.root.versions.cur.Load(); v != nil {
		return v
	}
	return p.root
}

// live is every version of the root p not yet closed, oldest first, the
// current one last.
func (p *Plugin) live() []*Plugin {
	var out []*Plugin
	if old := p.versions.old.Load(); old != nil {
		out = append(out, *old...)
	}
	if cur := p.versions.cur.Load(); cur != nil {
		return append(out, cur)
	}
	return append(out, p)
}

// Versions is how many versions of the plugin are open: 1, but after
// Loader.Reload, while the replaced versions still have calls in flight or
// (session isolation) sessions open; each closes as they end.
func (p *Plugin) Versions() int { return len(p.root.live()) }

// route is the version a call of the root p on ctx goes to (see above).
func (p *Plugin) route(ctx context.Context) *Plugin {
	cur := p.versions.cur.Load()
	if cur == nil {
		return p
	}
	if old := p.versions.old.Load(); old != nil && cur.mode == IsolationSession {
		if key, _ := cur.poolKey(ctx); key != "" {
			for _, v := range *old {
				if !v.retiring.done.Load() && v.holds(key) {
					return v
				}
			}
		}
	}
	return cur
}

// holds reports whether the session key is open in this version.
func (p *Plugin) holds(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && p.free.keys[key] != nil
}

// enter enters the version a call of the root p on ctx runs on, on the
// calling core's shard of it; the caller leaves it with v.leave(sh).
func (p *Plugin) enter(ctx context.Context) (v *Plugin, sh *shard) {
	for {
		v = p.route(ctx)
		sh = v.shards.local()
		sh.users.Add(1)
		if !v.retiring.done.Load() {
			return v, sh
		}
		v.leave(sh) // retired meanwhile: route now goes past it
	}
}

// leave ends a call that entered this version on shard sh, waking the
// version's retirement when it waits for its calls.
func (p *Plugin) leave(sh *shard) {
	sh.users.Add(-1)
	if p.retiring.done.Load() {
		select {
		case p.retiring.left <- struct{}{}:
		default:
		}
	}
}

// users is the calls in this version now.
func (p *Plugin) users() int64 {
	var n int64
	for _, sh := range p.shards.all {
		n += sh.users.Load()
	}
	return n
}

// ReloadError is Loader.Reload's refusal of a plugin's new module: the
// plugin goes on serving its loaded version. Err is the load's *Error
// (errors.Is matches its kind: ErrLoad for a file that cannot be read, a
// sha256 pin that does not match or a module over a limit,
// ErrABIMismatch, ...), or what makes the new version unfit to replace
// the old one.
type ReloadError struct {
	Plugin string // the plugin's name
	Path   string // the new module's file, "(bytes)" for Config.Wasm
	Err    error
}

// Error names the plugin and the file, says the old version still serves,
// and why the new one does not.
func (e *ReloadError) Error() string {
	return fmt.Sprintf("reloading plugin %s from %s: the loaded version keeps serving: %s", quote(e.Plugin), e.Path, e.Err)
}

// Unwrap returns why the new module was refused.
func (e *ReloadError) Unwrap() error { return e.Err }

// Reload loads cfg, the configuration of p whose module changed, as p's
// next version: every check Load makes runs on the new module (the sha256
// pin, the ModuleLimits, the ABI, grants, describe), and its hooks and
// isolation mode must be the loaded version's (the engine wired them at
// initialization: changing them needs a restart). cfg.Name defaults to
// p's name. On success new calls go to the new version at once; calls in
// flight finish on the old one; in session isolation, a session that has
// instances in the old version keeps them (its calls go on there) until
// it ends or expires, and new sessions start on the new version. The old
// version closes in the background (morph_destroy on its idle instances,
// as Close) once its calls and sessions are gone. When the tool list
// changed, the engine that owns p (Plugin.Extender, Loader.Extender) gets
// the new list, as for a plugin's notify_tool_list_changed.
//
// On failure p keeps serving its loaded version, unchanged, and the error,
// a *ReloadError, names the plugin and the file; it is also logged.
// Reloads of one plugin run one at a time.
func (l *Loader) Reload(ctx context.Context, p *Plugin, cfg Config) error {
	root := p.root
	vs := &root.versions
	vs.mu.Lock()
	defer vs.mu.Unlock()
	old := root.current()
	if cfg.Name == "" {
		cfg.Name = old.name
	}
	path := cfg.Path
	if cfg.Wasm != nil || path == "" {
		path = "(bytes)"
	}
	refuse := func(err error) error {
		err = &ReloadError{Plugin: old.name, Path: path, Err: err}
		l.log.ErrorContext(ctx, "plugin reload refused", "plugin", old.name, "path", path, "err", err)
		return err
	}
	if vs.closed {
		return refuse(&Error{Plugin: old.name, Kind: ErrClosed})
	}
	next, err := l.Load(ctx, cfg)
	if err != nil {
		return refuse(err)
	}
	if err := fits(old, next); err != nil {
		next.shut(ctx, true)
		return refuse(&Error{Plugin: old.name, Kind: ErrLoad, Msg: path, Err: err})
	}
	next.root = root
	listed := old.toolSpecs() // what the engine has: the manifest's, or the list a change gave
	next.watch.update = old.takeWatch()
	old.retiring.left = make(chan struct{}, 1) // before retireVersion starts: leave reads it once that marked old
	olds := []*Plugin{old}
	if prev := vs.old.Load(); prev != nil {
		olds = append(slices.Clone(*prev), old)
	}
	vs.old.Store(&olds)
	vs.cur.Store(next)
	vs.wg.Add(1)
	go root.retireVersion(old)
	l.log.InfoContext(ctx, "plugin reloaded: new calls run on the new module", "plugin", next.name, "path", path,
		"tools", len(next.manifest.Tools))
	if !slices.EqualFunc(listed, next.manifest.Tools, sameTool) {
		next.publishTools(ctx)
	}
	return nil
}

// fits says why next cannot replace old, nil if it can: the engine hooks,
// middleware, stage handler and session ends the engine wired at
// initialization follow old's hooks and mode.
func fits(old, next *Plugin) error {
	if !slices.Equal(old.hooks, next.hooks) {
		return fmt.Errorf("the new module's enabled hooks %v are not the loaded one's %v: restart to change them", next.hooks, old.hooks)
	}
	if old.mode != next.mode {
		return fmt.Errorf("the new module's isolation %q is not the loaded one's %q: restart to change it", next.mode, old.mode)
	}
	return nil
}

// sameTool reports whether a and b are the same tool to the engine.
func sameTool(a, b abi.ToolSpec) bool {
	return a.Name == b.Name && a.Description == b.Description && string(a.Parameters) == string(b.Parameters)
}

// takeWatch takes the engine's tool list updater from this version, which
// a reload replaces: a retiring version's tool changes no longer reach the
// engine.
func (p *Plugin) takeWatch() func(context.Context, []engine.Tool) error {
	p.watch.mu.Lock()
	defer p.watch.mu.Unlock()
	update := p.watch.update
	p.watch.update, p.watch.changed, p.watch.tools = nil, false, nil
	return update
}

// publishTools gives the engine this version's tools, which a reload made
// the plugin's.
func (p *Plugin) publishTools(ctx context.Context) {
	p.watch.mu.Lock()
	defer p.watch.mu.Unlock() // held through update: lists reach the engine in order
	if p.watch.update == nil {
		return
	}
	if err := p.watch.update(ctx, p.toolsOf(p.manifest.Tools)); err != nil {
		p.log.WarnContext(ctx, "the engine refused the reloaded plugin's tools", "err", err)
	}
}

// retireVersion closes the replaced version v of the root p once its sessions
// (session isolation) and calls are gone; Close ends the wait.
func (p *Plugin) retireVersion(v *Plugin) {
	defer p.versions.wg.Done()
	for v.mode == IsolationSession {
		v.mu.Lock()
		if v.closed || v.free.open() == 0 {
			v.mu.Unlock()
			break
		}
		if v.vacancy == nil {
			v.vacancy = make(chan struct{})
		}
		vacancy := v.vacancy // closed when a session ends or expires
		v.mu.Unlock()
		select {
		case <-vacancy:
		case <-v.closing.Done():
		}
	}
	if v.mode == IsolationSession {
		p.current().inherit(v)
	}
	v.retiring.done.Store(true)
	for v.users() != 0 {
		select {
		case <-v.retiring.left:
		case <-v.closing.Done():
		}
		if v.closing.Err() != nil {
			break
		}
	}
	if v.mode == IsolationSession {
		p.current().orphans(v)
	}
	// Its calls have left, or Close closed it: this close waits for
	// nothing but morph_destroy on the idle instances, bounded by the
	// plugin's timeout.
	err := v.shut(context.Background(), true)
	p.versions.mu.Lock()
	if old := p.versions.old.Load(); old != nil {
		rest := slices.DeleteFunc(slices.Clone(*old), func(o *Plugin) bool { return o == v })
		p.versions.old.Store(&rest)
	}
	p.versions.mu.Unlock()
	if err != nil {
		v.log.Warn("closing the plugin's replaced version", "err", err)
		return
	}
	v.log.Info("the plugin's replaced version closed: its calls and sessions ended")
}

// inherit takes over the sessions the replaced version v remembers as
// expired (see lostSessions): one that calls again runs here, and its
// fresh instance is told, as it would have been in v.
func (p *Plugin) inherit(v *Plugin) {
	v.mu.Lock()
	lost := v.lost
	v.lost = lostSessions{}
	v.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	lost.each(p.remember)
}

// orphans remembers the sessions still open in v, a retired version whose
// calls have all left and which is about to close, as lost (discarded with
// v): a call that entered v just before it retired may have opened its
// session there after retireVersion saw none open, and that session's next
// call, here, is told its state is gone rather than start afresh untold. A
// session this version holds already is not concerned.
func (p *Plugin) orphans(v *Plugin) {
	v.mu.Lock()
	keys := slices.Collect(maps.Keys(v.free.keys))
	v.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, key := range keys {
		if p.free.keys[key] == nil {
			p.remember(key, abi.ReplacedDiscarded)
		}
	}
}

// closeVersions is Close: every version still open, the root's included.
func (p *Plugin) closeVersions(ctx context.Context) error {
	root := p.root
	root.versions.mu.Lock()
	root.versions.closed = true
	vs := root.live()
	root.versions.mu.Unlock()
	var errs []error
	for _, v := range vs {
		errs = append(errs, v.shut(ctx, true))
	}
	waited := make(chan struct{})
	go func() { root.versions.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("plugin %q: closing its replaced versions: %w", root.name, ctx.Err()))
	}
	return errors.Join(errs...)
}
