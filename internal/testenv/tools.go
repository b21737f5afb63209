// What tests need from the machine has one policy: a tool or a built file
// that is missing fails the test, naming the make target that provides it,
// so that a green run never hides a guest left untested. `make test` builds
// and installs everything first. The one switch is MORPH_SKIP_TINYGO=1, for
// machines that cannot afford to build TinyGo (about a minute and a half,
// once): the Makefile then builds no TinyGo guest, and the tests of TinyGo
// guests skip, saying so.
//
// The exception is mock-llm (MockLLM), a model server from npm rather than
// a build of ours: `make test` installs it and names it in MockLLMEnv, and
// then, as under CI=true, a missing one fails; a plain go test on a machine
// without it skips its tests, naming the make target.

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// SkipTinyGoEnv is the variable that, set to 1, skips the TinyGo guests.
const SkipTinyGoEnv = "MORPH_SKIP_TINYGO"

// Tool is the path of the named program, or fails t naming the make target
// that installs it.
func Tool(t testing.TB, name, target string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: `make %s` installs it", name, target)
	}
	return path
}

// Built is path, a file the build makes, or fails t naming the make target
// that builds it.
func Built(t testing.TB, path, target string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%v: run `make %s` in the repository root", err, target)
	}
	return path
}

// File is the content of a file the build makes, or fails t as Built does.
func File(t testing.TB, path, target string) []byte {
	t.Helper()
	b, err := os.ReadFile(Built(t, path, target))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TinyGo skips t when the TinyGo guests are switched off (SkipTinyGoEnv);
// what names what is not tested.
func TinyGo(t testing.TB, what string) {
	t.Helper()
	if os.Getenv(SkipTinyGoEnv) == "1" {
		t.Skipf("%s=1: %s is not tested", SkipTinyGoEnv, what)
	}
}

// MockLLMEnv is the variable `make test` sets to the path of the mock-llm
// program that `make tools-mock-llm` installed.
const MockLLMEnv = "MORPH_MOCK_LLM"

// mockLLMVersion is the @dwmkerr/mock-llm version the Makefile installs
// (MOCK_LLM_VERSION there): the default path has it.
const mockLLMVersion = "0.1.29"

// userCache is the user's cache directory as it was before Main moved
// HOME and XDG_CACHE_HOME to a temporary directory; empty without Main.
var userCache string

// cacheHome is the cache directory the Makefile and scripts use:
// $XDG_CACHE_HOME, else ~/.cache, as the user has them.
func cacheHome() string {
	if userCache != "" {
		return userCache
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return d
	}
	return filepath.Join(os.Getenv("HOME"), ".cache")
}

// UserCacheDir is the user's cache directory as the Makefile and scripts
// see it ($XDG_CACHE_HOME, else ~/.cache), not the temporary one Main set:
// for a test that runs a tool whose cache there a make target filled.
func UserCacheDir() string { return cacheHome() }

// MockLLM is the path of the mock-llm program (@dwmkerr/mock-llm, an
// OpenAI-compatible mock server installed from npm): MockLLMEnv's value,
// else where `make tools-mock-llm` installs it. When the program or node
// is missing it fails t under `make test` (MockLLMEnv set) or CI=true, and
// skips t otherwise, naming the make target either way.
func MockLLM(t testing.TB) string {
	t.Helper()
	path := os.Getenv(MockLLMEnv)
	fromMake := path != ""
	if !fromMake {
		path = filepath.Join(cacheHome(), "morph", "mock-llm-"+mockLLMVersion, "node_modules", ".bin", "mock-llm")
	}
	var problem string
	if _, err := os.Stat(path); err != nil {
		problem = err.Error()
	} else if _, err := exec.LookPath("node"); err != nil {
		problem = "node, which runs " + path + ", is not on PATH"
	}
	if problem == "" {
		return path
	}
	msg := fmt.Sprintf("mock-llm: %s: `make tools-mock-llm` installs it", problem)
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); fromMake || ci {
		t.Fatal(msg)
	}
	t.Skip(msg + " (under make test or CI=true this fails)")
	return ""
}
