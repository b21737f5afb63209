package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// inspect, check, test and status say which loader runs a module: ABI v1
// on wazero, or Extism's go-sdk for a module that imports extism:host/env,
// which is an Extism plugin, not "ABI v1" (its ABI version is the host's).
func TestPluginLoaderShown(t *testing.T) {
	code, stdout, stderr := morph(t, "", "plugin", "inspect", "--cache-dir", "off", fixture(t, "extism_echo"))
	if code != 0 {
		t.Fatalf("inspect: exit %d, want 0:\n%s%s", code, stdout, stderr)
	}
	assertHas(t, "inspect", stdout, "loader:   extism\n", "plugin:   extism_echo 1, Extism plugin\n")
	assertNoABI := func(what, out string) {
		t.Helper()
		if strings.Contains(out, "ABI v") {
			t.Errorf("%s of an Extism module says ABI v:\n%s", what, out)
		}
	}
	assertNoABI("inspect", stdout)
	code, stdout, _ = morph(t, "", "plugin", "inspect", "--json", "--cache-dir", "off", fixture(t, "minimal"))
	var rep struct{ Loader string }
	if code != 0 {
		t.Fatalf("inspect --json: exit %d, want 0: %s", code, stdout)
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, stdout)
	}
	if rep.Loader != "morph-abi-v1" {
		t.Errorf("inspect --json: loader %q, want morph-abi-v1", rep.Loader)
	}
	code, stdout, _ = morph(t, "", "plugin", "check", "--cache-dir", "off", fixture(t, "extism_echo"))
	if code != 0 || !strings.HasPrefix(stdout, "ok: extism_echo 1, Extism plugin, hooks [") || !strings.HasSuffix(stdout, ", loader extism\n") {
		t.Fatalf("check exit %d: %s", code, stdout)
	}
	// The fixture's hooks fail on purpose (exit 1); the header is the point.
	if code, stdout, _ = morph(t, "", "plugin", "test", "--cache-dir", "off", fixture(t, "extism_echo")); code != exitRunFailed {
		t.Errorf("test: exit %d, want %d", code, exitRunFailed)
	}
	assertHas(t, "test", stdout, "plugin extism_echo 1 (")
	assertHas(t, "test", stdout, "), Extism plugin: loaded in ")
	assertNoABI("test", stdout)
	cfg := setup(t, []string{finalReply}, "\n[wasm]\ncache_dir = \"off\"\n[discovery]\nproject = false\nuser = false\n\n"+
		"[[plugins]]\nname = \"min\"\npath = \""+fixture(t, "minimal")+"\"\n\n"+
		"[[plugins]]\nname = \"echo\"\npath = \""+fixture(t, "extism_echo")+"\"\nhooks = [\"build_params\"]\n")
	code, stdout, stderr = morph(t, "", "plugin", "status", "--config", cfg)
	if code != 0 {
		t.Fatalf("status: exit %d, want 0:\n%s%s", code, stdout, stderr)
	}
	assertHas(t, "status", stdout, "ABI v1, loader morph-abi-v1): active", "Extism plugin, loader extism): active")
}
