package testenv

import (
	"path/filepath"
	"strings"
	"testing"
)

// The published pipelines: found where MORPH_DOT_CORPUS says; a missing
// directory fails when make test set the variable or under CI=true, and
// skips a plain go test; each message names the make target.
func TestDotCorpus(t *testing.T) {
	lookup := func(t testing.TB) string { return strings.Join(DotCorpus(t), "|") }
	a, b := t.TempDir(), t.TempDir()
	t.Setenv("CI", "")
	t.Setenv(DotCorpusEnv, a+string(filepath.ListSeparator)+b)
	if got, r := call(t, lookup); got != a+"|"+b || r.fatal != "" || r.skip != "" {
		t.Errorf("set: %q (fatal %q, skip %q), want %q and %q", got, r.fatal, r.skip, a, b)
	}
	gone := filepath.Join(a, "gone")
	t.Setenv(DotCorpusEnv, a+string(filepath.ListSeparator)+gone)
	if _, r := call(t, lookup); !strings.Contains(r.fatal, gone) || !strings.Contains(r.fatal, "`make dot-corpus`") {
		t.Errorf("set, one missing: fatal %q, skip %q; want a failure naming %s and make dot-corpus", r.fatal, r.skip, gone)
	}

	// Unset: the script looks in the module cache, here an empty one,
	// offline.
	t.Setenv(DotCorpusEnv, "")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOFLAGS", "-modcacherw") // so that TempDir can remove what go writes there
	if _, r := call(t, lookup); r.fatal != "" || !strings.Contains(r.skip, "`make dot-corpus`") {
		t.Errorf("unset: fatal %q, skip %q; want a skip naming make dot-corpus", r.fatal, r.skip)
	}
	t.Setenv("CI", "true")
	if _, r := call(t, lookup); !strings.Contains(r.fatal, "`make dot-corpus`") {
		t.Errorf("unset under CI=true: fatal %q, skip %q; want a failure naming make dot-corpus", r.fatal, r.skip)
	}
}
