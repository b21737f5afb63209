package telemetry

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// The SDK's errors print once each, prefixed and escaped, and a flood of
// distinct ones stops at MaxErrorKinds lines and one note.
func TestErrorHandler(t *testing.T) {
	var out strings.Builder
	var mu sync.Mutex
	h := ErrorHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	}))
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.Handle(errors.New("traces export: dial tcp 127.0.0.1:4399: connection refused\x1b[31m\nforged line"))
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "morph: warning: telemetry: traces export: dial tcp") || strings.ContainsAny(lines[0], "\x1b\r") {
		t.Fatalf("one error four times printed %q, want one escaped morph: warning: line", out.String())
	}

	out.Reset()
	for i := range 3 * MaxErrorKinds {
		h.Handle(fmt.Errorf("export %d failed", i))
	}
	lines = strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	// One kind was seen above: MaxErrorKinds-1 more print, then the note.
	if len(lines) != MaxErrorKinds || !strings.Contains(lines[len(lines)-1], "the rest are not shown") {
		t.Errorf("a flood of distinct errors printed %d lines, want %d ending in the note:\n%s", len(lines), MaxErrorKinds, out.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
