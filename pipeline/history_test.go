package pipeline

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
)

// historyLoop loops on work by two edges, one per status, then leaves by
// a third: edge 0 for fail, 1 for partial_success, 2 for success.
const historyLoop = `digraph p {
  start [shape=Mdiamond]
  work [max_node_visits=40]
  done [shape=Msquare]
  start -> work
  work -> work [condition="outcome=fail"]
  work -> work [condition="outcome=partial_success"]
  work -> done [condition="outcome=success"]
}`

// historyRunner's work stage ends partial_success on odd visits and fail
// on even ones, until its visit 23 succeeds; visits is how often it ran
// before (a resume's).
func historyRunner(visits int) *Runner {
	reg := DefaultHandlerRegistry()
	reg.Register(NewHandler(TypeCodergen, func(context.Context, *Node, *Context, *ArtifactStore) (*Outcome, error) {
		visits++
		switch {
		case visits == 23:
			return &Outcome{Status: StatusSuccess}, nil
		case visits%2 == 1:
			return &Outcome{Status: StatusPartialSuccess}, nil
		}
		return &Outcome{Status: StatusFail, FailureReason: "even"}, nil
	}))
	return &Runner{Handlers: reg}
}

// wantHistory is work's history after v visits: the last HistoryMax
// statuses, oldest first.
func wantHistory(v int) []StageStatus {
	var all []StageStatus
	for i := 1; i <= v; i++ {
		switch {
		case i == 23:
			all = append(all, StatusSuccess)
		case i%2 == 1:
			all = append(all, StatusPartialSuccess)
		default:
			all = append(all, StatusFail)
		}
	}
	return all[max(0, len(all)-HistoryMax):]
}

// TestNodeHistoryAndEdgesTaken: a node's result keeps the statuses of its
// last 20 visits and counts the rest, and counts the departures by each
// outgoing edge; the journal carries both, so a run folded from a crash
// and resumed ends with the same as one never interrupted.
func TestNodeHistoryAndEdgesTaken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	crash := filepath.Join(t.TempDir(), "crash")
	r := historyRunner(0)
	saved := 0
	r.OnEvent = func(ev Event) {
		if ev.Kind == EventCheckpointSaved && ev.NodeID == "work" {
			if saved++; saved == 21 { // work's 21st record
				copyDir(t, dir, crash)
			}
		}
	}
	res, err := r.Run(context.Background(), mustParse(t, historyLoop), RunConfig{RunDir: dir, Source: []byte(historyLoop)})
	if err != nil || res.State != RunSuccess {
		t.Fatal(err, res)
	}
	nr := res.Nodes["work"]
	if nr.Visits != 23 || !reflect.DeepEqual(nr.History, wantHistory(23)) || nr.HistoryDropped != 3 {
		t.Fatalf("work: %d visits, history %v, %d dropped", nr.Visits, nr.History, nr.HistoryDropped)
	}
	if want := map[int]int{0: 11, 1: 11, 2: 1}; !reflect.DeepEqual(nr.EdgesTaken, want) {
		t.Fatalf("work's edges taken %v, want %v", nr.EdgesTaken, want)
	}
	if s := res.Nodes["start"]; !reflect.DeepEqual(s.History, []StageStatus{StatusSuccess}) || !reflect.DeepEqual(s.EdgesTaken, map[int]int{0: 1}) {
		t.Fatalf("start: history %v, edges %v", s.History, s.EdgesTaken)
	}
	if d := res.Nodes["done"]; len(d.History) != 1 || d.EdgesTaken != nil {
		t.Fatalf("done: history %v, edges %v", d.History, d.EdgesTaken)
	}
	end, err := LoadCheckpoint(dir)
	if err != nil || !reflect.DeepEqual(end.Nodes["work"], nr) {
		t.Fatalf("checkpoint's work %+v, the run's %+v (%v)", end.Nodes["work"], nr, err)
	}

	// The crash copy's journal holds the records since the run started.
	cp, err := LoadCheckpoint(crash)
	if err != nil {
		t.Fatal(err)
	}
	if cp.JournalSeq < 20 {
		t.Fatalf("the crash copy was compacted (journal seq %d): the fold is not tested", cp.JournalSeq)
	}
	folded := cp.Nodes["work"]
	if !reflect.DeepEqual(folded.History, wantHistory(21)) || folded.HistoryDropped != 1 || !reflect.DeepEqual(folded.EdgesTaken, map[int]int{0: 10, 1: 11}) {
		t.Fatalf("folded work: history %v, %d dropped, edges %v", folded.History, folded.HistoryDropped, folded.EdgesTaken)
	}
	res2, err := historyRunner(21).Resume(context.Background(), mustParse(t, historyLoop), RunConfig{RunDir: crash, Source: []byte(historyLoop)})
	if err != nil || res2.State != RunSuccess {
		t.Fatal(err, res2)
	}
	got, want := *res2.Nodes["work"], *nr
	got.Duration, want.Duration = 0, 0 // wall time
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("resumed work %+v, uninterrupted %+v", got, want)
	}
}
