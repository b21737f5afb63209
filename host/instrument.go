package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/host/internal/wasmrt"
)

// instrumented is the module rewritten by interrupt.Instrument with the
// stack budget stack, read from the loader's cache directory when an earlier
// load rewrote the same bytes with the same budget. The rewrite costs about
// 40 ms per MB of module (three passes and the frames), which would
// otherwise be paid by every process before wazero's cache of compiled code,
// keyed by the rewritten bytes, can answer. A cache that cannot be read or
// written is only slower: the module is rewritten again.
func (l *Loader) instrumented(src *source, stack uint32) ([]byte, error) {
	var path string
	if l.cacheDir != "" {
		path = filepath.Join(l.cacheDir, "morph-interrupt", fmt.Sprintf("v%d-p%d-s%d-%x.wasm", interrupt.Version, wasmrt.InterruptPeriod, stack, src.sum))
		if out, err := os.ReadFile(path); err == nil {
			return out, nil
		}
	}
	out, err := interrupt.Instrument(src.wasm, wasmrt.InterruptPeriod, stack)
	if err != nil || path == "" {
		return out, err
	}
	l.pruned.Do(func() { pruneRewrites(filepath.Dir(path)) })
	if err := writeAtomic(path, out); err != nil {
		l.log.Debug("instrumented module not cached", "path", path, "err", err)
	}
	return out, nil
}

// pruneRewrites removes from dir the rewrites of other versions of
// interrupt.Instrument, which no loader of this build reads: without it,
// every upgrade of morph left a copy of every module it had loaded. A
// loader prunes once, when it first rewrites a module (an upgrade's first
// load); errors are ignored, the files being a cache.
func pruneRewrites(dir string) {
	entries, _ := os.ReadDir(dir)
	current := fmt.Sprintf("v%d-", interrupt.Version)
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, "v") && strings.HasSuffix(name, ".wasm") && !strings.HasPrefix(name, current) {
			os.Remove(filepath.Join(dir, name))
		}
	}
}

// writeAtomic writes b to path through a temporary file renamed into place,
// so that a concurrent reader sees the whole file or none.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename, a no-op
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
