package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A manager stage's work is its child's runs, in cycle-N/ under its stage
// directory: it gets a status.json there like every stage that did work,
// and a manager.md naming the child's runs.
func TestManagerStageHasStatusFile(t *testing.T) {
	r, _, clk := scriptedRunner(nil)
	r.Clock = childEndClock{clk}
	child := `digraph child { start [shape=Mdiamond]; work; done [shape=Msquare]; start -> work -> done }`
	parent := `digraph p { start [shape=Mdiamond]; boss [shape=house, stack.child_dotfile="child.dot"]; done [shape=Msquare]; start -> boss -> done }`
	res, run := managerRun(t, r, t.TempDir(), parent, child, "G", nil, func() bool { return false })
	if res.State != RunSuccess {
		t.Fatalf("%s: %s", res.State, res.FailureReason)
	}
	var status statusFile
	b, err := os.ReadFile(filepath.Join(run, "boss", "status.json"))
	if err != nil || json.Unmarshal(b, &status) != nil || status.Outcome != StatusSuccess {
		t.Fatalf("boss's status.json %s: %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(run, "boss", "manager.md")); err != nil || !strings.Contains(string(b), "cycle-1") {
		t.Errorf("boss's manager.md %q: %v", b, err)
	}
}
