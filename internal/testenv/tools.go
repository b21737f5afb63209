// What tests need from the machine has one policy: a tool or a built file
// that is missing fails the test, naming the make target that provides it,
// so that a green run never hides a guest left untested. `make test` builds
// and installs everything first. The one switch is MORPH_SKIP_TINYGO=1, for
// machines that cannot afford to build TinyGo (about a minute and a half,
// once): the Makefile then builds no TinyGo guest, and the tests of TinyGo
// guests skip, saying so.

package testenv

import (
	"os"
	"os/exec"
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
