package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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

// recorder is a testing.TB whose Fatal and Skip end the calling goroutine
// and keep the message, to watch a lookup's policy.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) { r.fatal = fmt.Sprint(args...); runtime.Goexit() }

func (r *recorder) Skip(args ...any) { r.skip = fmt.Sprint(args...); runtime.Goexit() }

// call runs lookup against a recorder, on a goroutine Fatal and Skip may end.
func call(t *testing.T, lookup func(testing.TB) string) (got string, r *recorder) {
	r = &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); got = lookup(r) }()
	<-done
	return got, r
}

// The OCI tools: found where MORPH_OCI_TOOLS says; a missing one fails when
// make test set the variable or under CI=true, and skips a plain go test;
// each message names the make target.
func TestOCITools(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"crane", "oras"} {
		if err := os.WriteFile(filepath.Join(dir, "bin", name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("CI", "")
	t.Setenv(OCIToolsEnv, dir)
	if _, r := call(t, OCITools); !strings.Contains(r.fatal, "bin/cosign") || !strings.Contains(r.fatal, "`make tools-oci`") {
		t.Errorf("set, cosign missing: fatal %q, skip %q; want a failure naming bin/cosign and make tools-oci", r.fatal, r.skip)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "cosign"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, r := call(t, OCITools); got != dir || r.fatal != "" || r.skip != "" {
		t.Errorf("set, complete: %q (fatal %q, skip %q), want %q", got, r.fatal, r.skip, dir)
	}

	// Unset: the script looks in the cache, here an empty one.
	t.Setenv(OCIToolsEnv, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("OCI_TOOLS_CACHE", "") // the script's own override
	defer func(u string) { userCache = u }(userCache)
	userCache = ""
	if _, r := call(t, OCITools); r.fatal != "" || !strings.Contains(r.skip, "`make tools-oci`") {
		t.Errorf("unset: fatal %q, skip %q; want a skip naming make tools-oci", r.fatal, r.skip)
	}
	t.Setenv("CI", "true")
	if _, r := call(t, OCITools); !strings.Contains(r.fatal, "`make tools-oci`") {
		t.Errorf("unset under CI=true: fatal %q, skip %q; want a failure naming make tools-oci", r.fatal, r.skip)
	}
}
