package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/extism"
	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/host/internal/wasmbin"
	"github.com/morphhost/morph/host/internal/wasmrt"
	"github.com/morphhost/morph/record"
)

// Limits bound what one plugin may use. Zero fields take the Default* values.
type Limits struct {
	Timeout        time.Duration // per call, and per instantiation
	MemoryMiB      uint32        // linear memory cap, at most MemoryCeilingMiB
	MaxInputBytes  int           // largest JSON input the host sends
	MaxOutputBytes int           // largest output the host accepts
	MaxInstances   int           // instances that may run at once; callers beyond wait
	MaxLogBytes    int           // guest output logged per call (stdout, stderr, log calls); the rest is dropped
	MaxErrorBytes  int           // longest text of a failure's message or cause (a trap's stack, a guest's error)
	MaxJSONDepth   int           // deepest nesting of arrays and objects the host decodes from the guest
	MaxStackBytes  int           // an instance's call stack, outside its memory, as estimated (see StackLimitError)
	MaxLinkedDepth int           // how deep calls through an Extism plugin's linked modules (Config.Modules) nest (see LinkedDepthError)
	// SessionIdle (IsolationSession) is how long a session may make no call
	// into the plugin before it expires: its instances are released (with
	// morph_destroy), and if it calls again it runs on a fresh instance,
	// loudly (Stats.Replaced, SPEC.md 10.6). Until then, and until the
	// session ends (engine.Session.Close, Plugin.EndSession), its instances
	// are its own.
	SessionIdle time.Duration
	// MaxSessions (IsolationSession) bounds the sessions open at once, as
	// admission control: a new session past it waits up to SessionWait for
	// one to end or expire, then its call fails with ErrSessionLimit. An
	// open session's instance is never taken to admit another.
	MaxSessions int
	// SessionWait (IsolationSession) is how long a new session waits for a
	// place when MaxSessions are open; the caller's deadline shortens it
	// (see Plugin.acquire).
	SessionWait time.Duration
}

// Defaults for zero Limits fields.
const (
	DefaultTimeout        = 2 * time.Second
	DefaultMemoryMiB      = 64
	DefaultMaxInputBytes  = 4 << 20
	DefaultMaxOutputBytes = 1 << 20
	DefaultMaxInstances   = 4
	DefaultMaxLogBytes    = 64 << 10
	DefaultMaxErrorBytes  = 4 << 10
	DefaultMaxJSONDepth   = abi.MaxDepth
	DefaultMaxStackBytes  = 16 << 20
	DefaultMaxLinkedDepth = 64
	DefaultSessionIdle    = 10 * time.Minute
	// DefaultMaxSessions lets 10,000 sessions be open at once: what a
	// small guest's session costs (BENCHMARKS.md, Sessions: some 100-200
	// KiB resident for the WAT and Rust guests, 5 MiB for standard Go's)
	// makes it 1-2 GiB for most plugins, and each instance reserves its
	// memory cap of address space, not memory (package memory). Lower it
	// for a plugin whose sessions are large.
	DefaultMaxSessions = 10_000
	DefaultSessionWait = 10 * time.Second
)

// StackLimitCeiling is the largest Limits.MaxStackBytes: the budget is a
// 32-bit counter in the guest.
const StackLimitCeiling = interrupt.MaxStack

// MemoryCeilingMiB is the largest Limits.MemoryMiB, all a 32-bit memory
// can address. Load refuses more.
const MemoryCeilingMiB = wasmrt.MaxMemoryMiB

// LinkedDepthCeiling is the largest Limits.MaxLinkedDepth: each level
// nests Go frames of the host's, and a wazero stack on Go's heap, that no
// other limit counts. Load refuses more.
const LinkedDepthCeiling = extism.LinkedDepthCeiling

func (l Limits) withDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MemoryMiB == 0 {
		l.MemoryMiB = DefaultMemoryMiB
	}
	if l.MaxInputBytes <= 0 {
		l.MaxInputBytes = DefaultMaxInputBytes
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if l.MaxInstances <= 0 {
		l.MaxInstances = DefaultMaxInstances
	}
	if l.MaxLogBytes <= 0 {
		l.MaxLogBytes = DefaultMaxLogBytes
	}
	if l.MaxErrorBytes <= 0 {
		l.MaxErrorBytes = DefaultMaxErrorBytes
	}
	if l.MaxJSONDepth <= 0 {
		l.MaxJSONDepth = DefaultMaxJSONDepth
	}
	if l.MaxStackBytes <= 0 {
		l.MaxStackBytes = DefaultMaxStackBytes
	}
	if l.MaxLinkedDepth <= 0 {
		l.MaxLinkedDepth = DefaultMaxLinkedDepth
	}
	if l.SessionIdle <= 0 {
		l.SessionIdle = DefaultSessionIdle
	}
	if l.MaxSessions <= 0 {
		l.MaxSessions = DefaultMaxSessions
	}
	if l.SessionWait <= 0 {
		l.SessionWait = DefaultSessionWait
	}
	return l
}

// Config says which module to load and how to run it.
type Config struct {
	Name   string            // how logs and errors name the plugin; default: the manifest's name
	Path   string            // the .wasm file; ignored when Wasm is set
	Source string            // what errors and Status name the module by (an oci:// reference); default Path
	Wasm   []byte            // the module's bytes, for hosts that embed it
	SHA256 string            // optional pin: hex sha256 of the module's bytes
	Hooks  []string          // hooks to enable (abi.Hook* names); nil: every hook the plugin implements
	Limits Limits            //
	Values map[string]string // the plugin's own config, read by the guest through config_get
	// Isolation is which calls may share an instance, and so the guest's
	// state: IsolationPooled, IsolationSession or IsolationCall. Empty:
	// IsolationSession for a plugin with an enabled middleware hook,
	// IsolationPooled otherwise. Any other value fails the load.
	Isolation string
	// NoSnapshot makes every new instance run the module's initialization
	// (_initialize; an Extism module's runtime's, such as hs_init), as the
	// first one does. By default, instances start from an image of the first one's memory and
	// globals after it (a snapshot, mapped copy-on-write): what the guest
	// computed in its initialization, random seeds included, is then the
	// same in every instance (SECURITY.md, Snapshots). Set it for a plugin
	// whose initialization makes something each instance must have its own
	// of. An Extism plugin with linked modules always initializes.
	NoSnapshot bool
	// Grants are the files, environment variables and hosts the plugin may
	// reach; the zero Grants, none. Load compares them with the manifest's
	// capabilities (see Grants.Ungranted).
	Grants Grants
	// SchemaLimits are those the engine checks the plugin's tools under
	// (morph.toml's [tools]); zero fields, the engine's defaults. Inspect
	// reports every tool the engine would refuse (engine.CheckToolSpec).
	SchemaLimits engine.SchemaLimits

	// For Extism modules that follow neither morph's ABI nor an MCP tool
	// convention (see ExportTool): a plugin with any set runs on the Extism
	// loader, and one that exports morph_describe fails to load with Tools
	// or HookExports set.

	// Tools are plain exports served as tools, beside the tools of the
	// module's MCP convention if it has one.
	Tools []ExportTool
	// HookExports make plain exports hooks: hook name (abi.HookBuildPrompt,
	// ...) to the export that serves it, which takes and answers the hook's
	// ABI v1 payloads in Extism's calling convention.
	HookExports map[string]string
	// Modules are the modules the main one imports from by name.
	Modules []LinkedModule
	// HostFunctions are the extism:host/user functions the embedding host
	// provides, over morph's own of the same name (the notifications,
	// list_roots, create_elicitation and create_message of hyper-mcp's
	// plugin interface: notify_tool_list_changed refreshes the plugin's
	// tools; the others reach the call's MCP client, when it has one, or
	// log or answer that there is nothing; see package internal/extism). A
	// module importing a function neither provides fails to load, naming it.
	HostFunctions []HostFunction

	inspecting bool // Inspect: capabilities not granted go to the report, not the log
}

// Isolation modes of Config.Isolation. Limits.MaxInstances bounds the
// instances running at once in every mode.
const (
	// IsolationPooled: an idle instance serves the next call, whoever makes it.
	IsolationPooled = "pooled"
	// IsolationSession: each session (engine.RunContext(ctx).SessionID; calls
	// outside a run, such as describe, share the session "") has instances of
	// its own, never used by another session, which belong to it until it
	// ends (engine.Session.Close, Plugin.EndSession) or has made no call for
	// Limits.SessionIdle; then they are released, calling morph_destroy when
	// exported, as Close does. At any concurrency no open session's instance
	// is taken: Limits.MaxSessions refuses new sessions instead (see
	// ErrSessionLimit). A session that calls again after its instance went
	// (expired, or discarded after a fault) runs on a fresh one, loudly: a
	// warning (an engine warning event within a run), Stats.Replaced, and
	// morph_instance_replaced on the fresh instance when exported (SPEC.md
	// 10.6). TestSessionsOwnTheirInstances and the other TestSession* tests
	// hold it to this. The instance describe ran on at load, which holds no
	// session's state, serves the first session.
	IsolationSession = "session"
	// IsolationCall: each call runs on a fresh instance, closed after the
	// call without morph_destroy (a guest cannot keep state across calls).
	IsolationCall = "call"
)

// IsolationModes are the valid Config.Isolation values.
func IsolationModes() []string { return []string{IsolationPooled, IsolationSession, IsolationCall} }

// ModuleLimits bound what a module may declare, checked before anything
// compiles it: wazero's decoder allocates by the counts a module declares
// (a function declaring 2^32 locals exhausted memory from a 40-byte
// module), its compiler takes time quadratic in the nesting of blocks, and
// each instance allocates its tables' initial sizes. The loader refuses a
// module over any limit with an ErrLoad that names the limit, the value
// and the morph.toml key of [wasm.limits] to raise. A zero field takes its
// default, stated with each field: far above what real guests declare (a
// standard Go guest of 3.5 MB has 2,300 functions, 9,400 locals, a table
// of 6,400 entries and blocks nested 549 deep) and below what costs a host
// more than some seconds and some hundreds of MB to compile.
type ModuleLimits struct {
	// ModuleBytes caps the module's size (default 64 MiB); a module file
	// over it is refused before it is read.
	ModuleBytes int
	// CodeBytes caps all function bodies together (default 16 MiB).
	CodeBytes int
	// FunctionBytes caps one function body (default 2 MiB).
	FunctionBytes uint32
	// Functions caps the functions, imported and defined (default 200,000).
	Functions uint32
	// FunctionLocals caps the locals one function declares (default 50,000).
	FunctionLocals uint32
	// TotalLocals caps the locals all functions declare (default 4,000,000).
	TotalLocals uint64
	// NestingDepth caps the blocks, loops, ifs and try_tables open at once
	// in one function (default 2,000).
	NestingDepth uint32
	// NestingCost caps the sum over functions of their nesting depth
	// squared, the compiler's cost (default 100,000,000).
	NestingCost uint64
	// Types caps the function types (default 100,000).
	Types uint32
	// TypeArity caps the parameters, or the results, of one function type
	// (default 1,000).
	TypeArity uint32
	// Imports caps the imports (default 10,000).
	Imports uint32
	// Exports caps the exports (default 100,000).
	Exports uint32
	// Globals caps the globals (default 100,000).
	Globals uint32
	// Tables caps the tables, imported and defined (default 100).
	Tables uint32
	// TableEntries caps the initial sizes of all tables together (default
	// 1,048,576); their maximum sizes are capped at it too, so that
	// table.grow past it fails in the guest.
	TableEntries uint32
	// ElementSegments caps the element segments (default 100,000).
	ElementSegments uint32
	// ElementItems caps the items of all element segments together
	// (default 1,048,576).
	ElementItems uint32
	// DataSegments caps the data segments (default 100,000).
	DataSegments uint32
	// Tags caps the exception tags (default 10,000).
	Tags uint32
	// CustomSections caps the custom sections (default 1,000).
	CustomSections uint32
	// Names caps the entries of the name section's function and local maps
	// (default 1,048,576).
	Names uint32
	// NameBytes caps the longest name: of an import, an export, a custom
	// section, a function or a local (default 64 KiB).
	NameBytes uint32
}

// wasmbin is m as the module check takes it, with its defaults.
func (m ModuleLimits) wasmbin() wasmbin.Limits { return wasmbin.Limits(m).WithDefaults() }

// Loader compiles and loads plugins. One Loader serves a process; its
// compilation cache is shared by every plugin it loads.
type Loader struct {
	cache     wazero.CompilationCache
	cacheDir  string // "" when the cache is in memory only
	log       *slog.Logger
	secretEnv []string
	limits    wasmbin.Limits // with defaults
	limitsKey string         // names limits in the cache of checked modules
	pruned    sync.Once      // the cache's rewrites of older versions (pruneRewrites)
	rec       *record.Recorder
	tel       *tracing // LoaderOptions.Telemetry; nil: nothing recorded
}

// LoaderOptions configure a Loader.
type LoaderOptions struct {
	// CacheDir holds compiled modules across processes. Empty: DefaultCacheDir();
	// "off": compile in memory only.
	CacheDir string
	Logger   *slog.Logger // default slog.Default()
	// SecretEnv names environment variables no plugin may be granted (the
	// model API key's): a plugin whose Grants.Env names one fails to load,
	// whoever configured it, so the key cannot reach a guest by mistake.
	SecretEnv []string
	// ModuleLimits bound what the modules this loader loads may declare.
	ModuleLimits ModuleLimits
	// Recorder, when set, records every hook and tool call of the plugins
	// this loader loads (see package record); the caller closes it after
	// the plugins.
	Recorder *record.Recorder
	// Telemetry records a span for every call into a plugin
	// (morph.plugin.call), and the plugins' calls, faults, instances and
	// memory; the zero value records nothing.
	Telemetry engine.Telemetry
}

// DefaultCacheDir is morph's compilation cache under the user cache directory.
func DefaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "morph", "wazero")
}

// NewLoader returns a loader with its compilation cache.
func NewLoader(opts LoaderOptions) (*Loader, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var cache wazero.CompilationCache
	switch opts.CacheDir {
	case "off":
		cache = wazero.NewCompilationCache()
	case "":
		opts.CacheDir = DefaultCacheDir()
		fallthrough
	default:
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("host: compilation cache %s: %w (set another directory, or \"off\")", opts.CacheDir, err)
		}
		cache = c
	}
	dir := opts.CacheDir
	if dir == "off" {
		dir = ""
	}
	limits := opts.ModuleLimits.wasmbin()
	key := sha256.Sum256(fmt.Appendf(nil, "%+v", limits))
	return &Loader{cache: cache, cacheDir: dir, log: log, secretEnv: slices.Clone(opts.SecretEnv),
		limits: limits, limitsKey: hex.EncodeToString(key[:8]), rec: opts.Recorder, tel: newTracing(opts.Telemetry)}, nil
}

// Close releases the compilation cache; close the loader's plugins first.
func (l *Loader) Close(ctx context.Context) error { return l.cache.Close(ctx) }

// source is a module's bytes as the loader read and checked them.
type source struct {
	wasm  []byte
	sum   [32]byte // sha256 of wasm: the key of the loader's disk caches
	shape *wasmbin.Shape
}

// readModule returns the module's bytes, checked against the sha256 pin and
// (see checkModule) the loader's ModuleLimits, with what the check learned.
func (l *Loader) readModule(cfg Config) (*source, error) {
	wasm := cfg.Wasm
	if wasm == nil {
		var err error
		if wasm, err = l.readFile(cfg.Path); err != nil {
			return nil, err
		}
	}
	src := &source{wasm: wasm, sum: sha256.Sum256(wasm)}
	if pin := strings.ToLower(strings.TrimSpace(cfg.SHA256)); pin != "" {
		if got := hex.EncodeToString(src.sum[:]); got != pin {
			return nil, fmt.Errorf("sha256 mismatch: the module's is %s, the pin is %s; if the module is genuine, update the pin (sha256) to its sum", got, pin)
		}
	}
	var err error
	if src.shape, err = l.checkModule(wasm, src.sum); err != nil {
		return nil, err
	}
	return src, nil
}

// ReadModule reads the module file at path and checks it as Load does (its
// size, its header, the loader's ModuleLimits), without compiling it: for a
// caller (the conformance runner) that must tell a file it cannot read or
// that is no module, an error, from a module that does not load, a finding.
// The error is an *Error of kind ErrLoad.
func (l *Loader) ReadModule(path string) ([]byte, error) {
	src, err := l.readModule(Config{Path: path})
	if err != nil {
		return nil, &Error{Plugin: path, Kind: ErrLoad, Err: err}
	}
	return src.wasm, nil
}

// readFile reads the module file at path, if it is a regular file within
// ModuleLimits.ModuleBytes. It reads no more than the limit whatever the
// file says of its size: a FIFO or a device put in a plugin's place would
// block the reader, or feed it for ever, and a file may grow after its
// size was seen.
func (l *Loader) readFile(path string) ([]byte, error) {
	regular := func(info os.FileInfo, err error) error {
		if err == nil && !info.Mode().IsRegular() {
			err = fmt.Errorf("%s is not a regular file (%s)", path, info.Mode().Type())
		}
		return err
	}
	// Before opening: opening a FIFO blocks until someone writes it.
	if err := regular(os.Stat(path)); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat() // what was opened, should the path have changed
	if err := regular(info, err); err != nil {
		return nil, err
	}
	tooLarge := func(size int64) error {
		return fmt.Errorf("%s is %d bytes, over the limit of %d; if the module is genuine, raise [wasm.limits] %s",
			path, size, l.limits.ModuleBytes, moduleLimitSettings["ModuleBytes"])
	}
	if info.Size() > int64(l.limits.ModuleBytes) {
		return nil, tooLarge(info.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(l.limits.ModuleBytes)+1))
	if err == nil && len(b) > l.limits.ModuleBytes {
		err = tooLarge(int64(len(b)))
	}
	return b, err
}

// checkCacheVersion changes whenever the cached result of a check would
// (wasmbin.Check or Shape change).
const checkCacheVersion = 1

// checkModule refuses bytes that are not a module, or a module that
// declares more than the loader's ModuleLimits allow, before anything
// compiles it (wazero's decoder allocates by the counts a module declares).
// A module that passed is remembered in the loader's cache directory, keyed
// by its sha256 sum and the limits, as wazero's compiled code is: the read
// takes 20 ms for a 3.5 MB module, a fifth of a new process's cold start.
func (l *Loader) checkModule(wasm []byte, sum [32]byte) (*wasmbin.Shape, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly module (no \\0asm header)")
	}
	var path string
	if l.cacheDir != "" {
		path = filepath.Join(l.cacheDir, "morph-check", fmt.Sprintf("v%d-%s-%x.json", checkCacheVersion, l.limitsKey, sum))
		if b, err := os.ReadFile(path); err == nil {
			var shape wasmbin.Shape
			if json.Unmarshal(b, &shape) == nil {
				return &shape, nil
			}
		}
	}
	shape, err := wasmbin.Check(wasm, l.limits)
	var le *wasmbin.LimitError
	if errors.As(err, &le) {
		return nil, fmt.Errorf("%w; if the module is genuine, raise [wasm.limits] %s", err, moduleLimitSettings[le.Limit])
	}
	if err == nil && path != "" {
		if b, merr := json.Marshal(shape); merr == nil {
			if werr := writeAtomic(path, b); werr != nil {
				l.log.Debug("module check not cached", "path", path, "err", werr)
			}
		}
	}
	return shape, err
}

// moduleLimitSettings name the morph.toml key of each ModuleLimits field,
// for the messages that tell an operator what to raise.
var moduleLimitSettings = map[string]string{
	"ModuleBytes": "module_mb", "CodeBytes": "code_mb", "FunctionBytes": "function_kb", "Functions": "functions",
	"FunctionLocals": "function_locals", "TotalLocals": "total_locals", "NestingDepth": "nesting_depth",
	"NestingCost": "nesting_cost", "Types": "types", "TypeArity": "type_arity", "Imports": "imports",
	"Exports": "exports", "Globals": "globals", "Tables": "tables", "TableEntries": "table_entries",
	"ElementSegments": "element_segments", "ElementItems": "element_items", "DataSegments": "data_segments",
	"Tags": "tags", "CustomSections": "custom_sections", "Names": "names", "NameBytes": "name_kb",
}
