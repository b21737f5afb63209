package pipeline

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stageFilesGraph has stages that do work (an agent, a shell command that
// succeeds, one that fails) and ones that do none (start, exit, a
// pass-through diamond).
const stageFilesGraph = `digraph p {
  start [shape=Mdiamond]
  work [prompt="do it"]
  sh [shape=parallelogram, tool_command="echo out"]
  route [shape=diamond]
  bad [shape=parallelogram, tool_command="echo no; exit 4"]
  done [shape=Msquare]
  start -> work -> sh -> route -> bad
  bad -> done [condition="outcome=fail"]
}`

// TestStatusFileWhereTheStageWorked: status.json is written beside the
// files a stage wrote, and only there: stages that did no work have their
// outcome in the journal and checkpoint alone.
func TestStatusFileWhereTheStageWorked(t *testing.T) {
	b := &fakeBackend{outputs: map[string][]string{"work": {"done OUTCOME:SUCCESS"}}}
	res := runGraph(t, &Runner{Backend: b, AllowShell: true}, stageFilesGraph)
	if res.State != RunSuccess {
		t.Fatalf("state %s: %s", res.State, res.FailureReason)
	}
	for node, files := range map[string][]string{
		"work": {"prompt.md", "response.md", "status.json"},
		"sh":   {toolCommandFile, toolOutputFile, "status.json"},
		"bad":  {toolCommandFile, "status.json"},
	} {
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(res.RunDir, node, f)); err != nil {
				t.Errorf("%s: %v", node, err)
			}
		}
	}
	var status statusFile
	if b, err := os.ReadFile(filepath.Join(res.RunDir, "bad", "status.json")); err != nil || json.Unmarshal(b, &status) != nil || status.Outcome != StatusFail {
		t.Errorf("bad's status.json: %s %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(res.RunDir, "sh", toolOutputFile)); string(b) != "out\n" {
		t.Errorf("sh's output: %q", b)
	}
	for _, node := range []string{"start", "route", "done"} {
		if _, err := os.Stat(filepath.Join(res.RunDir, node)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s did no work and has a stage directory: %v", node, err)
		}
		if res.Nodes[node] == nil || res.Nodes[node].Status != StatusSuccess {
			t.Errorf("%s: result %+v", node, res.Nodes[node])
		}
	}
}

// TestWriteStageFileRefusesPaths: a stage file's name is a plain file
// name; anything that would leave the stage directory is refused, and
// nothing is written or marked.
func TestWriteStageFileRefusesPaths(t *testing.T) {
	dir := t.TempDir()
	x := &Execution{RunDir: dir, node: "n"}
	for _, name := range []string{"", ".", "..", "../escape", "a/b", `a\b`, "/abs"} {
		if err := x.WriteStageFile(name, []byte("x")); err == nil || !strings.Contains(err.Error(), "not a plain file name") {
			t.Errorf("name %q: %v", name, err)
		}
	}
	if x.wrote.Load() {
		t.Error("a refused name marked the stage as one that wrote a file")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the run directory holds %v", entries)
	}
	if err := x.WriteStageFile("ok.txt", []byte("x")); err != nil || !x.wrote.Load() {
		t.Fatalf("a plain name: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "n", "ok.txt")); err != nil || string(b) != "x" {
		t.Errorf("ok.txt: %q %v", b, err)
	}
	// A nil Execution (a handler run outside a run) writes nothing.
	var none *Execution
	if err := none.WriteStageFile("ok.txt", nil); err != nil {
		t.Errorf("nil Execution: %v", err)
	}
}
