package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/morphhost/morph/host"
)

// A plugin's title: no trailing space without a version, and an Extism
// module is called one, not "ABI v1"; what the module chose is escaped.
func TestPluginModuleTitle(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		abi           int
		loader, want  string
	}{
		{"count_vowels", "", 1, host.LoaderNative, "count_vowels, ABI v1"},
		{"count", "0.1.0", 1, host.LoaderNative, "count 0.1.0, ABI v1"},
		{"echo", "1", 1, host.LoaderExtism, "echo 1, Extism plugin"},
		{"echo", "", 1, host.LoaderExtism, "echo, Extism plugin"},
		{"ev\x1bil", "1\n2", 2, "", `ev\x1bil 1\n2, ABI v2`},
	} {
		if got := moduleTitle(tc.name, tc.version, tc.abi, tc.loader); got != tc.want {
			t.Errorf("moduleTitle(%q, %q, %d, %q) = %q, want %q", tc.name, tc.version, tc.abi, tc.loader, got, tc.want)
		}
	}
}

// `morph run` where there is no morph.toml says how to name one; a
// missing file named with --config gets the plain error, which names it,
// and so does a morph.toml that is there but names a missing module.
func TestRunConfigNotFoundHint(t *testing.T) {
	dot, err := filepath.Abs(examples + "plan-implement-verify.dot")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	code, _, stderr := morph(t, "", "run", "hi")
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	assertHas(t, "run without a config", stderr, "morph.toml: config file not found", "pass --config FILE")
	code, _, stderr = morph(t, "", "run", "--config", "other.toml", "hi")
	if code != exitUsage || !strings.Contains(stderr, "other.toml: config file not found") || strings.Contains(stderr, "pass --config") {
		t.Errorf("--config other.toml: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{{"plugin", "status"}, {"tools"}, {"pipeline", "run", dot}, {"mcp", "serve"}} {
		if _, _, stderr := morph(t, "", args...); !strings.Contains(stderr, "pass --config FILE") {
			t.Errorf("morph %s: %s", strings.Join(args, " "), stderr)
		}
	}
	toml := "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n\n[[plugins]]\nname = \"x\"\npath = \"x.wasm\"\n"
	if err := os.WriteFile("morph.toml", []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = morph(t, "", "run", "hi")
	if code != exitUsage || !strings.Contains(stderr, "x.wasm not found") || strings.Contains(stderr, "pass --config") {
		t.Errorf("a morph.toml naming a missing file: exit %d: %s", code, stderr)
	}
}

// -v logs the step limit that applies: the engine's default when the
// config sets none, not the zero of the unset key.
func TestRunVerboseMaxSteps(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "")
	code, _, stderr := morph(t, "", "run", "-v", "--config", cfg, "hi")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	assertHas(t, "-v", stderr, "max_steps=15")
	if strings.Contains(stderr, "max_steps=0") {
		t.Errorf("-v logs max_steps=0:\n%s", stderr)
	}
}
