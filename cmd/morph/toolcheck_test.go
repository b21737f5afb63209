package main

import (
	"strings"
	"testing"
)

// TestOneToolValidation: the three commands that check a plugin (check,
// test, run) refuse the same tools, in the same words: engine.CheckToolSpec.
// Before it, check and test passed a tool named "char count" and a schema
// with "type": "bool", which run refused.
func TestOneToolValidation(t *testing.T) {
	wasm := fixture(t, "badtools")
	want := []string{
		`invalid tool: tool name "char count": want 1 to 128 letters, digits, '_', '-' or '.'`,
		`invalid tool parameter schema of tool "count": it breaks the rules of JSON Schema: at /properties/n/type`,
	}
	cfg := setup(t, []string{finalReply}, "\n[wasm]\ncache_dir = \"off\"\n\n[[plugins]]\nname = \"badtools\"\npath = \""+wasm+"\"\n")
	for _, args := range [][]string{
		{"plugin", "check", "--cache-dir", "off", wasm},
		{"plugin", "test", "--cache-dir", "off", "--config", cfg, wasm},
		{"plugin", "test", "--cache-dir", "off", wasm},
		{"run", "--config", cfg, "task"},
	} {
		code, stdout, stderr := morph(t, "", args...)
		if code == 0 {
			t.Errorf("morph %s: exit 0, want a refusal\n%s%s", strings.Join(args, " "), stdout, stderr)
		}
		for _, w := range want {
			if !strings.Contains(stdout+stderr, w) {
				t.Errorf("morph %s: exit %d, output lacks %q:\n%s%s", strings.Join(args, " "), code, w, stdout, stderr)
			}
		}
	}
}
