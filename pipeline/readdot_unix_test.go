//go:build unix

package pipeline

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// ReadDOTSource refuses a FIFO without opening it (an open waits for a
// writer) and names it.
func TestReadDOTSourceRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "p.dot")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	if _, err := ReadDOTSource(fifo); err == nil || !strings.Contains(err.Error(), fifo+": not a regular file") {
		t.Fatalf("err %v, want the FIFO named as not a regular file", err)
	}
}
