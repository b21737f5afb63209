package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// DefaultManagerCycles is stack.manager_loop's manager.max_cycles default.
const DefaultManagerCycles = 3

// ManagerLoopHandler supervises a child pipeline (house): it runs the DOT
// file stack.child_dotfile (the node's, else the graph's; relative to the parent's file) as a run of its
// own under <run dir>/<node>/cycle-<n>, with the parent's runner settings.
// A cycle that ends in success, or whose end satisfies
// manager.stop_condition (a condition on the child's last outcome and
// context), ends the stage with the child's status. Otherwise the manager
// steers: the next cycle's goal carries the failed cycle's node and reason.
// After manager.max_cycles (default 3) cycles it fails with the last
// reason. The child's budgets count against the parent's: its usage is the
// stage's.
type ManagerLoopHandler struct{}

// Type returns "stack.manager_loop".
func (ManagerLoopHandler) Type() string { return TypeManagerLoop }

// Execute runs the child's cycles.
func (ManagerLoopHandler) Execute(ctx context.Context, node *Node, pctx *Context, _ *ArtifactStore) (*Outcome, error) {
	x := ExecutionFrom(ctx)
	if x == nil || x.Runner == nil || x.RunDir == "" {
		return Fail("manager loop %s runs only inside a Runner with a run directory", node.ID), nil
	}
	// Appendix A lists stack.child_dotfile as a graph attribute, and 4.11
	// reads it from graph.attrs; morph also takes it on the node (which
	// wins), so that one graph may supervise several children.
	file := strings.TrimSpace(node.Attrs["stack.child_dotfile"])
	if file == "" && x.Graph != nil {
		file = strings.TrimSpace(x.Graph.Attrs["stack.child_dotfile"])
	}
	if file == "" {
		return Fail("manager loop %s has no stack.child_dotfile (the child pipeline's DOT file): set it on the node or on the graph", node.ID), nil
	}
	if !filepath.IsAbs(file) && x.BaseDir != "" {
		file = filepath.Join(x.BaseDir, file)
	}
	cycles, err := node.Int("manager.max_cycles", DefaultManagerCycles)
	if err != nil {
		return nil, err
	}
	stop := strings.TrimSpace(node.Attrs["manager.stop_condition"])
	goal := node.Attr("manager.goal", pctx.GetString(KeyGoal))

	if x.Runner.depth >= x.Runner.limits().MaxChildDepth {
		return Fail("manager loop %s: child pipelines nest deeper than %d (does %s run its own parent?)", node.ID, x.Runner.limits().MaxChildDepth, file), nil
	}
	child := *x.Runner
	child.depth++
	if x.run != nil { // the child spends what is left of the parent's budgets
		used := x.run.cp.Usage
		if child.Limits.MaxTokens > 0 {
			child.Limits.MaxTokens = max(child.Limits.MaxTokens-used.TotalTokens, 1)
		}
		if child.Limits.MaxCostUSD > 0 {
			child.Limits.MaxCostUSD = max(child.Limits.MaxCostUSD-used.CostUSD, 1e-9)
		}
		if child.Limits.MaxWallTime > 0 {
			child.Limits.MaxWallTime = max(child.Limits.MaxWallTime-x.run.elapsed(), 1)
		}
	}
	parentEvents := x.Runner.OnEvent
	child.OnEvent = func(ev Event) {
		if parentEvents != nil && ev.Kind != EventCheckpointSaved {
			ev.NodeID = node.ID + "/" + ev.NodeID
			parentEvents(ev)
		}
	}
	out := &Outcome{ContextUpdates: map[string]any{}}
	steer := ""
	for cycle := 1; cycle <= max(cycles, 1); cycle++ {
		src, g, err := ReadDOTFile(file)
		if err != nil {
			return Fail("manager loop %s: child pipeline: %v", node.ID, err), nil
		}
		res, err := runCycle(ctx, &child, g, RunConfig{
			RunDir: filepath.Join(x.RunDir, node.ID, fmt.Sprintf("cycle-%d", cycle)),
			Goal:   goal + steer, Source: src, DotFile: file,
		})
		if err != nil {
			return Fail("manager loop %s: child pipeline %s: %v", node.ID, file, err), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		out.Usage.Add(res.Usage)
		out.ContextUpdates[node.ID+".child_state"] = res.State
		out.ContextUpdates[node.ID+".child_run_dir"] = res.RunDir
		out.ContextUpdates[node.ID+".cycles"] = cycle
		if last, ok := res.Context[KeyLastResponse].(string); ok {
			out.ContextUpdates[KeyLastResponse] = last
		}
		if res.State == RunSuccess {
			out.Status = StatusSuccess
			return out, nil
		}
		if stop != "" {
			cctx := NewContext()
			cctx.Apply(res.Context)
			last := &Outcome{Status: StatusFail}
			if s, ok := res.Context[KeyOutcome].(string); ok {
				last.Status, _ = ParseStageStatus(s)
			}
			if ok, err := EvalCondition(stop, last, cctx); err == nil && ok {
				out.Status = last.Status
				out.Notes = "manager.stop_condition met after cycle " + fmt.Sprint(cycle)
				return out, nil
			}
		}
		if res.State == RunBudget || res.State == RunCanceled {
			break
		}
		steer = fmt.Sprintf("\n(Cycle %d failed at %s: %s. Avoid that this time.)", cycle, res.FailedNode, res.FailureReason)
		out.FailureReason = fmt.Sprintf("child pipeline failed %d time(s); last at %s: %s", cycle, res.FailedNode, res.FailureReason)
	}
	out.Status = StatusFail
	return out, nil
}

// runCycle runs one cycle of the child pipeline, or, when its run directory
// holds a run already (the manager stage runs again after its run stopped),
// resumes it, or takes its end when it is over.
func runCycle(ctx context.Context, child *Runner, g *Graph, cfg RunConfig) (*Result, error) {
	if _, err := LoadCheckpoint(cfg.RunDir); errors.Is(err, fs.ErrNotExist) {
		return child.Run(ctx, g, cfg)
	} else if err != nil {
		return nil, err
	}
	cfg.Goal = "" // the cycle's own, from its manifest
	return child.Resume(ctx, g, cfg)
}
