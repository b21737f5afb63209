package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// journalChain is a chain whose stages set a key each, delete a scratch
// key and report how often they ran: a resume that replays or loses a
// record shows in the context.
func journalChain(t *testing.T, n int) (*Runner, string, map[string]int) {
	t.Helper()
	runs := map[string]int{}
	reg := DefaultHandlerRegistry()
	reg.Register(NewHandler(TypeCodergen, func(_ context.Context, nd *Node, pctx *Context, _ *ArtifactStore) (*Outcome, error) {
		runs[nd.ID]++
		pctx.Delete("scratch")
		return &Outcome{Status: StatusSuccess, ContextUpdates: map[string]any{"seen." + nd.ID: nd.ID, "scratch": nd.ID, "null." + nd.ID: nil}}, nil
	}))
	return &Runner{Handlers: reg}, chainSource(n), runs
}

// copyDir copies a run directory's regular files (one level of stage
// directories), as a crash would leave them.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if d.Name() == LockFile {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// crashedAt runs the chain to the end and returns a copy of its run
// directory as it was when node's record had just been written: what a
// crash right after it leaves.
func crashedAt(t *testing.T, n int, node string) (crash string, want *Result) {
	t.Helper()
	r, src, _ := journalChain(t, n)
	dir := filepath.Join(t.TempDir(), "run")
	crash = filepath.Join(t.TempDir(), "crash")
	r.OnEvent = func(ev Event) {
		if ev.Kind == EventCheckpointSaved && ev.NodeID == node {
			copyDir(t, dir, crash)
		}
	}
	want, err := r.Run(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)})
	if err != nil || want.State != RunSuccess {
		t.Fatal(err, want)
	}
	if _, err := os.Stat(filepath.Join(crash, JournalFile)); err != nil {
		t.Fatal("no journal at the crash: ", err)
	}
	return crash, want
}

func resumeChain(t *testing.T, n int, dir string) (*Result, map[string]int, error) {
	t.Helper()
	r, src, runs := journalChain(t, n)
	res, err := r.Resume(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)})
	return res, runs, err
}

func sameRun(t *testing.T, got, want *Result) {
	t.Helper()
	if got.State != want.State || !reflect.DeepEqual(got.Path, want.Path) {
		t.Fatalf("resumed: %s %v; uninterrupted: %s %v", got.State, got.Path, want.State, want.Path)
	}
	if !reflect.DeepEqual(got.Context, want.Context) {
		t.Fatalf("resumed context %v\nuninterrupted %v", got.Context, want.Context)
	}
}

// TestJournalResumeAfterCrash: a crash after a record resumes at the next
// node, with the state the records hold (keys set, set to null, deleted).
func TestJournalResumeAfterCrash(t *testing.T) {
	crash, want := crashedAt(t, 6, "s3")
	cp, err := LoadCheckpoint(crash)
	if err != nil {
		t.Fatal(err)
	}
	if cp.NextNode != "s4" || cp.Completed[len(cp.Completed)-1] != "s3" || cp.JournalSeq != 5 {
		t.Fatalf("folded: next %q, path %v, seq %d", cp.NextNode, cp.Completed, cp.JournalSeq)
	}
	if v, ok := cp.Context["null.s3"]; !ok || v != nil {
		t.Fatalf("a key set to null: %v %v", v, ok)
	}
	if v := cp.Context["scratch"]; v != "s3" {
		t.Fatalf("scratch %v", v)
	}
	got, runs, err := resumeChain(t, 6, crash)
	if err != nil {
		t.Fatal(err)
	}
	sameRun(t, got, want)
	if runs["s3"] != 0 || runs["s4"] != 1 {
		t.Fatalf("runs after resume: %v", runs)
	}
	if b, err := os.ReadFile(filepath.Join(crash, JournalFile)); err != nil || len(b) != 0 {
		t.Fatalf("journal after the run ended: %q %v", b, err)
	}
}

// TestJournalTornTail: a crash in the middle of writing a record, at any
// byte, leaves the state before it; that node runs again.
func TestJournalTornTail(t *testing.T) {
	crash, want := crashedAt(t, 4, "s2")
	journal, err := os.ReadFile(filepath.Join(crash, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(journal, []byte("\n"))
	last := lines[len(lines)-2] // the final element is empty
	start := len(journal) - len(last)
	tails := [][]byte{}
	// Every byte would be ~600 resumes: the edges and a stride between.
	for cut := start; cut < len(journal); cut += max(1, len(last)/16) {
		tails = append(tails, journal[:cut])
	}
	tails = append(tails, journal[:start+1], journal[:len(journal)-2], journal[:len(journal)-1])
	tails = append(tails, append(journal[:start:start], bytes.Repeat([]byte{0}, len(last))...)) // NULs where the write was
	for i, torn := range tails {
		dir := filepath.Join(t.TempDir(), fmt.Sprint(i))
		copyDir(t, crash, dir)
		if err := os.WriteFile(filepath.Join(dir, JournalFile), torn, 0o644); err != nil {
			t.Fatal(err)
		}
		cp, err := LoadCheckpoint(dir)
		if err != nil {
			t.Fatalf("cut at %d: %v", i, err)
		}
		if cp.NextNode != "s2" {
			t.Fatalf("cut at %d: next %q, want s2 (the torn node again)", i, cp.NextNode)
		}
		got, runs, err := resumeChain(t, 4, dir)
		if err != nil {
			t.Fatalf("cut at %d: %v", i, err)
		}
		sameRun(t, got, want)
		if runs["s2"] != 1 {
			t.Fatalf("cut at %d: s2 ran %d times on resume", i, runs["s2"])
		}
	}
}

// TestJournalCorrupt: a damaged record with records after it, or a gap
// in the sequence, is refused with ErrJournalCorrupt naming the line.
func TestJournalCorrupt(t *testing.T) {
	crash, _ := crashedAt(t, 6, "s4")
	journal, err := os.ReadFile(filepath.Join(crash, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(journal), "\n")
	for name, c := range map[string]struct {
		edit func([]string)
		line string
	}{
		"damaged": {func(l []string) { l[1] = "{\"seq\":2,\"no" + "\n" }, "journal.jsonl:2 "},
		"gap":     {func(l []string) { l[2] = strings.Replace(l[2], `"seq":3`, `"seq":9`, 1) }, "journal.jsonl:3 "},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			copyDir(t, crash, dir)
			l := append([]string(nil), lines...)
			c.edit(l)
			if err := os.WriteFile(filepath.Join(dir, JournalFile), []byte(strings.Join(l, "")), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := resumeChain(t, 6, dir)
			if !errors.Is(err, ErrJournalCorrupt) || !strings.Contains(err.Error(), c.line) {
				t.Fatalf("got %v, want ErrJournalCorrupt naming %s", err, c.line)
			}
		})
	}
}

// TestJournalNoDoubleApply: a crash between a compaction's rename and its
// emptying of the journal leaves records the checkpoint holds: they are
// not applied again.
func TestJournalNoDoubleApply(t *testing.T) {
	crash, want := crashedAt(t, 5, "s3")
	cp, err := LoadCheckpoint(crash)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeCheckpoint(crash, cp); err != nil { // the journal stays
		t.Fatal(err)
	}
	again, err := LoadCheckpoint(crash)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Completed, cp.Completed) || !reflect.DeepEqual(again.Log, cp.Log) {
		t.Fatalf("folded twice: %v, want %v", again.Completed, cp.Completed)
	}
	got, _, err := resumeChain(t, 5, crash)
	if err != nil {
		t.Fatal(err)
	}
	sameRun(t, got, want)
}

// TestCheckpointWritesAreConstant: the bytes a run writes for its state
// (journal records, compactions) per node do not grow with the graph.
// Counted from the files after each checkpoint event, not timed.
func TestCheckpointWritesAreConstant(t *testing.T) {
	const big = 2000 // 40x the small chain: enough for O(n) writes a node to show (5,000 took 3 s more under -race)
	perNode := map[int]float64{}
	for _, n := range []int{50, big} {
		r, src, _ := journalChain(t, n)
		r.Limits.MaxSteps = n + 10
		dir := filepath.Join(tmpfsDir(t), "run")
		var written, journalSize int64
		var cpFile os.FileInfo
		compactions := 0
		r.OnEvent = func(ev Event) {
			if ev.Kind != EventCheckpointSaved {
				return
			}
			js, err := os.Stat(filepath.Join(dir, JournalFile))
			if err != nil {
				t.Error(err)
				return
			}
			cs, err := os.Stat(filepath.Join(dir, CheckpointFile))
			if err != nil {
				t.Error(err)
				return
			}
			if cpFile == nil || !os.SameFile(cs, cpFile) { // rewritten (renamed over)
				cpFile = cs
				compactions++
				written += cs.Size()
				journalSize = 0
			}
			written += js.Size() - journalSize
			journalSize = js.Size()
		}
		res, err := r.Run(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)})
		if err != nil || res.State != RunSuccess {
			t.Fatal(err, res)
		}
		perNode[n] = float64(written) / float64(n+2)
		t.Logf("%d nodes: %d bytes of state written (%.0f a node), %d checkpoint rewrites", n, written, perNode[n], compactions)
		if n == big && compactions > 16 {
			t.Errorf("checkpoint.json rewritten %d times for %d nodes: compaction is not amortised", compactions, n)
		}
	}
	if perNode[big] > 3*perNode[50] {
		t.Fatalf("state bytes a node: %.0f at %d nodes, %.0f at 50: writes grow with the graph", perNode[big], big, perNode[50])
	}
}

// tmpfsDir is a temporary directory on tmpfs where there is one: a test
// that counts bytes need not wait for a disk's syncs.
func tmpfsDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "morph-test"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// TestCheckpointV1Resumes: a run directory written with version 1's field
// names (completed, retry_counts, log, saved_at) resumes, and is written
// back with the spec's (5.3).
func TestCheckpointV1Resumes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	copyDir(t, filepath.Join("testdata", "checkpoint-v1"), dir)
	cp, err := LoadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cp.Completed, []string{"start", "a"}) || cp.RetryCounts["a"] != 1 || len(cp.Log) != 2 || cp.SavedAt.IsZero() {
		t.Fatalf("v1 read: %+v", cp)
	}
	src, err := os.ReadFile(filepath.Join(dir, SourceFile))
	if err != nil {
		t.Fatal(err)
	}
	r, _, runs := journalChain(t, 0)
	res, err := r.Resume(context.Background(), mustParse(t, string(src)), RunConfig{RunDir: dir, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != RunSuccess || !reflect.DeepEqual(res.Path, []string{"start", "a", "b", "done"}) || runs["a"] != 0 || runs["b"] != 1 {
		t.Fatalf("resumed v1: %s %v, runs %v", res.State, res.Path, runs)
	}
	if res.Context["seen.a"] != "a" {
		t.Fatalf("v1 context lost: %v", res.Context)
	}
	b, err := os.ReadFile(filepath.Join(dir, CheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"completed_nodes", "node_retries", "logs", "timestamp", "current_node", "context"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("checkpoint.json has no %q: %s", k, b)
		}
	}
	if raw["version"] != float64(checkpointVersion) {
		t.Errorf("version %v", raw["version"])
	}
	// A v1 payload (a Temporal input from before) decodes to the same
	// state as its v2 form.
	var v1, v2 Checkpoint
	old, _ := os.ReadFile(filepath.Join("testdata", "checkpoint-v1", CheckpointFile))
	if err := json.Unmarshal(old, &v1); err != nil {
		t.Fatal(err)
	}
	v1.Version = checkpointVersion
	again, _ := json.Marshal(&v1)
	if err := json.Unmarshal(again, &v2); err != nil || !reflect.DeepEqual(v1, v2) {
		t.Fatalf("v1 %+v\nv2 %+v (%v)", v1, v2, err)
	}
}

// TestMaxStepsScalesWithGraph: a chain longer than DefaultMaxSteps runs
// to the end with default limits, while a loop still stops at the limit
// with a message naming the key to raise.
func TestMaxStepsScalesWithGraph(t *testing.T) {
	r, _, _ := journalChain(t, 0)
	src := chainSource(1100)
	res, err := r.Run(context.Background(), mustParse(t, src), RunConfig{RunDir: filepath.Join(tmpfsDir(t), "run"), Source: []byte(src)})
	if err != nil || res.State != RunSuccess || len(res.Path) != 1102 {
		t.Fatalf("1,100-node chain: %v %+v", err, res)
	}
	loop := `digraph p { start [shape=Mdiamond]; a [max_node_visits=100000]; b [max_node_visits=100000]; done [shape=Msquare]
	  start -> a -> b; b -> a [condition="outcome=success"]; b -> done [condition="outcome=fail"] }`
	res, err = r.Run(context.Background(), mustParse(t, loop), RunConfig{RunDir: filepath.Join(tmpfsDir(t), "run"), Source: []byte(loop)})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != RunFail || len(res.Path) != DefaultMaxSteps || !strings.Contains(res.FailureReason, "[pipeline] max_steps") {
		t.Fatalf("loop: %s after %d stages: %s", res.State, len(res.Path), res.FailureReason)
	}
}
