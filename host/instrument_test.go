package host

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/host/internal/wasmrt"
)

// A module is instrumented once per cache directory: the rewrite is kept
// there, keyed by the original bytes, and a later loader uses it (shown by
// replacing the cached rewrite of minimal with that of echo: the cache
// directory is trusted, as SECURITY.md says of wazero's compiled code), and
// the rewrites of older versions of the instrumentation are removed.
func TestInstrumentedModulesAreCached(t *testing.T) {
	dir := t.TempDir()
	instrument := func(name string) (orig, rewritten []byte) {
		orig, err := os.ReadFile(fixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		if rewritten, err = interrupt.Instrument(orig, wasmrt.InterruptPeriod, DefaultMaxStackBytes); err != nil {
			t.Fatal(err)
		}
		return orig, rewritten
	}
	minimal, want := instrument("minimal")
	_, echo := instrument("echo")
	// A rewrite of an older version of Instrument, which this build never
	// reads: the first rewrite prunes it. Other files stay.
	old := filepath.Join(dir, "morph-interrupt", fmt.Sprintf("v%d-p1-s1-00.wasm", interrupt.Version-1))
	other := filepath.Join(dir, "morph-interrupt", "notes.txt")
	for _, f := range []string{old, other} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, echo, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	prompt := func() string {
		l, err := NewLoader(LoaderOptions{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		out, err := load(t, l, Config{Wasm: minimal}).Call(context.Background(), abi.ExportBuildPrompt, []byte(`{"task":"t"}`))
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if got := prompt(); got != `{"system_prompt":"Be brief."}` {
		t.Fatalf("first load answered %s", got)
	}
	cached, _ := filepath.Glob(filepath.Join(dir, "morph-interrupt", "*.wasm"))
	if len(cached) != 1 {
		t.Fatalf("cached %v, want one file: the older version's pruned", cached)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("pruning removed a file that is not a rewrite: %v", err)
	}
	if got, _ := os.ReadFile(cached[0]); !bytes.Equal(got, want) {
		t.Fatal("the cached module is not the instrumented one")
	}
	if err := os.WriteFile(cached[0], echo, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := prompt(); got != `{"task":"t"}` {
		t.Fatalf("second load answered %s: it did not use the cache", got)
	}
}
