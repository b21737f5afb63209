// What tests need from the machine has one policy: a tool or a built file
// that is missing fails the test, naming the make target that provides it,
// so that a green run never hides a guest left untested. `make test` builds
// and installs everything first. The one switch is MORPH_SKIP_TINYGO=1, for
// machines that cannot afford to build TinyGo (about a minute and a half,
// once): the Makefile then builds no TinyGo guest, and the tests of TinyGo
// guests skip, saying so.
//
// A fresh clone's plain go test therefore fails every test of a guest with
// one line each, "guests/testdata/echo.wasm is not built: run `make
// fixtures` in the repository root" (Built), rather than skipping them:
// skipping would make a go test before `make guests` pass while testing no
// guest, and CI (CI=true) must never pass that way.
//
// The exceptions are programs that are not builds of ours, mock-llm
// (MockLLM, from npm), the MCP ecosystem's tools (MCPTools, from npm), the
// OCI tools (OCITools: crane, oras and cosign, from the Go module proxy)
// and the Temporal CLI (the temporal module's tests): `make test` installs
// them and names them in variables (MockLLMEnv, MCPToolsEnv, OCIToolsEnv,
// MORPH_TEMPORAL), and then, as under CI=true (CI), a missing one fails; a
// plain go test on a machine without them skips their tests, naming the
// make target.

package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
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

// Built is path, a file the build makes, or fails t in one line naming the
// file from the repository's root and the make target that builds it.
func Built(t testing.TB, path, target string) string {
	t.Helper()
	_, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t.Fatalf("%s is not built: run `make %s` in the repository root", fromRoot(path), target)
	case err != nil:
		t.Fatalf("%v: run `make %s` in the repository root", err, target)
	}
	return path
}

// rootModule is the go.mod line of the repository's root module.
const rootModule = "module github.com/morphhost/morph\n"

// fromRoot is path relative to the repository's root, the directory above
// it whose go.mod is the root module's, as the Makefile names the file;
// path itself when it is not under the root.
func fromRoot(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	root, ok := rootAbove(filepath.Dir(abs))
	if !ok {
		return path
	}
	if rel, err := filepath.Rel(root, abs); err == nil {
		return filepath.ToSlash(rel)
	}
	return path
}

// rootAbove is the repository's root: dir or the nearest directory above
// it whose go.mod is the root module's.
func rootAbove(dir string) (string, bool) {
	for ; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte(rootModule)) {
			return dir, true
		}
		if filepath.Dir(dir) == dir {
			return "", false
		}
	}
}

// CI reports whether the tests run under CI: CI set to a true value
// (CI=true, as CI services set it). There a missing tool that a plain go
// test would skip for fails instead.
func CI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
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
	if fromMake || CI() {
		t.Fatal(msg)
	}
	t.Skip(msg + " (under make test or CI=true this fails)")
	return ""
}

// MCPToolsEnv is the variable `make test` sets to the directory
// scripts/mcp-tools.sh installed the MCP ecosystem's test tools into (Node
// 22, the TypeScript SDK, the conformance suite, the reference servers).
const MCPToolsEnv = "MORPH_MCP_TOOLS"

// MCPTools is that directory: MCPToolsEnv's value, else what
// `scripts/mcp-tools.sh --print-path` prints (run from the repository's
// root). When it is not installed it fails t under `make test`
// (MCPToolsEnv set) or CI=true, and skips t otherwise, naming the make
// target either way.
func MCPTools(t testing.TB) string {
	t.Helper()
	return toolDir(t, MCPToolsEnv, "mcp-tools.sh", "tools-mcp", "MCP test tools", filepath.Join("node_modules", ".bin", "node"))
}

// OCIToolsEnv is the variable `make test` sets to the directory
// scripts/oci-tools.sh installed the OCI tools into: bin/crane (whose
// `crane registry serve` is the tests' registry), bin/oras and bin/cosign,
// at the versions the script pins.
const OCIToolsEnv = "MORPH_OCI_TOOLS"

// OCITools is that directory: OCIToolsEnv's value, else what
// `scripts/oci-tools.sh --print-path` prints (run from the repository's
// root). When a tool is missing it fails t under `make test` (OCIToolsEnv
// set) or CI=true, and skips t otherwise, naming the make target either
// way.
func OCITools(t testing.TB) string {
	t.Helper()
	return toolDir(t, OCIToolsEnv, "oci-tools.sh", "tools-oci", "OCI test tools (crane, oras, cosign)",
		filepath.Join("bin", "crane"), filepath.Join("bin", "oras"), filepath.Join("bin", "cosign"))
}

// toolDir is the directory scripts/SCRIPT installed tools into: env's
// value (set by `make test`), else what `scripts/SCRIPT --print-path`
// prints. When one of files (relative to it) is missing it fails t under
// `make test` or CI=true, and skips t otherwise, naming the make target
// either way.
func toolDir(t testing.TB, env, script, target, what string, files ...string) string {
	t.Helper()
	dir := os.Getenv(env)
	fromMake := dir != ""
	if !fromMake {
		dir = scriptPath(script)
	}
	problem := "not installed"
	if dir != "" {
		problem = ""
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				problem = err.Error()
				break
			}
		}
		if problem == "" {
			return dir
		}
	}
	msg := fmt.Sprintf("%s: %s: `make %s` (scripts/%s) installs them", what, problem, target, script)
	if fromMake || CI() {
		t.Fatal(msg)
	}
	t.Skip(msg + " (under make test or CI=true this fails)")
	return ""
}

// scriptPath is what `scripts/SCRIPT --print-path` prints, run from the
// repository's root: where the script installed its tools; "" when they
// are not installed or there is no repository around the working directory.
func scriptPath(script string) string {
	wd, _ := os.Getwd()
	root, ok := rootAbove(wd)
	if !ok {
		return ""
	}
	// The script looks in the user's cache, not the temporary one Main set.
	cmd := exec.Command(filepath.Join(root, "scripts", script), "--print-path")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cacheHome())
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(out))
}

// DotCorpusEnv is the variable `make test` sets to the published
// pipelines' directories, colon-separated: the Go modules
// scripts/dot-corpus.sh pins, in the module cache.
const DotCorpusEnv = "MORPH_DOT_CORPUS"

// DotCorpus is those directories: DotCorpusEnv's value, else what
// `scripts/dot-corpus.sh --print-path` prints (run from the repository's
// root; it needs no network). When one is missing it fails t under `make
// test` (DotCorpusEnv set) or CI=true, and skips t otherwise, naming the
// make target either way.
func DotCorpus(t testing.TB) []string {
	t.Helper()
	list := os.Getenv(DotCorpusEnv)
	fromMake := list != ""
	if !fromMake {
		list = scriptPath("dot-corpus.sh")
	}
	problem := "not downloaded"
	var dirs []string
	if list != "" {
		problem = ""
		dirs = filepath.SplitList(list)
		for _, d := range dirs {
			if _, err := os.Stat(d); err != nil {
				problem = err.Error()
				break
			}
		}
	}
	if problem == "" {
		return dirs
	}
	msg := fmt.Sprintf("the published pipelines: %s: `make dot-corpus` (scripts/dot-corpus.sh) downloads them", problem)
	if fromMake || CI() {
		t.Fatal(msg)
	}
	t.Skip(msg + " (under make test or CI=true this fails)")
	return nil
}
