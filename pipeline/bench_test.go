package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chainSource is a pipeline of n no-op stages between start and exit.
func chainSource(n int) string {
	var b strings.Builder
	b.WriteString("digraph chain {\n  goal = \"bench\"\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n")
	prev := "start"
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		fmt.Fprintf(&b, "  %s [prompt=\"stage %d of $goal\"]\n  %s -> %s\n", id, i, prev, id)
		prev = id
	}
	fmt.Fprintf(&b, "  %s -> done\n}\n", prev)
	return b.String()
}

// BenchmarkRunnerPerNode is the runner's cost per stage with a handler that
// does nothing: edge selection, context updates, events, and the journal
// record written (fsynced) after every node (no status.json: a no-op
// stage writes no stage file), on disk (fsync) and on tmpfs (/dev/shm, where a sync costs nothing: the
// runner's own overhead). BenchmarkCheckpointSave is the checkpoint alone.
func BenchmarkRunnerPerNode(b *testing.B) { onDiskAndTmpfs(b, benchRunner) }

// onDiskAndTmpfs runs bench in a directory on disk and in one on tmpfs.
func onDiskAndTmpfs(b *testing.B, bench func(b *testing.B, dir string)) {
	b.Run("disk", func(b *testing.B) { bench(b, b.TempDir()) })
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		b.Run("tmpfs", func(b *testing.B) {
			dir, err := os.MkdirTemp("/dev/shm", "morph-bench")
			if err != nil {
				b.Skip(err)
			}
			defer os.RemoveAll(dir)
			bench(b, dir)
		})
	}
}

func benchRunner(b *testing.B, dir string) { benchChainIn(b, dir, 50) }

// BenchmarkChain is the runner's cost per node as the graph grows: a
// chain of 50, 500 and 5,000 no-op stages on tmpfs (the runner's own
// overhead, the per-node fsync costing nothing). Flat ns/node is the
// goal: the state written per node does not grow with the run.
func BenchmarkChain(b *testing.B) {
	for _, n := range []int{50, 500, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchChainIn(b, tmpfsDir(b), n) })
	}
}

// benchChainIn runs chains of n no-op stages in dir.
func benchChainIn(b *testing.B, dir string, n int) {
	src := chainSource(n)
	reg := DefaultHandlerRegistry()
	reg.Register(NewHandler(TypeCodergen, func(context.Context, *Node, *Context, *ArtifactStore) (*Outcome, error) {
		return &Outcome{Status: StatusSuccess, ContextUpdates: map[string]any{KeyLastStage: "x"}}, nil
	}))
	r := &Runner{Handlers: reg, Limits: Limits{MaxSteps: n + 10}} // main's default stops a 5,000 chain
	b.ReportAllocs()
	b.ResetTimer()
	g, err := ParseDOT([]byte(src)) // parsing is not the runner's work; validation, in Run, is
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		res, err := r.Run(context.Background(), g, RunConfig{RunDir: filepath.Join(dir, fmt.Sprint(i)), Source: []byte(src)})
		if err != nil || res.State != RunSuccess {
			b.Fatal(err, res)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(n+2)), "ns/node")
}

// BenchmarkCheckpointSave is one checkpoint write of a run 25 stages in:
// the average of the 50-stage runs above.
func BenchmarkCheckpointSave(b *testing.B) { onDiskAndTmpfs(b, benchCheckpoint) }

func benchCheckpoint(b *testing.B, dir string) {
	cp := &Checkpoint{RunID: "r", Outcomes: map[string]*Outcome{}, RetryCounts: map[string]int{}, Visits: map[string]int{}, Context: map[string]any{}}
	for i := range 25 {
		id := fmt.Sprintf("s%d", i)
		cp.Completed = append(cp.Completed, id)
		cp.Outcomes[id] = &Outcome{Status: StatusSuccess}
		cp.Visits[id] = 1
		cp.Log = append(cp.Log, id+": success")
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := SaveCheckpoint(dir, cp); err != nil {
			b.Fatal(err)
		}
	}
}
