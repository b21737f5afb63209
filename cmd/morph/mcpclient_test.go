package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/morphhost/morph/internal/testenv"
)

// morph run's agent uses an MCP server's tools: the scripted model calls
// server-filesystem's read_text_file ([[mcp_servers]], stdio) inside the
// server's root and outside it; the first observation is the file, the
// second the server's isError text, and the run ends normally. (The step
// lines show a tool's error, not its output: that the output is the file's
// text is TestClientServerFilesystem's, in package mcp.)
func TestRunUsesMCPServer(t *testing.T) {
	root, servers := fsServer(t)
	read := func(path string) string {
		return `{"reply":{"type":"tool_call","tool_call":{"thought":"read","tool_name":"fs.read_text_file","tool_params":{"path":` + strconv.Quote(path) + `}}}}`
	}
	cfg := setup(t, []string{read(filepath.Join(root, "a.txt")), read("/etc/passwd"), finalReply}, servers)
	code, stdout, stderr := morph(t, "", "run", "--config", cfg, "read a.txt")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	lines := strings.Split(stderr, "\n")
	step := func(n string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, "step "+n+" ") {
				return l
			}
		}
		return ""
	}
	if l := step("1"); !strings.Contains(l, "tool fs.read_text_file") || strings.Contains(l, "error") {
		t.Errorf("step 1 (inside the root): %q, want a call without error\n%s", l, stderr)
	}
	if l := step("2"); !strings.Contains(l, "tool fs.read_text_file") || !strings.Contains(l, "Access denied - path outside allowed directories") {
		t.Errorf("step 2 (outside the root): %q, want the server's refusal\n%s", l, stderr)
	}
}

// fsServer is a directory holding a.txt ("hello from fs") and the config
// lines of server-filesystem serving it as [[mcp_servers]] "fs".
func fsServer(t *testing.T) (root, config string) {
	t.Helper()
	tools := testenv.MCPTools(t)
	root = t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello from fs"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, "[discovery]\nproject = false\nuser = false\n" +
		"[[mcp_servers]]\nname = \"fs\"\ntools = [\"read_text_file\"]\ncommand = " + strconv.Quote(filepath.Join(tools, "node_modules", ".bin", "node")) +
		"\nargs = [" + strconv.Quote(filepath.Join(tools, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")) + ", " + strconv.Quote(root) + "]\n"
}

// A pipeline's tool node calls an MCP server's tool as it calls a plugin's:
// its output is the file server-filesystem read.
func TestPipelineUsesMCPServer(t *testing.T) {
	root, servers := fsServer(t)
	dir := t.TempDir()
	dot := filepath.Join(dir, "p.dot")
	input := strconv.Quote(`{"path": ` + strconv.Quote(filepath.Join(root, "a.txt")) + `}`)
	src := "digraph p {\n  start [shape=Mdiamond]\n  read [shape=parallelogram, tool=\"fs.read_text_file\", tool_input=" + input + "]\n  done [shape=Msquare]\n  start -> read -> done\n}\n"
	if err := os.WriteFile(dot, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "run")
	code, stdout, stderr := morph(t, "", "pipeline", "run", "--config", setup(t, []string{finalReply}, servers), "--run-dir", runDir, dot)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	out, err := os.ReadFile(filepath.Join(runDir, "artifacts", "read.output"))
	if err != nil || !strings.Contains(string(out), "hello from fs") {
		t.Errorf("the tool node's output: %q, %v; want the file's text", out, err)
	}
}
