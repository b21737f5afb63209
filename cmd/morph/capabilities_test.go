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
	if code != 0 || !strings.Contains(stdout, "capabilities: http (requested; --config compares them with the plugin's grants)") || stderr != "" {
		t.Fatalf("inspect without config: exit %d\n%s%s", code, stdout, stderr)
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
	if code != 0 || !strings.Contains(stdout, want) || !strings.Contains(stdout, "problem:") || !strings.Contains(stdout, "capability not granted") {
		t.Fatalf("inspect under ungranted = error: exit %d\n%s", code, stdout)
	}
	code, _, stderr = morph(t, "", "plugin", "status", "--config", strict)
	if code != 2 || !strings.Contains(stderr, `plugin "cap": capability not granted`) || !strings.Contains(stderr, "allowed_hosts") {
		t.Fatalf("status under ungranted = error: exit %d\n%s", code, stderr)
	}

	other := filepath.Join(t.TempDir(), "other.wasm")
	b, _ := os.ReadFile(fixture(t, "minimal"))
	os.WriteFile(other, b, 0o644)
	code, _, stderr = morph(t, "", "plugin", "inspect", "--cache-dir", cache, "--config", cfg, other)
	if code != 2 || !strings.Contains(stderr, "no [[plugins]] entry has the path") || !strings.Contains(stderr, "cap (") {
		t.Fatalf("inspect --config of a module the config does not name: exit %d\n%s", code, stderr)
	}
}
