package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// BranchResult is how one branch of a parallel node ended; the parallel
// handler records them under parallel.results.<branch>, so nothing a branch
// did is dropped even when the fan-in picks another.
type BranchResult struct {
	Branch         string         `json:"branch"` // the branch's first node
	Status         StageStatus    `json:"status"`
	Path           []string       `json:"path"`
	LastNode       string         `json:"last_node,omitempty"`
	Notes          string         `json:"notes,omitempty"`
	FailureReason  string         `json:"failure_reason,omitempty"`
	Output         string         `json:"output,omitempty"` // the branch's last agent or tool output (cut)
	ContextUpdates map[string]any `json:"context_updates,omitempty"`
	Usage          Usage          `json:"usage,omitzero"`
}

// Join policies of a parallel node.
const (
	JoinWaitAll      = "wait_all"
	JoinFirstSuccess = "first_success"
)

// ParallelHandler fans out (component): each outgoing edge starts a branch
// that runs on a clone of the context until it reaches the fan-in node
// where the branches meet (tripleoctagon), an exit, or a node with no edge
// to take. At most max_parallel (default 4) branches run at once. With
// join_policy wait_all (default) all branches run, and the stage succeeds
// when none failed and is partial_success otherwise, even when all failed:
// the fan-in then fails (spec 4.8, 4.9); with first_success the first
// branch to succeed cancels the others, and the stage fails when none
// succeeded. The
// branches run through the Runner's Executor (goroutines by default). The
// run then goes on at the fan-in node. A branch's nodes are not
// checkpointed one by one: a resume runs the whole parallel stage again.
type ParallelHandler struct{}

// Type returns "parallel".
func (ParallelHandler) Type() string { return TypeParallel }

// Execute runs the branches.
func (ParallelHandler) Execute(ctx context.Context, node *Node, pctx *Context, _ *ArtifactStore) (*Outcome, error) {
	x := ExecutionFrom(ctx)
	if x == nil || x.run == nil {
		return Fail("parallel node %s runs only inside a Runner", node.ID), nil
	}
	edges := x.Graph.Outgoing(node.ID)
	if len(edges) == 0 {
		return Fail("parallel node %s has no outgoing edges (branches)", node.ID), nil
	}
	fanIn := findFanIn(x.Graph, edges)
	if fanIn == "" {
		return Fail("parallel node %s: its branches do not meet at a fan-in node (shape=tripleoctagon)", node.ID), nil
	}
	maxPar, err := node.Int("max_parallel", DefaultMaxParallel)
	if err != nil {
		return nil, err
	}
	maxPar = max(maxPar, 1)
	policy := strings.TrimSpace(node.Attr("join_policy", JoinWaitAll))
	if policy != JoinWaitAll && policy != JoinFirstSuccess {
		return Fail("parallel node %s: join_policy %q: want wait_all or first_success", node.ID, policy), nil
	}

	x.Emit(Event{Kind: EventParallelStarted, NodeID: node.ID, Message: fmt.Sprintf("%d branches, join at %s", len(edges), fanIn)})
	exec := x.Runner.executor()
	bctx, cancel := exec.WithCancel(ctx)
	defer cancel()
	results := make([]BranchResult, len(edges))
	exec.ForEach(bctx, len(edges), maxPar, func(bctx context.Context, i int) {
		e := edges[i]
		if bctx.Err() != nil {
			results[i] = BranchResult{Branch: e.To, Status: StatusSkipped, Notes: "not started: another branch succeeded first"}
			return
		}
		x.Emit(Event{Kind: EventBranchStarted, NodeID: node.ID, Branch: e.To})
		results[i] = x.run.branch(bctx, x, e, fanIn, pctx.Clone())
		x.Emit(Event{Kind: EventBranchCompleted, NodeID: node.ID, Branch: e.To, Status: results[i].Status, Message: results[i].FailureReason})
		if policy == JoinFirstSuccess && results[i].Status.Succeeded() {
			cancel()
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	out := &Outcome{JumpTo: fanIn}
	byBranch := map[string]any{}
	succeeded, failed := 0, 0
	for _, r := range results {
		out.Usage.Add(r.Usage)
		byBranch[r.Branch] = r
		switch {
		case r.Status.Succeeded():
			succeeded++
		case r.Status == StatusFail:
			failed++
		}
	}
	out.Status, out.FailureReason = joinStatus(policy, succeeded, failed)
	if out.Status != StatusSuccess {
		out.Notes = fmt.Sprintf("%d of %d branches succeeded", succeeded, len(results))
	}
	out.ContextUpdates = map[string]any{KeyParallelResults: byBranch}
	x.Emit(Event{Kind: EventParallelCompleted, NodeID: node.ID, Status: out.Status, Usage: out.Usage})
	return out, nil
}

// joinStatus is a parallel stage's status under policy (spec 4.8):
// wait_all succeeds when no branch failed and is otherwise partial_success,
// even when every branch failed, since the fan-in (4.9) is the stage that
// judges the branches and fails when none succeeded; first_success succeeds
// when any branch did and fails otherwise. A skipped, partial or custom
// status is not a failure.
func joinStatus(policy string, succeeded, failed int) (StageStatus, string) {
	switch {
	case policy == JoinFirstSuccess && succeeded > 0, policy == JoinWaitAll && failed == 0:
		return StatusSuccess, ""
	case policy == JoinWaitAll:
		return StatusPartialSuccess, ""
	default:
		return StatusFail, "no branch succeeded"
	}
}

// findFanIn is the fan-in node every branch reaches, the nearest in total.
func findFanIn(g *Graph, edges []*Edge) string {
	total := map[string]int{}
	reached := map[string]int{}
	for _, e := range edges {
		for id, d := range distances(g, e.To) {
			if n := g.Node(id); n != nil && n.Type() == TypeFanIn {
				total[id] += d
				reached[id]++
			}
		}
	}
	best, bestD := "", -1
	for _, id := range sortedKeys(reached) {
		if reached[id] == len(edges) && (bestD < 0 || total[id] < bestD) {
			best, bestD = id, total[id]
		}
	}
	return best
}

// distances is the breadth-first distance of every node reachable from
// id.
func distances(g *Graph, id string) map[string]int {
	dist := map[string]int{id: 0}
	queue := []string{id}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, e := range g.Outgoing(cur) {
			if _, seen := dist[e.To]; !seen {
				dist[e.To] = dist[cur] + 1
				queue = append(queue, e.To)
			}
		}
	}
	return dist
}

// branch runs one branch from edge e's target until stop (the fan-in), an
// exit or a dead end, on its own context.
func (x *run) branch(ctx context.Context, parent *Execution, e *Edge, stop string, bctx *Context) BranchResult {
	res := BranchResult{Branch: e.To, Status: StatusSuccess, ContextUpdates: map[string]any{}}
	visits := map[string]int{}
	cur, via, prev := e.To, e, parent.Previous
	for steps := 0; ; steps++ {
		node := x.g.Node(cur)
		if cur == stop || node == nil || node.Type() == TypeExit || node.Type() == TypeFanIn {
			return res
		}
		if steps >= x.lim.MaxSteps || visits[cur] >= x.maxVisits(node) {
			res.Status, res.FailureReason = StatusFail, fmt.Sprintf("branch %s: node %s past max_node_visits or the step limit", e.To, cur)
			return res
		}
		visits[cur]++
		out, err := x.execute(ctx, node, bctx, prev, via, e.To)
		if err != nil {
			res.Status, res.FailureReason = StatusSkipped, "canceled: "+err.Error()
			return res
		}
		bctx.Apply(out.ContextUpdates)
		bctx.Set(KeyOutcome, string(out.Status))
		bctx.Set(KeyPreferredLabel, out.PreferredLabel)
		for k, v := range out.ContextUpdates {
			res.ContextUpdates[k] = v
		}
		if o, ok := out.ContextUpdates[cur+".output"].(string); ok {
			res.Output = o
		}
		res.Path = append(res.Path, cur)
		res.LastNode, res.Status, res.Notes, res.FailureReason = cur, out.Status, out.Notes, out.FailureReason
		res.Usage.Add(out.Usage)
		x.mu.Lock()
		x.cp.Outcomes[cur] = out
		nr := x.nodes[cur]
		nr.Status, nr.FailureReason, nr.Notes = out.Status, out.FailureReason, out.Notes
		nr.Visits++
		nr.visited(out.Status)
		x.mu.Unlock()

		next := out.JumpTo
		if next == "" {
			if edge := SelectEdge(node, out, bctx, x.g); edge != nil {
				next, via = edge.To, edge
				x.mu.Lock()
				nr.took(edgeIndex(x.g, edge))
				x.mu.Unlock()
			}
		} else {
			via = nil
		}
		if next == "" {
			if out.Status != StatusFail && len(x.g.Outgoing(cur)) > 0 {
				res.Status, res.FailureReason = StatusFail, fmt.Sprintf("no edge leaves %s for its outcome %s", cur, out.Status)
			}
			return res
		}
		prev, cur = out, next
	}
}

// parallelResults reads parallel.results from the context, whether it
// holds the handler's values or, after a resume, their JSON.
func parallelResults(pctx *Context) map[string]BranchResult {
	raw, ok := pctx.Lookup(KeyParallelResults)
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var out map[string]BranchResult
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

// statusRanks orders statuses for the fan-in's heuristic: best first.
var statusRanks = map[StageStatus]int{StatusSuccess: 0, StatusPartialSuccess: 1, StatusRetry: 2, StatusFail: 3, StatusSkipped: 4}

// statusRank is s's place in statusRanks; a custom status ("needs_dod")
// ranks last, since it is not a success.
func statusRank(s StageStatus) int {
	if r, ok := statusRanks[s]; ok {
		return r
	}
	return len(statusRanks)
}

// Values of a fan-in's merge_context attribute.
const (
	// MergeNone (the default) keeps the branches' context updates out of
	// the run's context, as spec 3.8 says ("Branch contexts are isolated;
	// changes are not merged back into the parent"); they stay readable
	// under parallel.results.<branch>.context_updates.
	MergeNone = "none"
	// MergeBest applies the chosen branch's context updates to the run.
	MergeBest = "best"
)

// FanInHandler joins a parallel node's branches (tripleoctagon): it picks
// the best branch and records the pick under parallel.fan_in.best_id (and
// .best), its status under parallel.fan_in.best_outcome. With
// merge_context=best it also applies that branch's context updates to the
// run; by default (none) it does not (spec 3.8). With a prompt an agent picks
// (it is shown each branch's status and output and answers BEST: <branch>);
// otherwise, or when the agent names no branch, the best status wins
// (success, partial_success, retry, fail), then the branch id. It fails
// when the chosen branch did not succeed.
type FanInHandler struct {
	// Backend runs the ranking agent (nil: the Runner's).
	Backend CodergenBackend
}

// Type returns "parallel.fan_in".
func (*FanInHandler) Type() string { return TypeFanIn }

var bestMarker = regexp.MustCompile(`(?i)\bBEST\s*[:=]\s*([A-Za-z_][A-Za-z0-9_]*)`)

// Execute picks a branch.
func (h *FanInHandler) Execute(ctx context.Context, node *Node, pctx *Context, store *ArtifactStore) (*Outcome, error) {
	results := parallelResults(pctx)
	if len(results) == 0 {
		return Fail("fan-in %s: no parallel.results in the context: a fan-in joins the branches of a parallel node (shape=component)", node.ID), nil
	}
	merge := strings.TrimSpace(node.Attr("merge_context", MergeNone))
	if merge != MergeNone && merge != MergeBest {
		return Fail("fan-in %s: merge_context %q: want none or best", node.ID, merge), nil
	}
	ids := sortedKeys(results)
	sort.SliceStable(ids, func(i, j int) bool { return statusRank(results[ids[i]].Status) < statusRank(results[ids[j]].Status) })
	best := ids[0]
	out := &Outcome{ContextUpdates: map[string]any{}}
	if prompt := strings.TrimSpace(node.Attrs["prompt"]); prompt != "" {
		var b strings.Builder
		b.WriteString(prompt + "\n\nBranches:\n")
		for _, id := range sortedKeys(results) {
			r := results[id]
			fmt.Fprintf(&b, "- %s: %s %s\n%s\n", id, r.Status, r.FailureReason, r.Output)
		}
		b.WriteString("\nAnswer with BEST: <branch> naming the best branch.")
		res, agentOut := runAgentStage(ctx, agentStage{node: node, pctx: pctx, store: store, backend: h.Backend, prompt: b.String()})
		if res == nil {
			return agentOut, nil
		}
		out.Usage = agentOut.Usage
		if m := bestMarker.FindStringSubmatch(res.Output); m != nil {
			if _, ok := results[m[1]]; ok {
				best = m[1]
			} else {
				out.Notes = fmt.Sprintf("the agent named %q, not a branch; picked %s by status", m[1], best)
			}
		} else {
			out.Notes = "the agent named no branch (BEST: <branch>); picked " + best + " by status"
		}
	}
	chosen := results[best]
	if merge == MergeBest {
		for k, v := range chosen.ContextUpdates {
			out.ContextUpdates[k] = v
		}
	}
	// Spec 4.9 names the pick parallel.fan_in.best_id and its status
	// best_outcome; parallel.fan_in.best is morph's older name.
	out.ContextUpdates["parallel.fan_in.best"] = best
	out.ContextUpdates[KeyFanInBestID] = best
	out.ContextUpdates[KeyFanInBestOutcome] = string(chosen.Status)
	if chosen.Status.Succeeded() {
		out.Status = StatusSuccess
	} else {
		out.Status = StatusFail
		out.FailureReason = fmt.Sprintf("no branch succeeded (best: %s, %s)", best, chosen.Status)
	}
	return out, nil
}
