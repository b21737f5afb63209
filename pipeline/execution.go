package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// Execution is what a running stage may know of its run beyond its node
// and context: the graph, the run's directory, the outcome of the stage
// before it, and the runner (for handlers that run other nodes: parallel,
// fan-in, the manager loop). Handlers get it with ExecutionFrom.
type Execution struct {
	Graph  *Graph
	RunID  string
	RunDir string
	// BaseDir is the directory of the pipeline's file, which relative paths
	// in the graph (stack.child_dotfile) are relative to; "" when unknown.
	BaseDir string
	// Previous is the outcome of the stage that led here (nil at the start).
	Previous *Outcome
	// Edge is the edge taken to this stage (nil at the start and after a
	// jump: a retry target, a fan-in).
	Edge *Edge
	// Branch is the parallel branch this stage runs in ("" outside one).
	Branch  string
	Attempt int // 1 for the stage's first attempt
	Runner  *Runner

	run *run
	// node is the stage's node id; wrote says the stage wrote a file in
	// its directory, which then gets status.json too.
	node  string
	wrote atomic.Bool
}

// WriteStageFile writes content to name in the stage's directory of the
// run directory (<run>/<node>/), for people and tools to read, and marks
// the stage as one that did work: the runner writes its status.json there
// when it ends (stages that write none, start, exit, pass-through
// diamonds, have their outcome in the journal and checkpoint only).
// Outside a run directory, or for a node id that cannot name a directory,
// it does nothing. name must be a plain file name: a path separator, "."
// or ".." is refused. A handler may ignore the error: the file is for
// reading, not the run's state.
func (x *Execution) WriteStageFile(name string, content []byte) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || name != filepath.Base(name) {
		return fmt.Errorf("stage file %q: not a plain file name", name)
	}
	dir := stageDir(x, x.nodeID())
	if dir == "" {
		return nil
	}
	if err := writeFileQuick(filepath.Join(dir, name), content); err != nil {
		return fmt.Errorf("stage file: %w", err)
	}
	x.wrote.Store(true)
	return nil
}

// nodeID is the stage's node id, "" for a nil Execution.
func (x *Execution) nodeID() string {
	if x == nil {
		return ""
	}
	return x.node
}

type executionKey struct{}

// ExecutionFrom returns the Execution of the stage ctx runs, or nil outside
// a run.
func ExecutionFrom(ctx context.Context) *Execution {
	x, _ := ctx.Value(executionKey{}).(*Execution)
	return x
}

func withExecution(ctx context.Context, x *Execution) context.Context {
	return context.WithValue(ctx, executionKey{}, x)
}

// Emit reports an event of this stage: the run id, node and branch are
// filled in when empty.
func (x *Execution) Emit(ev Event) {
	if x == nil || x.run == nil {
		return
	}
	if ev.NodeID == "" {
		ev.NodeID = x.node
	}
	if ev.Branch == "" {
		ev.Branch = x.Branch
	}
	x.run.emit(ev) // and the run id
}
