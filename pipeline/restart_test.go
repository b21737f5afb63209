package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// restartGraph loops back from check to count through a loop_restart
// edge; count may run once per loop, setup runs only in the first.
func restartGraph(graphAttrs string) string {
	return `digraph p { ` + graphAttrs + ` start [shape=Mdiamond]; setup; count [max_node_visits=1]; check; done [shape=Msquare];
		start -> setup -> count -> check; check -> count [condition="outcome=fail", loop_restart=true]; check -> done [condition="outcome=success"] }`
}

// Attractor 2.7: a loop_restart edge starts a fresh loop at its target:
// visits reset (count, max_node_visits=1, runs in both loops), the
// context back to the run's start (setup's key gone), stage files under
// restart-1/.
func TestLoopRestartStartsFreshLoop(t *testing.T) {
	r, h, _ := scriptedRunner(map[string][]StageStatus{"check": {StatusFail, StatusSuccess}})
	h.files = true // stage directories, with status.json, to find under restart-1/
	var restarts []Event
	r.OnEvent = func(ev Event) {
		if ev.Kind == EventLoopRestarted {
			restarts = append(restarts, ev)
		}
	}
	dir := t.TempDir()
	res, err := r.Run(context.Background(), mustParse(t, restartGraph("")), RunConfig{RunDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != RunSuccess {
		t.Fatalf("%s: %s", res.State, res.FailureReason)
	}
	if h.calls["count"] != 2 || h.calls["setup"] != 1 {
		t.Errorf("calls %v: want count twice, setup once", h.calls)
	}
	if _, ok := res.Context["seen.setup"]; ok {
		t.Error("the first loop's context key seen.setup is in the second loop's context")
	}
	if res.Context[KeyGoal] == nil || res.Context["seen.count"] != true {
		t.Errorf("context %v: want the goal and the second loop's keys", res.Context)
	}
	for _, f := range []string{"count/status.json", "restart-1/count/status.json", "restart-1/check/status.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("stage file: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "restart-1", "setup")); err == nil {
		t.Error("setup, which did not run in the second loop, has a stage directory in restart-1/")
	}
	if want := []string{"start", "setup", "count", "check", "count", "check", "done"}; !slices.Equal(res.Path, want) {
		t.Errorf("path %v, want %v", res.Path, want)
	}
	if len(restarts) != 1 || restarts[0].NodeID != "count" || restarts[0].Attempt != 1 {
		t.Errorf("restart events %+v: want one, at count", restarts)
	}
	cp, err := LoadCheckpoint(dir)
	if err != nil || cp.Restarts != 1 {
		t.Errorf("checkpoint restarts %v %v", cp, err)
	}
}

// max_restarts (Limits.MaxRestarts when set, which wins over the graph's,
// else the graph's) bounds the loops: the third restart fails the run,
// naming the key.
func TestLoopRestartBounded(t *testing.T) {
	for _, tc := range []struct {
		name, graph string
		lim         int
	}{{"graph", "max_restarts=2;", 0}, {"limit", "", 2}, {"limit wins", "max_restarts=9;", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			r, h, _ := scriptedRunner(map[string][]StageStatus{"check": {StatusFail}})
			r.Limits.MaxRestarts = tc.lim
			res := runGraph(t, r, restartGraph(tc.graph))
			if res.State != RunFail || !strings.Contains(res.FailureReason, "max_restarts") || !strings.Contains(res.FailureReason, "restarted 2 times") {
				t.Fatalf("%s: %s", res.State, res.FailureReason)
			}
			if h.calls["count"] != 3 {
				t.Errorf("count ran %d times, want 3 (three loops)", h.calls["count"])
			}
		})
	}
}

// A process killed after the restart record and before the next node
// ends resumes exactly: in the second loop, with its reset state and its
// stage directory.
func TestLoopRestartResumesExactly(t *testing.T) {
	src := restartGraph("")
	r, h, _ := scriptedRunner(map[string][]StageStatus{"check": {StatusFail, StatusSuccess}})
	dir := t.TempDir()
	run, crashed := filepath.Join(dir, "run"), filepath.Join(dir, "crashed")
	h.hook = func(node string) {
		if node == "count" && h.calls["count"] == 2 { // the disk as a kill here leaves it
			copyDir(t, run, crashed)
		}
	}
	if res, err := r.Run(context.Background(), mustParse(t, src), RunConfig{RunDir: run, Source: []byte(src)}); err != nil || res.State != RunSuccess {
		t.Fatalf("%v %+v", err, res)
	}
	journal, err := os.ReadFile(filepath.Join(crashed, JournalFile))
	if err != nil || !strings.Contains(string(journal), `"restart":1`) {
		t.Fatalf("the journal at the kill holds no restart record: %v %s", err, journal)
	}
	h.hook = nil
	r2, h2, _ := scriptedRunner(map[string][]StageStatus{"check": {StatusSuccess}})
	h2.files = true
	res, err := r2.Resume(context.Background(), mustParse(t, src), RunConfig{RunDir: crashed, Source: []byte(src)})
	if err != nil || res.State != RunSuccess {
		t.Fatalf("resume: %v %+v", err, res)
	}
	if h2.calls["count"] != 1 || h2.calls["setup"] != 0 {
		t.Errorf("resume calls %v: want count once (max_node_visits=1 holds in the fresh loop)", h2.calls)
	}
	if _, ok := res.Context["seen.setup"]; ok {
		t.Error("the resumed second loop has the first loop's context")
	}
	if _, err := os.Stat(filepath.Join(crashed, "restart-1", "check", "status.json")); err != nil {
		t.Errorf("the resumed loop's stage files: %v", err)
	}
	if want := []string{"start", "setup", "count", "check", "count", "check", "done"}; !slices.Equal(res.Path, want) {
		t.Errorf("path %v, want %v", res.Path, want)
	}
}

// A process killed while check runs, before its record and so before the
// restart's, resumes with check running again: one restart, not two.
func TestLoopRestartKilledBeforeRestartRecord(t *testing.T) {
	src := restartGraph("")
	r, h, _ := scriptedRunner(map[string][]StageStatus{"check": {StatusFail, StatusSuccess}})
	dir := t.TempDir()
	run, crashed := filepath.Join(dir, "run"), filepath.Join(dir, "crashed")
	h.hook = func(node string) {
		if node == "check" && h.calls["check"] == 1 { // inside check's first run
			copyDir(t, run, crashed)
		}
	}
	if res, err := r.Run(context.Background(), mustParse(t, src), RunConfig{RunDir: run, Source: []byte(src)}); err != nil || res.State != RunSuccess {
		t.Fatalf("%v %+v", err, res)
	}
	h.hook = nil
	r2, h2, _ := scriptedRunner(map[string][]StageStatus{"check": {StatusFail, StatusSuccess}})
	res, err := r2.Resume(context.Background(), mustParse(t, src), RunConfig{RunDir: crashed, Source: []byte(src)})
	if err != nil || res.State != RunSuccess {
		t.Fatalf("resume: %v %+v", err, res)
	}
	if h2.calls["check"] != 2 || h2.calls["count"] != 1 || h2.calls["setup"] != 0 {
		t.Errorf("resume calls %v: want check twice (again, then in the fresh loop), count once", h2.calls)
	}
	if want := []string{"start", "setup", "count", "check", "count", "check", "done"}; !slices.Equal(res.Path, want) {
		t.Errorf("path %v, want %v", res.Path, want)
	}
	if cp, err := LoadCheckpoint(crashed); err != nil || cp.Restarts != 1 {
		t.Errorf("restarts after the resume: %v %v; want 1", cp, err)
	}
}

// max_restarts=0 on the graph is refused (it read as the default 5), as
// [pipeline] max_restarts=0 is.
func TestLoopRestartZeroRefused(t *testing.T) {
	for _, d := range Validate(mustParse(t, restartGraph("max_restarts=0;")), ValidateOptions{}) {
		if d.Severity == SeverityError && d.Rule == RuleAttrValue && strings.Contains(d.Message, "max_restarts=0 must be 1 or more") {
			return
		}
	}
	t.Errorf("no error for max_restarts=0 in %v", Validate(mustParse(t, restartGraph("max_restarts=0;")), ValidateOptions{}))
}
