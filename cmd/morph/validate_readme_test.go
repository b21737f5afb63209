package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// validateLine is a `morph pipeline validate ...` command as the READMEs
// show it, bin/ prefix optional, up to a comment.
var validateLine = regexp.MustCompile(`(?m)^(?:bin/)?morph (pipeline validate [^#\n]*)`)

// Every `morph pipeline validate` line of the READMEs, run as written from
// the repository root (a path argument is the root's), exits 0: without
// --config only the graph is checked, as the command's help says, so
// wasm-verify.dot validates though no config installs its verify plugin.
func TestPipelineValidateREADMELines(t *testing.T) {
	repo := filepath.Join("..", "..")
	var lines []string
	for _, doc := range []string{"README.md", "examples/pipelines/README.md"} {
		b, err := os.ReadFile(filepath.Join(repo, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range validateLine.FindAllStringSubmatch(string(b), -1) {
			lines = append(lines, strings.TrimSpace(m[1]))
		}
	}
	if len(lines) == 0 {
		t.Fatal("no `morph pipeline validate` line in the READMEs")
	}
	// The line: the README names the example.
	lines = append(lines, "pipeline validate examples/pipelines/wasm-verify.dot")
	for _, line := range lines {
		args := strings.Fields(line)
		for i, a := range args[2:] { // after "pipeline validate"
			if _, err := os.Stat(filepath.Join(repo, a)); err == nil && !strings.HasPrefix(a, "-") {
				args[2+i] = filepath.Join(repo, a)
			}
		}
		code, stdout, stderr := morph(t, "", args...)
		if code != 0 {
			t.Errorf("morph %s: exit %d\n%s%s", line, code, stdout, stderr)
		}
		if !strings.Contains(stderr, "graph only: pass --config") {
			t.Errorf("morph %s: the summary does not say what was not checked: %s", line, stderr)
		}
	}
}

// With --config, the config's plugins are checked: one that lacks the
// stage handler's plugin refuses wasm-verify.dot (exit 2), and the fix
// names the flag.
func TestPipelineValidateConfigChecksPlugins(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "")
	code, stdout, stderr := morph(t, "", "pipeline", "validate", "--config", cfg, examples+"wasm-verify.dot")
	if code != exitUsage {
		t.Errorf("exit %d, want %d: %s", code, exitUsage, stderr)
	}
	for _, want := range []string{"error handler_plugin", `"verify", which is not installed`, "the config given with --config"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stderr, "graph only") {
		t.Errorf("with --config the summary says graph only: %s", stderr)
	}
}
