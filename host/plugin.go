package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/sys"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/host/internal/sandbox"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/record"
)

// Plugin is a loaded module. It is safe for concurrent use: each call runs
// on an instance of its own, drawn from the free list its isolation mode
// picks (see Config.Isolation and isolation.go).
type Plugin struct {
	name     string
	source   string // the file, or "(bytes)"
	limits   Limits
	values   map[string]string
	snapshot bool // Config.NoSnapshot's opposite: what the loader is told
	log      *slog.Logger
	loader   string           // the name of the loader that runs it (see moduleLoaders)
	module   guest.Module     // the compiled module, in that loader
	sandbox  *sandbox.Sandbox // its grants, ready for its instances
	manifest abi.Manifest
	hooks    []string           // enabled hooks, sorted
	caps     []CapabilityStatus // requested vs granted, from describe
	tel      *pluginTracing     // its spans and metrics (LoaderOptions.Telemetry); nil: none
	ext      extismParts        // Config's Extism-only parts, checked
	watch    toolWatch          // its tools as they change (Extism MCP plugins)
	rec      *record.Recorder   // records its calls (see record.go); nil: not recording

	mode      string // Config.Isolation; "" (pooled) until describe has run
	slots     slots  // one per instance allowed to run
	shards    shards // what calls write, by core: idle pooled instances, slots, calls (see isolation.go)
	stats     stats
	evicting  sync.WaitGroup // evictions in flight; Close waits for them
	unevicted []*instance    // those a closing plugin stopped; Close releases them
	// closing is done once Close has called the idle instances' destroy:
	// calls in flight then end at their next check, evictions give up, and
	// new calls fail with ErrClosed. stop cancels it.
	closing context.Context
	stop    context.CancelFunc
	drained int // the slots Close holds: the runtime closes once it holds all

	mu      sync.Mutex
	now     func() time.Time // the clock of idle sessions; tests replace it
	free    idleList         // idle instances, by session (see isolation.go)
	lost    lostSessions     // sessions that expired, whose next call is told
	vacancy chan struct{}    // closed when an open session ends or expires, for the new ones waiting (nil: none waits)
	sweeper *time.Timer      // the next idle-session sweep, when one is due
	closed  bool

	// root is the plugin callers hold: p itself, unless p is a version
	// Loader.Reload loaded for it; calls go through the root, which routes
	// them (see reload.go). versions is the root's record of its versions,
	// and retiring this version's state once a reload replaced it.
	root     *Plugin
	versions versions
	retiring retiring
}

// instance is a guest with its memories and its place in the plugin's
// free lists.
type instance struct {
	g     guest.Instance
	arena *memory.Arena
	state *guest.CallState // what its host functions know of its calls

	ses   *session // the session it belongs to (see isolation.go): nil in pooled and call modes
	spare bool     // has run only describe: any session may take it
	reuse bool     // false: closed after its call (IsolationCall)
	home  *shard   // pooled mode: the idle stack it goes back to (see shards)
}

// close closes the guest and unmaps its memories: it must be the last use
// of the instance (see package memory).
func (inst *instance) close() {
	inst.g.Close()
	inst.arena.Release()
}

// Load reads, verifies, compiles and describes a plugin. Errors are *Error
// of kind ErrLoad or ErrABIMismatch and name the plugin and the file.
func (l *Loader) Load(ctx context.Context, cfg Config) (*Plugin, error) {
	source := cmp.Or(cfg.Source, cfg.Path, "(bytes)")
	label := cfg.Name
	if label == "" {
		label = source
	}
	fail := func(kind error, err error) (*Plugin, error) {
		return nil, &Error{Plugin: label, Kind: kind, Msg: source, Err: bound(err, cfg.Limits.withDefaults().MaxErrorBytes)}
	}
	src, err := l.readModule(cfg)
	if err != nil {
		return fail(ErrLoad, err)
	}
	if cfg.Isolation != "" && !slices.Contains(IsolationModes(), cfg.Isolation) {
		return fail(ErrLoad, fmt.Errorf("isolation %q: want one of %s", cfg.Isolation, strings.Join(IsolationModes(), ", ")))
	}
	p := &Plugin{name: label, source: source, limits: cfg.Limits.withDefaults(), values: cfg.Values, snapshot: !cfg.NoSnapshot, log: l.log.With("plugin", label),
		mode: cfg.Isolation, now: time.Now, free: newIdle()}
	p.root = p
	p.closing, p.stop = context.WithCancel(context.Background())
	named := cfg
	named.Name = label
	if p.ext, err = l.extismParts(named); err != nil {
		return fail(ErrLoad, err)
	}
	if p.sandbox, err = sandbox.New(cfg.Grants.sandbox(), l.secretEnv, func() *slog.Logger { return p.log }); err != nil {
		return fail(ErrLoad, err)
	}
	ml := loaderOf(src.wasm, cfg)
	p.loader = ml.name
	mod, kind, err := ml.load(l, ctx, p, src)
	if err != nil {
		p.sandbox.Close()
		return fail(kind, err)
	}
	p.module = mod
	p.shards.init()
	p.slots.shards, p.slots.free = &p.shards, p.limits.MaxInstances
	ok := false
	defer func() {
		if !ok {
			p.shut(ctx, false) // describe's instance is idle: its memory is released too
		}
	}()
	if err := p.describe(ctx, cfg); err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			pe.Msg = strings.TrimSpace(source + " " + pe.Msg)
			return nil, pe
		}
		return fail(ErrABIMismatch, err)
	}
	p.spares()
	if cfg.Name == "" {
		p.name = p.manifest.Name
	}
	p.log = l.log.With("plugin", p.name)
	l.recordPlugin(p, cfg, src)
	p.tel = l.tel.plugin(p)
	ok = true
	return p, nil
}

// describe calls the describe export and checks the manifest against the
// module's exports and the configured hooks.
func (p *Plugin) describe(ctx context.Context, cfg Config) error {
	out, err := p.Call(ctx, abi.ExportDescribe, nil)
	if err != nil {
		return err
	}
	var m abi.Manifest
	if err := guest.DecodeJSON(out, p.limits.MaxJSONDepth, &m); err != nil {
		return &Error{Plugin: p.name, Export: abi.ExportDescribe, Kind: ErrBadOutput, Err: err}
	}
	if m.ABIVersion != abi.Version {
		return fmt.Errorf("manifest abi_version is %d, this host supports %d", m.ABIVersion, abi.Version)
	}
	if strings.TrimSpace(m.Name) == "" {
		return errors.New("manifest has no name")
	}
	for _, h := range m.Hooks {
		hook, known := abi.HookByName(h)
		if !known {
			continue // a hook of a later minor revision: ignored, not an error
		}
		if export := hook.Export; !p.module.Exports(export) {
			return fmt.Errorf("manifest declares hook %s but the module does not export %s", h, export)
		}
	}
	if len(m.Tools) > 0 && !p.module.Exports(abi.ExportCallTool) {
		return fmt.Errorf("manifest declares %d tools but the module does not export %s", len(m.Tools), abi.ExportCallTool)
	}
	caps := p.sandbox.Capabilities(m.Capabilities)
	switch missing := sandbox.NotGranted(caps); {
	case len(missing) == 0 || cfg.inspecting: // Inspect reports them
	case p.sandbox.Grants().Ungranted == UngrantedError:
		return ungrantedError(p.name, missing)
	default:
		for _, c := range missing {
			p.log.WarnContext(ctx, "the plugin requests a capability it was not granted; its calls that need it will fail",
				"capability", c, "grant_with", sandbox.Setting(c))
		}
	}
	enabled, err := enabledHooks(m.Hooks, cfg.Hooks)
	if err != nil {
		return err
	}
	p.manifest, p.hooks, p.caps = m, enabled, capabilityStatuses(caps)
	if p.mode == "" {
		p.mode = defaultIsolation(enabled)
	}
	return nil
}

// enabledHooks is the configured subset of what the plugin implements.
func enabledHooks(implemented, configured []string) ([]string, error) {
	var out []string
	if configured == nil {
		for _, h := range implemented {
			if _, known := abi.HookByName(h); known {
				out = append(out, h)
			}
		}
	} else {
		for _, h := range configured {
			if !slices.Contains(implemented, h) {
				return nil, fmt.Errorf("hook %q is enabled in the config but the plugin implements only %v", h, implemented)
			}
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return slices.Compact(out), nil
}

// Stats count a plugin's calls and instances since it was loaded.
type Stats struct {
	Calls        uint64 // export calls, describe included, and those refused before reaching the guest
	Faults       uint64 // calls that failed, guest-reported errors and refusals included
	Instantiated uint64 // instances created
	Discarded    uint64 // instances thrown away after a trap, timeout or bad output
	// Replaced counts, in session isolation, the sessions that went on
	// after their instance was gone (expired after Limits.SessionIdle, or
	// discarded after a fault) and were given a fresh one, each told so
	// (SPEC.md 10.6).
	Replaced uint64
	// Refused counts, in session isolation, the new sessions refused with
	// ErrSessionLimit: Limits.MaxSessions were open for all of
	// Limits.SessionWait.
	Refused uint64
	// Forgotten counts, in session isolation, the expired sessions the
	// plugin no longer remembers as expired: it remembers the last
	// Limits.MaxSessions, so that its memory is bounded; one of the others
	// that calls again runs on a fresh instance that is not told (each is
	// logged as it is forgotten).
	Forgotten uint64
}

// stats are the counters but calls, which are counted on the calling
// core's shard, so that cores do not share the counter every call adds to
// (see shards).
type stats struct{ faults, instantiated, discarded, replaced, refused, forgotten atomic.Uint64 }

// Stats returns the plugin's counters.
func (p *Plugin) Stats() Stats {
	p = p.current()
	return Stats{Calls: p.shards.calls(), Faults: p.stats.faults.Load(),
		Instantiated: p.stats.instantiated.Load(), Discarded: p.stats.discarded.Load(),
		Replaced: p.stats.replaced.Load(), Refused: p.stats.refused.Load(), Forgotten: p.stats.forgotten.Load()}
}

// SessionStatus is what a plugin in session isolation holds for its
// sessions, and how its promise to them held: its JSON is a plugin's
// "sessions" in `morph plugin status --json`.
type SessionStatus struct {
	Open     int    `json:"open"`     // sessions open now: each owns its instances until it ends or expires
	Max      int    `json:"max"`      // Limits.MaxSessions (max_sessions): past it, new sessions wait, then are refused
	Replaced uint64 `json:"replaced"` // Stats.Replaced: sessions that lost their instance and went on, on a fresh one
	Refused  uint64 `json:"refused"`  // Stats.Refused: new sessions refused at Max
	// Forgotten is Stats.Forgotten: expired sessions no longer remembered,
	// which would come back untold.
	Forgotten uint64 `json:"forgotten"`
}

// Sessions reports the plugin's sessions; ok is false outside session
// isolation, where instances belong to no session.
func (p *Plugin) Sessions() (st SessionStatus, ok bool) {
	p = p.current()
	if p.mode != IsolationSession {
		return st, false
	}
	p.mu.Lock()
	st.Open = p.free.open()
	p.mu.Unlock()
	st.Max, st.Replaced, st.Refused, st.Forgotten = p.limits.MaxSessions, p.stats.replaced.Load(), p.stats.refused.Load(), p.stats.forgotten.Load()
	return st, true
}

// Name is the plugin's name in logs and errors.
func (p *Plugin) Name() string { return p.name }

// Manifest is what the plugin's describe export returned.
func (p *Plugin) Manifest() abi.Manifest { return p.current().manifest }

// Hooks are the enabled hooks, sorted.
func (p *Plugin) Hooks() []string { return slices.Clone(p.hooks) }

// Capabilities compare what the manifest requests with what the plugin's
// grants give, for morph plugin inspect and status: every capability
// requested, and every one granted though not requested (least privilege).
func (p *Plugin) Capabilities() []CapabilityStatus { return slices.Clone(p.current().caps) }

// Exports reports whether the plugin's module exports the ABI v1 export
// name (for an Extism tool plugin, the exports morph serves for it): what a
// caller checks before an optional export such as morph_destroy.
func (p *Plugin) Exports(name string) bool { return p.current().module.Exports(name) }

// IdleMemory is the linear memory, in bytes, of the instance last given back
// to the plugin's free lists (in pooled mode, those of the calling core
// first: see shards): after a call that kept its instance, made one at a
// time, that instance's. ok is false when no instance is idle. It lets a
// report (`morph plugin test`, which calls one at a time) show what each
// call left its instance with.
func (p *Plugin) IdleMemory() (bytes uint32, ok bool) {
	p = p.current()
	if bytes, ok = p.shards.lastMemory(); ok {
		return bytes, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if last := p.free.last; last != nil {
		return last.g.MemoryBytes(), true
	}
	return 0, false
}

// MemoryStatus is what the linear memories of a plugin's idle instances
// (in session isolation: one a live session) cost the host now.
// Its JSON is a plugin's "memory" in `morph plugin status --json`.
type MemoryStatus struct {
	Instances int    `json:"instances"`      // idle instances
	Reserved  uint64 `json:"reserved_bytes"` // address space: each memory is mapped at the plugin's memory cap (package memory)
	Resident  uint64 `json:"resident_bytes"` // of those memories, the pages that are their own: what the guests wrote and still hold
	// Image is what the plugin's snapshot holds (Config.NoSnapshot), which
	// the memories started from it share: once for the plugin, where they
	// are mapped over it (Linux), and not in Resident, which counts only the
	// pages each memory wrote. 0 without a snapshot.
	Image uint64 `json:"image_bytes,omitempty"`
	// NoSnapshot is why the plugin has no snapshot, and so why each of its
	// instances runs its initialization: "" when it has one.
	NoSnapshot string `json:"no_snapshot,omitempty"`
}

// Memory reports the linear memories of the plugin's idle instances: what
// they really hold, not their sizes, which count pages never touched. Each
// instance also holds some tens of KiB of wazero's structures in Go's heap
// (BENCHMARKS.md, Sessions), which it does not count, nor the instances in
// a call. It reads the page tables of every idle instance (some 5-7 us
// each: 50-70 ms for 10,000 sessions, BENCHMARKS.md), outside the plugin's
// lock: for status reports, not for every call.
func (p *Plugin) Memory() MemoryStatus {
	p = p.current()
	p.mu.Lock()
	arenas := make([]*memory.Arena, 0, p.free.n)
	for _, inst := range p.free.all() {
		arenas = append(arenas, inst.arena)
	}
	p.mu.Unlock()
	for _, inst := range p.shards.instances() {
		arenas = append(arenas, inst.arena)
	}
	st := MemoryStatus{Instances: len(arenas)}
	if m, ok := p.module.(interface{ Snapshot() (uint64, string) }); ok {
		st.Image, st.NoSnapshot = m.Snapshot()
	}
	for _, a := range arenas { // one evicted meanwhile counts nothing: its arena is released
		u := a.Usage()
		st.Reserved += u.Reserved
		st.Resident += u.Resident
	}
	return st
}

// CallDestroy calls morph_destroy on one instance, as Close does on each
// idle one, then closes that instance, so that Close finds none left to
// destroy: how the conformance runner checks the export's answer, which
// Close only logs. output is a copy of what the export answered, and
// memoryBytes the instance's linear memory after the call (0 when the call
// failed other than by a guest-reported error). A failure is an *Error,
// counted in Stats as a call's. It holds an instance slot as a call does, so
// that Close waits for it. After Loader.Reload it runs on the current
// version, and is not meant to run during a reload.
func (p *Plugin) CallDestroy(ctx context.Context) (output []byte, memoryBytes uint32, err error) {
	p = p.current()
	sh := p.shards.local()
	inst, _, err := p.acquire(ctx, sh)
	if err != nil {
		p.stats.faults.Add(1)
		return nil, 0, p.failure(abi.ExportDestroy, err)
	}
	defer p.slots.give(sh)
	// The timeout starts now: acquire may have waited for a slot, or
	// instantiated, for longer.
	view, err := inst.g.Call(ctx, time.Now().Add(p.limits.Timeout), abi.ExportDestroy, nil, p.limits.MaxOutputBytes)
	if kind := guest.KindOf(err); kind == nil || kind == ErrGuest {
		memoryBytes = inst.g.MemoryBytes()
	}
	output = slices.Clone(view)
	p.retire(inst, false)
	sh.calls.Add(1)
	if err == nil {
		return output, memoryBytes, nil
	}
	p.stats.faults.Add(1)
	return output, memoryBytes, p.failure(abi.ExportDestroy, p.classified(ctx, err))
}

// Loader is the name of the loader the plugin's module went to: LoaderNative
// or LoaderExtism, by its imports.
func (p *Plugin) Loader() string { return p.current().loader }

// Isolation is the plugin's isolation mode: the configured one, or the default
// for its enabled hooks.
func (p *Plugin) Isolation() string { return p.mode }

// Close calls morph_destroy (when the module exports it) once on each idle
// instance, at once and each within the plugin's timeout and ctx (a failing
// destroy is logged, and the close goes on), and lets those of ended or
// expired sessions' instances already under way finish within ctx too;
// then it ends the calls in flight (at their next deadline check: they fail with ErrClosed) and the
// idle-session evictions, waits for them, and closes the plugin's runtime
// and grants. Later calls fail with ErrClosed.
//
// Close never closes an instance a call is running on: its memory is
// unmapped when it closes (package memory). When ctx ends before the calls
// in flight do, Close returns ctx's error and the runtime is closed in the
// background as soon as they have ended, which their deadlines bound. A
// second Close does nothing and returns nil.
//
// Once Loader.Reload replaced a version of the plugin, Close closes every
// version still open: the current one, and those whose calls or sessions
// had not ended yet.
func (p *Plugin) Close(ctx context.Context) error {
	p.tel.close()
	return p.closeVersions(ctx)
}

// shut is Close; destroy is false for a plugin that failed to load, whose
// guest is not trusted with morph_destroy.
func (p *Plugin) shut(ctx context.Context, destroy bool) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	idle := append(p.free.all(), p.shards.close()...)
	p.closed, p.free = true, newIdle()
	if p.sweeper != nil {
		p.sweeper.Stop()
		p.sweeper = nil
	}
	p.mu.Unlock()
	if destroy {
		p.destroy(ctx, idle)
	}
	// The instances of the sessions that ended or expired just before (the
	// last run's, at a CLI's exit) are in their morph_destroy: as the idle
	// ones, they get until ctx is done. No eviction starts once closed is
	// set, so the wait ends.
	evicted := make(chan struct{})
	go func() { p.evicting.Wait(); close(evicted) }()
	select {
	case <-evicted:
	case <-ctx.Done():
	}
	p.stop()
	<-evicted
	idle = append(idle, p.unevicted...) // evict wrote it before Done: no lock needed
	if err := p.drain(ctx); err != nil {
		go func() {
			p.drain(context.Background())
			p.release(context.Background(), idle)
		}()
		return fmt.Errorf("plugin %q: closing with calls in flight: %w", p.name, err)
	}
	return p.release(ctx, idle)
}

// drain takes every instance slot, so that no call runs, or returns ctx's
// error; it goes on from where an earlier drain stopped.
func (p *Plugin) drain(ctx context.Context) error {
	for ; p.drained < p.limits.MaxInstances; p.drained++ {
		if err := p.slots.take(ctx, p.shards.local(), nil); err != nil {
			return err
		}
	}
	return nil
}

// release closes the runtime, every instance with it, and the grants, and
// unmaps the memories of the idle instances (the others unmapped theirs
// when their calls ended).
func (p *Plugin) release(ctx context.Context, idle []*instance) error {
	err := errors.Join(p.module.Close(ctx), p.sandbox.Close())
	for _, inst := range idle {
		inst.arena.Release()
	}
	return err
}

// Call runs export with input on an instance (see Config.Isolation; outside
// a run, the session is "") and returns a copy of
// its output. It is the raw ABI call: the input and output are opaque bytes.
func (p *Plugin) Call(ctx context.Context, export string, input []byte) ([]byte, error) {
	var out []byte
	err := p.CallFunc(ctx, export, input, func(view []byte) error {
		out = append([]byte(nil), view...)
		return nil
	})
	return out, err
}

// takeSlot takes an instance slot (see Close) for a call on the core of
// shard sh, or says why not: ctx done, before or while waiting, or the
// plugin closing. The caller gives it back with p.slots.give(sh).
func (p *Plugin) takeSlot(ctx context.Context, sh *shard) error {
	// A guest checks its deadline only every wasmrt.InterruptPeriod units of work, so a
	// short call would run to its end on a context already done.
	if err := ctx.Err(); err != nil {
		return guest.Fail(contextKind(err), "before the call", err)
	}
	switch err := p.slots.take(ctx, sh, p.closing.Done()); {
	case errors.Is(err, ErrClosed):
		return guest.Fail(ErrClosed, "", nil)
	case err != nil:
		return guest.Fail(contextKind(err), "waiting for a free instance", err)
	}
	return nil
}

// CallFunc is Call handing the output, still in guest memory, to read
// before the instance goes back to its free list, rather than copying it: a
// caller that decodes the output (the engine adapters, the conformance
// runner) makes its decode part of the call, so that an output it cannot
// decode is ErrBadOutput, counted as a fault, and retires the instance as
// any bad output does. view is valid only during read.
//
// A call during which an MCP plugin said its tools changed ends with the
// instance describing them again (see toolWatch).
//
// Once Loader.Reload replaced the plugin's module, a call runs on the
// version it routes to (see reload.go): the newest, unless its session
// still has instances of an older one.
func (p *Plugin) CallFunc(ctx context.Context, export string, input []byte, read func(view []byte) error) error {
	v, sh := p.root.enter(ctx)
	defer v.leave(sh)
	ctx, span := p.root.tel.start(ctx, export)
	err := v.call(ctx, sh, export, input, read)
	span.end(err)
	return err
}

// call is CallFunc on this version, entered on the shard sh.
func (p *Plugin) call(ctx context.Context, sh *shard, export string, input []byte, read func(view []byte) error) error {
	if p.recording(ctx) {
		return p.recordCall(ctx, sh, export, input, read) // see record.go
	}
	sh.calls.Add(1)
	fail := func(err error) error {
		p.stats.faults.Add(1)
		return p.failure(export, err)
	}
	p.noteCall(ctx)
	if len(input) > p.limits.MaxInputBytes {
		return fail(guest.Fail(ErrInputTooLarge, fmt.Sprintf("%d bytes, limit %d", len(input), p.limits.MaxInputBytes), nil))
	}
	inst, told, err := p.acquire(ctx, sh)
	if err != nil {
		return fail(err)
	}
	defer p.slots.give(sh)
	if told != "" {
		err = p.tell(ctx, inst, inst.ses.key, told)
	}
	if err == nil {
		var view []byte
		view, err = inst.g.Call(ctx, p.callDeadline(ctx, time.Now()), export, input, p.limits.MaxOutputBytes)
		if err == nil {
			if rerr := read(view); rerr != nil {
				err = guest.Fail(ErrBadOutput, guest.Truncate(view, 200), rerr)
			}
		}
	}
	switch guest.KindOf(err) {
	case nil, ErrGuest: // a clean answer, even an error one, leaves the instance healthy
		if inst.state.TakeToolsChanged() {
			p.refreshTools(ctx, inst)
		}
		p.put(inst)
	default: // possibly poisoned: a fresh instance serves the next call
		err = p.classified(ctx, err)
		p.stats.discarded.Add(1)
		p.retire(inst, true)
		p.resetTools(ctx)
	}
	if err != nil {
		return fail(err)
	}
	return nil
}

// failure is the *Error of export's failure err (a *guest.CallError), its
// message and cause cut to the plugin's MaxErrorBytes (they may hold what
// the guest wrote).
func (p *Plugin) failure(export string, err error) *Error {
	ce := guest.AsCallError(err)
	return &Error{Plugin: p.name, Export: export, Kind: ce.Kind, Msg: safetext.Truncate(ce.Msg, p.limits.MaxErrorBytes),
		Err: bound(stackLimited(ce.Err), p.limits.MaxErrorBytes)}
}

// classified is a call's failure err, a trap's kind told by its cause (see
// classify); any other kind as it is.
func (p *Plugin) classified(ctx context.Context, err error) error {
	ce := guest.AsCallError(err)
	if ce.Kind != ErrTrap {
		return err
	}
	return guest.Fail(p.classify(ctx, ce.Err), ce.Msg, ce.Err)
}

// classify tells why a call failed: the plugin closing, a deadline (the
// call's or its caller's), its caller giving up, or else a trap.
func (p *Plugin) classify(parent context.Context, err error) error {
	var exit *sys.ExitError
	exited := errors.As(err, &exit)
	switch {
	case p.closing.Err() != nil || errors.Is(err, ErrClosed):
		return ErrClosed
	case errors.Is(err, context.DeadlineExceeded) || exited && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		return ErrTimeout
	case errors.Is(err, context.Canceled) || exited && exit.ExitCode() == sys.ExitCodeContextCanceled:
		return ErrCanceled
	case parent.Err() != nil:
		return contextKind(parent.Err())
	}
	return ErrTrap
}

// contextKind is the kind of a call ended by a context's error.
func contextKind(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return ErrTimeout
	}
	return ErrCanceled
}

// instantiate makes a fresh instance of the plugin's module, within a
// deadline of its own (a call that needs a fresh instance does not pay for
// it out of its own time), its memories reserved outside Go's heap (package
// memory: growth then costs nothing and closing gives the memory back).
//
// A Go panic while instantiating (a morph bug, as issue 28's memoryless
// Extism module was) fails the instantiation with ErrTrap, logged with its
// stack: unwinding past get would leave the instance slot taken, and Load's
// or Close's wait for every slot would hang without a word.
func (p *Plugin) instantiate(ctx context.Context) (_ *instance, err error) {
	deadline := p.callDeadline(ctx, time.Now())
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	state := p.newCallState()
	arena := &memory.Arena{}
	defer func() {
		if r := recover(); r != nil {
			arena.Release()
			p.log.ErrorContext(ctx, "host panic while instantiating the plugin (a morph bug: please report it)", "panic", r, "stack", string(debug.Stack()))
			err = guest.Fail(ErrTrap, "host panic while instantiating (a morph bug: please report it)", fmt.Errorf("%v", r))
		}
	}()
	g, err := p.module.Instantiate(state.Begin(ctx, deadline), state, arena)
	if err != nil {
		arena.Release()
		return nil, err
	}
	arena.TrimZeros() // what initialization touched and left zero: a session holds it for its life
	p.stats.instantiated.Add(1)
	return &instance{g: g, arena: arena, state: state}, nil
}

// newCallState is the state of a new instance of p: its log is p's, as p is
// named at the time, within p's log budget.
func (p *Plugin) newCallState() *guest.CallState {
	return guest.NewCallState(func() *slog.Logger { return p.log }, p.limits.MaxLogBytes, p.closing)
}
