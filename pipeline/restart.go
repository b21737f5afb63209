package pipeline

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// A loop_restart edge (attractor 2.7, 3.2 step 7) ends the current loop of
// the run and starts a fresh one at the edge's target, in the same run
// directory under the same run id and lock: the visits, retry counts,
// outcomes, goal-gate retries and context go back to what the run started
// with (its goal), and the new loop's stage files go to
// <run dir>/restart-<n>/, leaving the old loop's as they were. The path
// (completed_nodes) and the run's usage keep growing across loops, so
// max_steps and the budgets bound the whole run; max_restarts bounds the
// loops.

// restartDirPrefix names a restarted loop's stage directory.
const restartDirPrefix = "restart-"

// restart is what taking edge from cur to next does to the run's loop:
// nothing (0, "") unless the edge has loop_restart=true; else the loop's
// state is reset and the new loop's number returned, for the journal's
// restart record. past is the run's failure when max_restarts is spent.
func (x *run) restart(edge *Edge, cur, next string) (n int, past string) {
	if edge == nil {
		return 0, ""
	}
	if on, err := boolAttr(edge.Attrs, "loop_restart", false, ""); err != nil || !on {
		return 0, ""
	}
	n = x.cp.Restarts + 1
	if limit := x.maxRestarts(); n > limit {
		return 0, fmt.Sprintf("edge %s has loop_restart=true and the run has restarted %d times, its max_restarts (raise [pipeline] max_restarts in morph.toml, or, when that is unset, the graph's max_restarts attribute, to allow more)", edge, limit)
	}
	x.mu.Lock()
	x.cp.newLoop(n)
	x.mu.Unlock()
	for k := range x.pctx.Snapshot() {
		if k != KeyGoal {
			x.pctx.Delete(k)
		}
	}
	x.pctx.AppendLog(fmt.Sprintf("%s: restart %d at %s (loop_restart): visits, retries, outcomes and context reset; stage files under %s%d/", cur, n, next, restartDirPrefix, n))
	x.emit(Event{Kind: EventLoopRestarted, NodeID: next, Attempt: n, Message: fmt.Sprintf("restart %d of max_restarts=%d, from %s", n, x.maxRestarts(), cur)})
	return n, ""
}

// newLoop resets the per-loop state for the run's n-th restart: the one
// place a restart becomes state, for the run in progress and for the
// journal's fold alike.
func (cp *Checkpoint) newLoop(n int) {
	cp.Restarts = n
	cp.Visits = map[string]int{}
	cp.RetryCounts = map[string]int{}
	cp.Outcomes = map[string]*Outcome{}
	cp.GoalGateRetries = 0
}

// maxRestarts is the operator's Limits.MaxRestarts ([pipeline]
// max_restarts) when set, else the graph's max_restarts, else the default:
// the operator's wins, as for max_steps, so that, when the operator sets
// it, a graph a client sends (serve --allow-dot) cannot raise it.
func (x *run) maxRestarts() int {
	if x.r.Limits.MaxRestarts > 0 {
		return x.r.Limits.MaxRestarts
	}
	if n := x.graphInt("max_restarts", 0); n > 0 {
		return n
	}
	return x.lim.MaxRestarts
}

// loopDir is where the current loop's stage files go: the run directory,
// or its restart-<n>/ after the n-th restart.
func (x *run) loopDir() string {
	if x.cp.Restarts == 0 {
		return x.cfg.RunDir
	}
	return filepath.Join(x.cfg.RunDir, restartDirPrefix+strconv.Itoa(x.cp.Restarts))
}
