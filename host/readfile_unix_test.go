//go:build unix

package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A plugin path that is not a regular file (a FIFO nobody writes, which
// would block a read for ever; a device, which would feed it for ever) is
// refused at once, naming it; one longer than ModuleBytes is refused
// having read no more than the limit.
func TestReadFileBounded(t *testing.T) {
	l, err := NewLoader(LoaderOptions{ModuleLimits: ModuleLimits{ModuleBytes: 1 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	dir := t.TempDir()
	fifo := filepath.Join(dir, "plugin.wasm")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, path := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := l.ReadModule(path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") || !errors.Is(err, ErrLoad) {
				t.Errorf("ReadModule(%s): %v, want an ErrLoad naming a file that is not regular", path, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("ReadModule(%s) has not returned within a minute", path)
		}
	}
	big := filepath.Join(dir, "big.wasm")
	if err := os.WriteFile(big, make([]byte, 2<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReadModule(big); err == nil || !strings.Contains(err.Error(), "over the limit of 1024") {
		t.Errorf("ReadModule of 2 KiB under a 1 KiB limit: %v", err)
	}
}
