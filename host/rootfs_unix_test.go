//go:build unix

package host

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A named pipe in a granted directory (or a device) is refused at open, at
// once: opening a pipe blocks until its other end opens, which nothing would
// ever do, and the guest's call sat in the host past its deadline (a read of
// the pipe through the Go guest blocked for good before the check).
func TestGrantedPipeRefused(t *testing.T) {
	l, logs, wasm := capGo(t)
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	p := load(t, l, Config{Name: "pipes", Path: wasm, Limits: Limits{Timeout: time.Second},
		Grants: Grants{Paths: []PathGrant{{Host: dir, Guest: "/data"}}}})
	// refused, not timed out: a blocked open would end at the deadline
	// with ErrTimeout, not this error
	deniedTool(t, p, "read", map[string]any{"path": "/data/pipe"}, "Operation not permitted")
	if !strings.Contains(logs.String(), "neither regular nor a directory") {
		t.Fatalf("the refusal was not logged:\n%s", logs.String())
	}
}
