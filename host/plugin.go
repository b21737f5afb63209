package host

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/morphhost/morph/abi"
)

// Plugin is a loaded module. It is safe for concurrent use: each call runs
// on an instance of its own, drawn from the free list its isolation mode
// picks (see Config.Isolation and isolation.go).
type Plugin struct {
	name     string
	source   string // the file, or "(bytes)"
	limits   Limits
	values   map[string]string
	log      *slog.Logger
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	manifest abi.Manifest
	hooks    []string // enabled hooks, sorted

	mode     string        // Config.Isolation; "" (pooled) until describe has run
	slots    chan struct{} // one token per instance allowed to run
	stats    stats
	evicting sync.WaitGroup // evictions in flight; Close waits for them

	mu       sync.Mutex
	now      func() time.Time // the clock of idle sessions; tests replace it
	free     []*instance      // idle instances, in the order they came back
	sessions map[string]int   // idle instances by key, for Limits.MaxSessions
	sweeper  *time.Timer      // the next idle-session sweep, when one is due
	closed   bool
}

// instance is one instantiation with its export handles resolved once:
// ExportedFunction allocates on every lookup.
type instance struct {
	mod   api.Module
	alloc api.Function
	fns   map[string]api.Function
	stack []uint64 // reused by CallWithStack

	key   string    // the free list it belongs to (see poolKey)
	spare bool      // has run only describe: any key may take it
	reuse bool      // false: closed after its call (IsolationCall)
	since time.Time // when it last came back idle
}

// Load reads, verifies, compiles and describes a plugin. Errors are *Error
// of kind ErrLoad or ErrABIMismatch and name the plugin and the file.
func (l *Loader) Load(ctx context.Context, cfg Config) (*Plugin, error) {
	source := cfg.Path
	if source == "" {
		source = "(bytes)"
	}
	label := cfg.Name
	if label == "" {
		label = source
	}
	fail := func(kind error, err error) (*Plugin, error) {
		return nil, &Error{Plugin: label, Kind: kind, Msg: source, Err: err}
	}
	wasm, err := readModule(cfg)
	if err != nil {
		return fail(ErrLoad, err)
	}
	if cfg.Isolation != "" && !slices.Contains(IsolationModes(), cfg.Isolation) {
		return fail(ErrLoad, fmt.Errorf("isolation %q: want one of %s", cfg.Isolation, strings.Join(IsolationModes(), ", ")))
	}
	p := &Plugin{name: label, source: source, limits: cfg.Limits.withDefaults(), values: cfg.Values, log: l.log.With("plugin", label),
		mode: cfg.Isolation, now: time.Now, sessions: map[string]int{}}
	p.runtime = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCompilationCache(l.cache).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(p.limits.MemoryMiB*16)) // 64 KiB pages
	ok := false
	defer func() {
		if !ok {
			p.runtime.Close(ctx)
		}
	}()
	if p.compiled, err = p.runtime.CompileModule(ctx, wasm); err != nil {
		return fail(ErrLoad, fmt.Errorf("compile: %w", err))
	}
	if err := checkExports(p.compiled); err != nil {
		return fail(ErrABIMismatch, err)
	}
	if err := p.instantiateImports(ctx); err != nil {
		return fail(ErrLoad, err)
	}
	p.slots = make(chan struct{}, p.limits.MaxInstances)
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
	ok = true
	return p, nil
}

// checkExports enforces the marker and the shapes of the exports ABI v1 defines.
func checkExports(mod wazero.CompiledModule) error {
	exports := mod.ExportedFunctions()
	if _, ok := exports[abi.MarkerV1]; !ok {
		var found []string
		for name := range exports {
			if strings.HasPrefix(name, abi.MarkerPrefix) {
				found = append(found, name)
			}
		}
		sort.Strings(found)
		if len(found) == 0 {
			return fmt.Errorf("no ABI marker export: found none, this host supports %s", abi.MarkerV1)
		}
		return fmt.Errorf("unsupported ABI: found %s, this host supports %s", strings.Join(found, ", "), abi.MarkerV1)
	}
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	want := func(name string, params, results []api.ValueType, required bool) error {
		def, ok := exports[name]
		if !ok {
			if required {
				return fmt.Errorf("missing export %s", name)
			}
			return nil
		}
		if !slices.Equal(def.ParamTypes(), params) || !slices.Equal(def.ResultTypes(), results) {
			return fmt.Errorf("export %s has signature %s -> %s, want %s -> %s", name,
				valueTypes(def.ParamTypes()), valueTypes(def.ResultTypes()), valueTypes(params), valueTypes(results))
		}
		return nil
	}
	errs := []error{
		want(abi.ExportAlloc, []api.ValueType{i32}, []api.ValueType{i32}, true),
		want(abi.ExportDescribe, []api.ValueType{i32, i32}, []api.ValueType{i64}, true),
	}
	for _, name := range callExports() {
		errs = append(errs, want(name, []api.ValueType{i32, i32}, []api.ValueType{i64}, false))
	}
	if _, ok := mod.ExportedMemories()["memory"]; !ok {
		errs = append(errs, errors.New("missing export memory"))
	}
	return errors.Join(errs...)
}

// callExports lists every export of shape (ptr, len) -> i64 in v1.
func callExports() []string {
	return []string{abi.ExportDescribe, abi.ExportBuildPrompt, abi.ExportBuildParams, abi.ExportOnToolSuccess,
		abi.ExportFallbackFinal, abi.ExportCallTool, abi.ExportOnTurnStart, abi.ExportOnAction, abi.ExportOnObservation,
		abi.ExportOnFinal, abi.ExportBeforeRun, abi.ExportAfterRun, abi.ExportBeforeToolCall, abi.ExportAfterToolCall,
		abi.ExportDestroy}
}

func valueTypes(ts []api.ValueType) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = api.ValueTypeName(t)
	}
	return "(" + strings.Join(names, ", ") + ")"
}

// describe calls the describe export and checks the manifest against the
// module's exports and the configured hooks.
func (p *Plugin) describe(ctx context.Context, cfg Config) error {
	out, err := p.Call(ctx, abi.ExportDescribe, nil)
	if err != nil {
		return err
	}
	var m abi.Manifest
	if err := json.Unmarshal(out, &m); err != nil {
		return &Error{Plugin: p.name, Export: abi.ExportDescribe, Kind: ErrBadOutput, Err: err}
	}
	if m.ABIVersion != abi.Version {
		return fmt.Errorf("manifest abi_version is %d, this host supports %d", m.ABIVersion, abi.Version)
	}
	if strings.TrimSpace(m.Name) == "" {
		return errors.New("manifest has no name")
	}
	exports := p.compiled.ExportedFunctions()
	for _, h := range m.Hooks {
		export, known := hookExport(h)
		if !known {
			continue // a hook of a later minor revision: ignored, not an error
		}
		if _, ok := exports[export]; !ok {
			return fmt.Errorf("manifest declares hook %s but the module does not export %s", h, export)
		}
	}
	if _, ok := exports[abi.ExportCallTool]; len(m.Tools) > 0 && !ok {
		return fmt.Errorf("manifest declares %d tools but the module does not export %s", len(m.Tools), abi.ExportCallTool)
	}
	for _, c := range m.Capabilities {
		if c != abi.CapabilityLog && c != abi.CapabilityConfig {
			p.log.WarnContext(ctx, "the plugin requests a capability this host does not grant; calls that need it will fail", "capability", c)
		}
	}
	enabled, err := enabledHooks(m.Hooks, cfg.Hooks)
	if err != nil {
		return err
	}
	p.manifest, p.hooks = m, enabled
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
			if _, known := hookExport(h); known {
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
	Calls        uint64 // export calls, describe included
	Faults       uint64 // calls that failed, guest-reported errors included
	Instantiated uint64 // instances created
	Discarded    uint64 // instances thrown away after a trap, timeout or bad output
}

type stats struct{ calls, faults, instantiated, discarded atomic.Uint64 }

// Stats returns the plugin's counters.
func (p *Plugin) Stats() Stats {
	return Stats{Calls: p.stats.calls.Load(), Faults: p.stats.faults.Load(),
		Instantiated: p.stats.instantiated.Load(), Discarded: p.stats.discarded.Load()}
}

// Name is the plugin's name in logs and errors.
func (p *Plugin) Name() string { return p.name }

// Manifest is what the plugin's describe export returned.
func (p *Plugin) Manifest() abi.Manifest { return p.manifest }

// Hooks are the enabled hooks, sorted.
func (p *Plugin) Hooks() []string { return slices.Clone(p.hooks) }

// Isolation is the plugin's isolation mode: the configured one, or the default
// for its enabled hooks.
func (p *Plugin) Isolation() string { return p.mode }

// Close closes the plugin's runtime and every instance, first calling
// morph_destroy (when the module exports it) once on each idle instance,
// with the plugin's timeout; a failing destroy is logged, and the close goes
// on. It waits for idle-session evictions in flight. Calls in flight end
// with an error; later calls fail with ErrClosed. A second Close does
// nothing and returns nil.
func (p *Plugin) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	idle := p.free
	p.closed, p.free, p.sessions = true, nil, nil
	if p.sweeper != nil {
		p.sweeper.Stop()
		p.sweeper = nil
	}
	p.mu.Unlock()
	p.evicting.Wait()
	p.destroy(ctx, idle)
	return p.runtime.Close(ctx)
}

// Call runs export with input on an instance (see Config.Isolation; outside
// a run, the session is "") and returns a copy of
// its output. It is the raw ABI call: the input and output are opaque bytes.
func (p *Plugin) Call(ctx context.Context, export string, input []byte) ([]byte, error) {
	var out []byte
	err := p.call(ctx, export, input, func(view []byte) error {
		out = append([]byte(nil), view...)
		return nil
	})
	return out, err
}

// call runs export and hands the output, still in guest memory, to read
// before the instance goes back to its free list; an error from read is
// ErrBadOutput and retires the instance.
func (p *Plugin) call(ctx context.Context, export string, input []byte, read func(view []byte) error) error {
	fail := func(kind error, msg string, err error) error {
		return &Error{Plugin: p.name, Export: export, Kind: kind, Msg: msg, Err: err}
	}
	if len(input) > p.limits.MaxInputBytes {
		return fail(ErrInputTooLarge, fmt.Sprintf("%d bytes, limit %d", len(input), p.limits.MaxInputBytes), nil)
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return fail(ErrTimeout, "waiting for a free instance", ctx.Err())
	}
	defer func() { <-p.slots }()

	callCtx, cancel := context.WithTimeout(ctx, p.limits.Timeout)
	defer cancel()
	inst, err := p.get(callCtx)
	if err != nil {
		return fail(p.classify(ctx, err), "instantiate", err)
	}
	view, kind, msg, err := inst.call(callCtx, export, input, p.limits.MaxOutputBytes)
	if kind == nil {
		if err = read(view); err != nil {
			kind, msg = ErrBadOutput, truncate(view, 200)
		}
	}
	p.stats.calls.Add(1)
	switch kind {
	case nil, ErrGuest: // a clean answer, even an error one, leaves the instance healthy
		p.put(inst)
	case ErrTrap:
		kind = p.classify(ctx, err)
		fallthrough
	default: // possibly poisoned: a fresh instance serves the next call
		p.stats.discarded.Add(1)
		inst.mod.Close(context.Background())
	}
	if kind != nil {
		p.stats.faults.Add(1)
		return fail(kind, msg, err)
	}
	return nil
}

// classify tells a deadline (ours or the caller's) from a trap.
func (p *Plugin) classify(parent context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return ErrTimeout
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) && (exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled) {
		return ErrTimeout
	}
	if parent.Err() != nil {
		return ErrTimeout
	}
	if errors.Is(err, ErrClosed) {
		return ErrClosed
	}
	return ErrTrap
}

// call runs one export on this instance and returns its output in place in
// guest memory, valid until the instance's next call. A non-nil kind is the failure.
func (in *instance) call(ctx context.Context, export string, input []byte, maxOut int) (view []byte, kind error, msg string, err error) {
	fn := in.fns[export]
	if fn == nil {
		return nil, ErrABIMismatch, "the module does not export it", nil
	}
	var ptr uint32
	if len(input) > 0 {
		in.stack[0] = uint64(len(input))
		if err := in.alloc.CallWithStack(ctx, in.stack); err != nil {
			return nil, ErrTrap, abi.ExportAlloc, err
		}
		ptr = uint32(in.stack[0])
		if ptr == 0 {
			return nil, ErrGuest, fmt.Sprintf("%s could not allocate %d bytes", abi.ExportAlloc, len(input)), nil
		}
		if !in.mod.Memory().Write(ptr, input) {
			return nil, ErrBadOutput, fmt.Sprintf("%s returned %d, outside guest memory", abi.ExportAlloc, ptr), nil
		}
	}
	in.stack[0], in.stack[1] = uint64(ptr), uint64(len(input))
	if err := fn.CallWithStack(ctx, in.stack); err != nil {
		return nil, ErrTrap, "", err
	}
	rptr, rlen, isErr := abi.Unpack(in.stack[0])
	if int(rlen) > maxOut {
		return nil, ErrOutputTooLarge, fmt.Sprintf("%d bytes, limit %d", rlen, maxOut), nil
	}
	view, ok := in.mod.Memory().Read(rptr, rlen)
	if !ok {
		return nil, ErrBadOutput, fmt.Sprintf("result [%d, +%d) is outside guest memory", rptr, rlen), nil
	}
	if isErr {
		return nil, ErrGuest, string(view), nil
	}
	return view, nil, "", nil
}

func (p *Plugin) instantiate(ctx context.Context) (*instance, error) {
	logw := newLogWriter(p, p.limits.MaxLogBytes)
	cfg := wazero.NewModuleConfig().
		WithName(""). // anonymous: a runtime may hold many instances of one module
		WithStartFunctions("_initialize").
		WithSysNanotime().WithSysWalltime().WithSysNanosleep().
		WithRandSource(rand.Reader).
		WithStdout(logw).WithStderr(logw)
	mod, err := p.runtime.InstantiateModule(ctx, p.compiled, cfg)
	if err != nil {
		return nil, err
	}
	p.stats.instantiated.Add(1)
	inst := &instance{mod: mod, alloc: mod.ExportedFunction(abi.ExportAlloc), fns: map[string]api.Function{}, stack: make([]uint64, 2)}
	for _, name := range callExports() {
		if fn := mod.ExportedFunction(name); fn != nil {
			inst.fns[name] = fn
		}
	}
	return inst, nil
}

// instantiateImports provides the host module, and WASI for guests whose
// runtime needs it (Go, TinyGo, Rust's wasm32-wasi): no preopened
// directories, no environment, no arguments.
func (p *Plugin) instantiateImports(ctx context.Context) error {
	needWASI := false
	for _, f := range p.compiled.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch mod {
		case wasi_snapshot_preview1.ModuleName:
			needWASI = true
		case abi.HostModule:
			if name != abi.ImportLog && name != abi.ImportConfigGet {
				return fmt.Errorf("imports %s.%s, which this host does not provide", mod, name)
			}
		default:
			return fmt.Errorf("imports %s.%s: only %s and %s are available", mod, name, abi.HostModule, wasi_snapshot_preview1.ModuleName)
		}
	}
	if needWASI {
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, p.runtime); err != nil {
			return fmt.Errorf("wasi: %w", err)
		}
	}
	return p.instantiateHostModule(ctx)
}
