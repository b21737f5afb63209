package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// inspect and status compare the capabilities a plugin requests with its
// grants; inspect without --config shows the requests only.
func TestPluginCapabilities(t *testing.T) {
	wasm := fixture(t, "cap_http") // requests http
	cache := t.TempDir()
	code, stdout, stderr := morph(t, "", "plugin", "inspect", "--cache-dir", cache, wasm)
	if code != 0 {
		t.Fatalf("inspect without config: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	assertHas(t, "inspect without config", stdout, "capabilities: http (requested; --config compares them with the plugin's grants)")
	if stderr != "" {
		t.Errorf("inspect without config: stderr %q, want none", stderr)
	}

	entry := func(policy string) string {
		return "\n[wasm]\ncache_dir = \"" + cache + "\"\n[discovery]\nproject = false\nuser = false\n\n[[plugins]]\nname = \"cap\"\npath = \"" + wasm +
			"\"\nenv = [\"LANG\"]\nungranted = \"" + policy + "\"\n"
	}
	want := "capabilities: http (requested, NOT granted), env (granted: LANG, not requested)"
	cfg := setup(t, []string{finalReply}, entry("warn"))
	code, stdout, stderr = morph(t, "", "plugin", "inspect", "--cache-dir", cache, "--config", cfg, wasm)
	if code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("inspect --config: exit %d\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = morph(t, "", "plugin", "status", "--config", cfg)
	if code != 0 || !strings.Contains(stdout, "  "+want+"\n") {
		t.Fatalf("status: exit %d\n%s%s", code, stdout, stderr)
	}

	strict := setup(t, []string{finalReply}, entry("error"))
	code, stdout, _ = morph(t, "", "plugin", "inspect", "--cache-dir", cache, "--config", strict, wasm)
	if code != 1 {
		t.Fatalf("inspect under ungranted = error: exit %d, want 1\n%s", code, stdout)
	}
	assertHas(t, "inspect under ungranted = error", stdout, want, "problem:", "capability not granted")
	code, _, stderr = morph(t, "", "plugin", "status", "--config", strict)
	if code != 2 {
		t.Fatalf("status under ungranted = error: exit %d, want 2\n%s", code, stderr)
	}
	assertHas(t, "status under ungranted = error", stderr, `plugin "cap": capability not granted`, "allowed_hosts")

	other := filepath.Join(t.TempDir(), "other.wasm")
	b, _ := os.ReadFile(fixture(t, "minimal"))
	os.WriteFile(other, b, 0o644)
	code, _, stderr = morph(t, "", "plugin", "inspect", "--cache-dir", cache, "--config", cfg, other)
	if code != 2 {
		t.Fatalf("inspect --config of a module the config does not name: exit %d, want 2\n%s", code, stderr)
	}
	assertHas(t, "inspect --config of a module the config does not name", stderr, "no [[plugins]] entry has the path", "cap (")
}

// An Extism module that imports extism:host/env http_request requests http
// (an Extism manifest has no capabilities to list): inspect shows it, with
// and without the grants of --config.
func TestPluginInspectExtismHTTP(t *testing.T) {
	wasm := fixture(t, "extism_tools_http")
	cache := t.TempDir()
	code, stdout, stderr := morph(t, "", "plugin", "inspect", "--cache-dir", cache, wasm)
	if code != 0 || !strings.Contains(stdout, "capabilities: http (requested; --config compares them with the plugin's grants)") {
		t.Fatalf("inspect: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = morph(t, "", "plugin", "inspect", "--json", "--cache-dir", cache, wasm)
	if code != 0 || !strings.Contains(stdout, `"requested_capabilities": [`) {
		t.Fatalf("inspect --json: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, c := range []struct{ hosts, want string }{
		{"", "capabilities: http (requested, NOT granted)"},
		{"allowed_hosts = [\"api.example.com\"]\n", "capabilities: http (requested, granted: api.example.com)"},
	} {
		cfg := setup(t, []string{finalReply}, "\n[wasm]\ncache_dir = \""+cache+"\"\n[discovery]\nproject = false\nuser = false\n\n[[plugins]]\nname = \"ext\"\npath = \""+wasm+"\"\n"+c.hosts)
		code, stdout, stderr = morph(t, "", "plugin", "inspect", "--cache-dir", cache, "--config", cfg, wasm)
		if code != 0 || !strings.Contains(stdout, c.want) {
			t.Fatalf("inspect --config (%q): exit %d\n%s%s", c.hosts, code, stdout, stderr)
		}
	}
}

// inspect of a module that does not load prints the report, its problems
// included, and exits 1; the text and the JSON report alike.
func TestPluginInspectFailsOnProblems(t *testing.T) {
	for _, fx := range []string{"nomarker", "wrongversion"} {
		for _, args := range [][]string{{"plugin", "inspect"}, {"plugin", "inspect", "--json"}} {
			code, stdout, stderr := morph(t, "", append(args, "--cache-dir", "off", fixture(t, fx))...)
			what := fx + " " + strings.Join(args, " ")
			if code != 1 {
				t.Errorf("%s: exit %d, want 1\n%s\nstderr: %s", what, code, stdout, stderr)
			}
			assertHas(t, what+": stdout", stdout, "problem")
			assertHas(t, what+": stderr", stderr, "does not load: 1 problem in the report")
		}
	}
	notWasm := filepath.Join(t.TempDir(), "notes.wasm")
	os.WriteFile(notWasm, []byte("not a module"), 0o644)
	if code, stdout, _ := morph(t, "", "plugin", "inspect", "--cache-dir", "off", notWasm); code != 1 || !strings.Contains(stdout, "not a WebAssembly module") {
		t.Errorf("inspect of a file that is not WebAssembly: exit %d\n%s", code, stdout)
	}
}

// inspect of an Extism module of plain exports says which lines would
// serve them, and those lines, pasted into a config, load it: its export
// is then a tool the model calls.
func TestPluginInspectSuggestsLines(t *testing.T) {
	wasm := fixture(t, "extism_nohooks") // exports count_vowels, () -> i32
	code, stdout, _ := morph(t, "", "plugin", "inspect", "--cache-dir", "off", wasm)
	i := strings.Index(stdout, "morph.toml lines that would serve its exports")
	if code != 1 {
		t.Fatalf("inspect: exit %d, want 1\n%s", code, stdout)
	}
	if i < 0 {
		t.Fatalf("inspect suggests no morph.toml lines:\n%s", stdout)
	}
	assertHas(t, "inspect", stdout, "problem:")
	var lines []string
	for _, l := range strings.Split(stdout[i:], "\n")[1:] {
		lines = append(lines, strings.TrimPrefix(l, "  "))
	}
	pasted := strings.Join(lines, "\n")
	if !strings.Contains(pasted, "[[plugins.tools]]\nexport = \"count_vowels\"\n") {
		t.Fatalf("suggested:\n%s", pasted)
	}
	cfg := setup(t, []string{`{"reply":{"type":"tool_call","tool_call":{"tool_name":"count_vowels","tool_params":{"input":"aeiou"}}}}`, finalReply},
		"[discovery]\nproject = false\nuser = false\n"+pasted)
	code, stdout, stderr := morph(t, "", "plugin", "status", "--config", cfg)
	if code != 0 || !strings.Contains(stdout, "count_vowels (plugin:extism_nohooks)") {
		t.Fatalf("status with the suggested lines: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr = morph(t, "", "run", "--config", cfg, "count"); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, stdout, stderr)
	}
}
