package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// inspect, check and status say which loader runs a module: ABI v1 on
// wazero, or Extism's go-sdk for a module that imports extism:host/env.
func TestPluginLoaderShown(t *testing.T) {
	code, stdout, stderr := morph(t, "", "plugin", "inspect", "--cache-dir", "off", fixture(t, "extism_echo"))
	if code != 0 || !strings.Contains(stdout, "loader:   extism\n") || !strings.Contains(stdout, "plugin:   extism_echo 1, ABI v1") {
		t.Fatalf("inspect exit %d:\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = morph(t, "", "plugin", "inspect", "--json", "--cache-dir", "off", fixture(t, "minimal"))
	var rep struct{ Loader string }
	if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil || rep.Loader != "morph-abi-v1" {
		t.Fatalf("inspect --json exit %d: %s", code, stdout)
	}
	code, stdout, _ = morph(t, "", "plugin", "check", "--cache-dir", "off", fixture(t, "extism_echo"))
	if code != 0 || !strings.HasSuffix(stdout, ", loader extism\n") {
		t.Fatalf("check exit %d: %s", code, stdout)
	}
	cfg := setup(t, []string{finalReply}, "\n[wasm]\ncache_dir = \"off\"\n[discovery]\nproject = false\nuser = false\n\n"+
		"[[plugins]]\nname = \"min\"\npath = \""+fixture(t, "minimal")+"\"\n\n"+
		"[[plugins]]\nname = \"echo\"\npath = \""+fixture(t, "extism_echo")+"\"\nhooks = [\"build_params\"]\n")
	code, stdout, stderr = morph(t, "", "plugin", "status", "--config", cfg)
	if code != 0 || !strings.Contains(stdout, "ABI v1, loader morph-abi-v1): active") || !strings.Contains(stdout, "ABI v1, loader extism): active") {
		t.Fatalf("status exit %d:\n%s%s", code, stdout, stderr)
	}
}
