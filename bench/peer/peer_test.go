// Package peer benchmarks the peer the pipeline runner is measured
// against (issue 29): 2389-research/tracker v0.5.0's pipeline engine, on
// the chains and in the places morph's pipeline benchmarks use, so that
// benchstat compares rows of the same name. It is a module of its own,
// run by scripts/bench.sh (group peer) and by no test target: tracker is a
// benchmark dependency, not morph's. Its v0.5.0 module has no LICENSE
// file: it is used here, never redistributed.
package peer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tp "github.com/2389-research/tracker/pipeline"
)

// noop is a handler that does nothing, as morph's benchmarks' stages do:
// success and one context update.
type noop struct{ name string }

func (h noop) Name() string { return h.name }

func (h noop) Execute(context.Context, *tp.Node, *tp.PipelineContext) (tp.Outcome, error) {
	return tp.Outcome{Status: tp.OutcomeSuccess, ContextUpdates: map[string]string{"last_stage": "x"}}, nil
}

// chainSource is morph's pipeline/bench_test.go chain, with shape=box
// explicit: tracker maps only the shapes it knows.
func chainSource(n int) string {
	var b strings.Builder
	b.WriteString("digraph chain {\n  goal = \"bench\"\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n")
	prev := "start"
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		fmt.Fprintf(&b, "  %s [shape=box, prompt=\"stage %d of $goal\"]\n  %s -> %s\n", id, i, prev, id)
		prev = id
	}
	fmt.Fprintf(&b, "  %s -> done\n}\n", prev)
	return b.String()
}

// tmpfsDir is a directory on /dev/shm, removed after b; b is skipped
// without one.
func tmpfsDir(b *testing.B) string {
	dir, err := os.MkdirTemp("/dev/shm", "morph-peer")
	if err != nil {
		b.Skip("no tmpfs: ", err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// BenchmarkChain is morph's BenchmarkChain for tracker: a chain of 50,
// 500 and 5,000 no-op stages on tmpfs, each run in a new artifact
// directory, where tracker writes its checkpoint after every node.
func BenchmarkChain(b *testing.B) {
	for _, n := range []int{50, 500, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchChainIn(b, tmpfsDir(b), n) })
	}
}

// BenchmarkRunnerPerNode is morph's BenchmarkRunnerPerNode for tracker:
// the 50-stage chain on disk (the test's temporary directory) and on
// tmpfs.
func BenchmarkRunnerPerNode(b *testing.B) {
	b.Run("disk", func(b *testing.B) { benchChainIn(b, b.TempDir(), 50) })
	b.Run("tmpfs", func(b *testing.B) { benchChainIn(b, tmpfsDir(b), 50) })
}

func benchChainIn(b *testing.B, dir string, n int) {
	reg := tp.NewHandlerRegistry()
	for _, name := range []string{"start", "exit", "codergen"} {
		reg.Register(noop{name})
	}
	g, err := tp.ParseDOT(chainSource(n))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e := tp.NewEngine(g, reg, tp.WithArtifactDir(filepath.Join(dir, fmt.Sprint(i))))
		res, err := e.Run(context.Background())
		if err != nil || res.Status != tp.OutcomeSuccess {
			b.Fatal(err, res)
		}
		if i == 0 && len(res.CompletedNodes) != n+2 {
			b.Fatalf("tracker completed %d nodes, want %d", len(res.CompletedNodes), n+2)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(n+2)), "ns/node")
}
