package main

import (
	"os"
	"strings"
	"testing"

	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/internal/testenv"
)

// The CLI compiles into host.DefaultCacheDir, under the isolated home: under
// make test, that is the run's cache, shared with the library packages'
// tests (testenv.ShareCompileCache).
func TestMain(m *testing.M) {
	testenv.Main(m, func() error { return testenv.ShareCompileCache(host.DefaultCacheDir()) })
}

// The CLI's tests discover no plugins of the developer's (~/.morph/plugins
// broke TestRun): their home is a temporary directory.
func TestHomeIsIsolated(t *testing.T) {
	if home, err := os.UserHomeDir(); err != nil || !strings.HasPrefix(home, os.TempDir()) {
		t.Fatalf("home %q (%v), want a temporary directory", home, err)
	}
}
