// Package testenv holds what morph's tests need of their environment: the
// policy for missing tools and builds (tools.go), a bound on calls that
// could hang (Within), and keeping a package's tests from the developer's
// own files:
// morph reads plugins from ~/.morph/plugins and caches compiled modules in
// the user cache directory, so a test binary run in a developer's account
// would load their plugins into every engine it builds (and fail on them)
// and fill their cache.
package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// homeVars are the variables that locate a user's home, configuration,
// data, state and cache directories on the systems Go supports.
var homeVars = []string{"HOME", "USERPROFILE", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "AppData", "LocalAppData"}

// Main is a TestMain: it points the home and XDG directories at a new
// temporary directory, runs setup (what needs the new home), runs the
// tests, removes the directory and exits with the tests' status. The go
// command's directories, which default to places under the home and cache
// directories, keep their values, so a test that runs go build keeps the
// module and build caches.
func Main(m *testing.M, setup ...func() error) {
	err := isolate()
	for _, f := range setup {
		if err == nil {
			err = f()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(os.Getenv("HOME"))
	os.Exit(code)
}

func isolate() error {
	if err := pinGo(); err != nil {
		return err
	}
	userCache = cacheHome()
	home, err := os.MkdirTemp("", "morph-test-home-")
	if err != nil {
		return err
	}
	for _, v := range homeVars {
		if err := os.Setenv(v, home); err != nil {
			return err
		}
	}
	return nil
}

// CompileCacheEnv names a directory that `make test` creates for each run
// and gives the test processes of every package it tests, as their
// compilation cache (see CompileCache).
const CompileCacheEnv = "MORPH_TEST_CACHE"

// CompileCache is the compilation cache (host.LoaderOptions.CacheDir) of
// tests that load a module several loaders or packages load, such as a
// standard Go guest (10 to 25 s to compile under -race): the directory
// $MORPH_TEST_CACHE names, so that each module compiles once per run;
// without it, "off" (in memory).
//
// wazero names its version in the cache's entries, from the binary's build
// information: a command's test binary has go.mod's, a library package's
// none ("dev"), so that their entries would not serve each other. make test
// sets it, the same in every test binary, with the linker (-X, see the
// Makefile's unit-root).
func CompileCache() string {
	if dir := os.Getenv(CompileCacheEnv); dir != "" {
		return dir
	}
	return "off"
}

// ShareCompileCache is a Main setup for the tests of a command, which
// compiles into its default cache directory, dir (host.DefaultCacheDir in
// the isolated home): when make test names a CompileCache, dir becomes a
// link to it, so that a standard Go guest the library packages' tests
// compiled is not compiled again by the command's, nor theirs by these.
func ShareCompileCache(dir string) error {
	shared := os.Getenv(CompileCacheEnv)
	if shared == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	return os.Symlink(shared, dir)
}

// pinGo sets the go command's directories to the values it uses now; with
// no go command there is nothing to keep.
func pinGo() error {
	if _, err := exec.LookPath("go"); err != nil {
		return nil
	}
	out, err := exec.Command("go", "env", "-json", "GOPATH", "GOMODCACHE", "GOCACHE", "GOENV").Output()
	if err != nil {
		return fmt.Errorf("go env: %w", err)
	}
	var vars map[string]string
	if err := json.Unmarshal(out, &vars); err != nil {
		return fmt.Errorf("go env: %w", err)
	}
	for k, v := range vars {
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Buffer is a bytes.Buffer that other goroutines (a child process's output,
// a logger) write while a test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Within runs fn and fails the test if it takes longer than 30 seconds, a
// bound no correct implementation comes near: for the calls an attack
// would hang (a schema that takes days to check, a reference to a FIFO),
// so that the test names what hung rather than the test binary timing out.
func Within(t testing.TB, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return within 30s", what)
	}
}
