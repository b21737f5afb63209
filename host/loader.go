// Package host loads WebAssembly plugins that implement morph's ABI (package
// abi) and turns them into the engine's hooks and tools.
//
// Each plugin gets its own wazero runtime, so that its memory cap is its own
// (wazero's limit is per runtime), while all plugins share one compilation
// cache, in memory and on disk, so a module compiles once per machine rather
// than once per process. Calls run with a deadline on a pooled instance that
// only one goroutine uses at a time; an instance that traps or times out is
// discarded and the next call gets a fresh one.
package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
)

// Limits bound what one plugin may use. Zero fields take the Default* values.
type Limits struct {
	Timeout        time.Duration // per call, and per instantiation
	MemoryMiB      uint32        // linear memory cap
	MaxInputBytes  int           // largest JSON input the host sends
	MaxOutputBytes int           // largest output the host accepts
	MaxInstances   int           // instances that may run at once; callers beyond wait
	MaxLogBytes    int           // guest stdout+stderr logged per instance; the rest is dropped
}

// Defaults for zero Limits fields.
const (
	DefaultTimeout        = 2 * time.Second
	DefaultMemoryMiB      = 64
	DefaultMaxInputBytes  = 4 << 20
	DefaultMaxOutputBytes = 1 << 20
	DefaultMaxInstances   = 4
	DefaultMaxLogBytes    = 64 << 10
	// MaxModuleBytes caps the size of a .wasm file the loader reads.
	MaxModuleBytes = 256 << 20
)

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
	return l
}

// Config says which module to load and how to run it.
type Config struct {
	Name   string            // how logs and errors name the plugin; default: the manifest's name
	Path   string            // the .wasm file; ignored when Wasm is set
	Wasm   []byte            // the module's bytes, for hosts that embed it
	SHA256 string            // optional pin: hex sha256 of the module's bytes
	Hooks  []string          // hooks to enable (abi.Hook* names); nil: every hook the plugin implements
	Limits Limits            //
	Values map[string]string // the plugin's own config, read by the guest through config_get
}

// Loader compiles and loads plugins. One Loader serves a process; its
// compilation cache is shared by every plugin it loads.
type Loader struct {
	cache wazero.CompilationCache
	log   *slog.Logger
}

// LoaderOptions configure a Loader.
type LoaderOptions struct {
	// CacheDir holds compiled modules across processes. Empty: DefaultCacheDir();
	// "off": compile in memory only.
	CacheDir string
	Logger   *slog.Logger // default slog.Default()
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
	return &Loader{cache: cache, log: log}, nil
}

// Close releases the compilation cache; close the loader's plugins first.
func (l *Loader) Close(ctx context.Context) error { return l.cache.Close(ctx) }

// readModule returns the module's bytes, checked against the sha256 pin and
// the wasm magic number.
func readModule(cfg Config) ([]byte, error) {
	wasm := cfg.Wasm
	if wasm == nil {
		info, err := os.Stat(cfg.Path)
		if err != nil {
			return nil, err
		}
		if info.Size() > MaxModuleBytes {
			return nil, fmt.Errorf("%s is %d bytes, over the %d-byte module limit", cfg.Path, info.Size(), MaxModuleBytes)
		}
		if wasm, err = os.ReadFile(cfg.Path); err != nil {
			return nil, err
		}
	}
	if pin := strings.ToLower(strings.TrimSpace(cfg.SHA256)); pin != "" {
		sum := sha256.Sum256(wasm)
		if got := hex.EncodeToString(sum[:]); got != pin {
			return nil, fmt.Errorf("sha256 mismatch: the module's is %s, the pin is %s", got, pin)
		}
	}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, fmt.Errorf("not a WebAssembly module (no \\0asm header)")
	}
	return wasm, nil
}
