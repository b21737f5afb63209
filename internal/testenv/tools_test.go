package testenv

import (
	"path/filepath"
	"testing"
)

// A missing build is named as the Makefile names it, from the repository's
// root, whichever package's directory the test runs in.
func TestFromRoot(t *testing.T) {
	for _, path := range []string{"../../guests/testdata/x.wasm", "../../temporal/../guests/testdata/x.wasm"} {
		if got := fromRoot(path); got != "guests/testdata/x.wasm" {
			t.Errorf("fromRoot(%q) = %q, want guests/testdata/x.wasm", path, got)
		}
	}
	abs, err := filepath.Abs("../../guests/testdata/x.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if got := fromRoot(abs); got != "guests/testdata/x.wasm" {
		t.Errorf("fromRoot(%q) = %q, want guests/testdata/x.wasm", abs, got)
	}
	// Outside the repository there is no root to name it from.
	outside := filepath.Join(t.TempDir(), "x.wasm")
	if got := fromRoot(outside); got != outside {
		t.Errorf("fromRoot(%q) = %q, want it unchanged", outside, got)
	}
	// A nested module's go.mod is not the root's.
	nested := "../../temporal/x.wasm"
	if got := fromRoot(nested); got != "temporal/x.wasm" {
		t.Errorf("fromRoot(%q) = %q, want temporal/x.wasm", nested, got)
	}
}
