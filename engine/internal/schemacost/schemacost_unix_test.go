//go:build unix

package schemacost

import (
	"path/filepath"
	"syscall"
	"testing"
)

// A reference to a FIFO nobody writes to: opening it would block forever,
// as /dev/stdin does on a terminal.
func TestFIFORefDoesNotBlock(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "schema.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	wantRefused(t, `{"$ref":"file://`+filepath.ToSlash(fifo)+`"}`, nil, "outside itself")
}
