package host

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// addressSpace is the process's virtual memory size (VmSize), in bytes.
func addressSpace(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmSize")
	return 0
}

// A plugin that fails its checks after morph_describe ran gives back its
// instance's memory mapping: each failed load kept its memory cap of
// address space mapped, for as long as the process lived.
func TestFailedLoadReleasesMemory(t *testing.T) {
	l := newLoader(t)
	wasm := guestModule{name: "unwanted"}.wasm()
	const loads, capMiB = 100, 64
	before := addressSpace(t)
	for range loads {
		_, err := l.Load(context.Background(), Config{Name: "unwanted", Wasm: wasm, Hooks: []string{"on_final"}, Limits: Limits{MemoryMiB: capMiB}})
		if !errors.Is(err, ErrABIMismatch) {
			t.Fatalf("err = %v, want the hook mismatch", err)
		}
	}
	if grown := addressSpace(t) - before; grown > loads/4*capMiB<<20 {
		t.Fatalf("%d failed loads left %d MiB more address space", loads, grown>>20)
	}
}
