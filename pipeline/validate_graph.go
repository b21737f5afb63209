package pipeline

import (
	"fmt"
	"slices"
	"strings"
)

// topology is the graph as numbers: node indices by id and the successors
// of each node in compressed rows, built once per rule that walks edges so
// that walks are linear. Edges to or from unknown ids are left out
// (edge_target_exists reports them); a repeated node id keeps its first
// index.
type topology struct {
	index map[string]int32
	off   []int32 // successors of v are succ[off[v]:off[v+1]]
	succ  []int32
}

func newTopology(g *Graph) *topology {
	t := &topology{index: make(map[string]int32, len(g.Nodes)), off: make([]int32, len(g.Nodes)+1)}
	for i, n := range g.Nodes {
		if _, dup := t.index[n.ID]; !dup {
			t.index[n.ID] = int32(i)
		}
	}
	type pair struct{ from, to int32 }
	pairs := make([]pair, 0, len(g.Edges))
	for _, e := range g.Edges {
		from, ok1 := t.index[e.From]
		to, ok2 := t.index[e.To]
		if ok1 && ok2 {
			pairs = append(pairs, pair{from, to})
			t.off[from+1]++
		}
	}
	for v := range len(g.Nodes) {
		t.off[v+1] += t.off[v]
	}
	t.succ = make([]int32, len(pairs))
	next := slices.Clone(t.off[:len(g.Nodes)])
	for _, p := range pairs {
		t.succ[next[p.from]] = p.to
		next[p.from]++
	}
	return t
}

func (t *topology) successors(v int32) []int32 { return t.succ[t.off[v]:t.off[v+1]] }

// reachable marks the nodes reachable from the start nodes given.
func (t *topology) reachable(from ...int32) []bool {
	seen := make([]bool, len(t.off)-1)
	stack := slices.Clone(from)
	for _, v := range from {
		seen[v] = true
	}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, w := range t.successors(v) {
			if !seen[w] {
				seen[w] = true
				stack = append(stack, w)
			}
		}
	}
	return seen
}

func checkStartNode(g *Graph, _ ValidateOptions) []Diagnostic {
	var starts []*Node
	for _, n := range g.Nodes {
		if n.Type() == TypeStart {
			starts = append(starts, n)
		}
	}
	switch {
	case len(starts) > 1:
		ids := make([]string, len(starts))
		for i, n := range starts {
			ids[i] = n.ID
		}
		var out []Diagnostic
		for _, n := range starts[1:] {
			out = append(out, nodeDiag(RuleStartNode, SeverityError, n,
				fmt.Sprintf("keep one start node: give %s another shape, or remove it", n.ID),
				"the graph has %d start nodes (%s); a run needs exactly one", len(starts), strings.Join(ids, ", ")))
		}
		return out
	case len(starts) == 0 && g.StartNode() == nil:
		return []Diagnostic{graphDiag(RuleStartNode, SeverityError,
			"add a start node: start [shape=Mdiamond] with an edge to the first stage",
			"the graph has no start node (shape=Mdiamond, type=start, or a node named start in any case)")}
	}
	return nil
}

func checkTerminalNode(g *Graph, _ ValidateOptions) []Diagnostic {
	if len(g.ExitNodes()) > 0 {
		return nil
	}
	return []Diagnostic{graphDiag(RuleTerminalNode, SeverityError,
		"add an exit node: exit [shape=Msquare] with an edge from the last stage",
		"the graph has no exit node (shape=Msquare, type=exit, or a node named exit or end in any case)")}
}

func checkReachability(g *Graph, _ ValidateOptions) []Diagnostic {
	start := g.StartNode()
	if start == nil {
		return nil // start_node reports it
	}
	// A retry target is reached by a jump, not an edge: it counts when the
	// node naming it is reached (the graph's, from the start).
	t := newTopology(g)
	roots := []int32{t.index[start.ID]}
	addTargets := func(attrs map[string]string, seen []bool) bool {
		added := false
		for _, k := range retryAttrs {
			if i, ok := t.index[strings.TrimSpace(attrs[k])]; ok && (seen == nil || !seen[i]) {
				roots, added = append(roots, i), true
			}
		}
		return added
	}
	addTargets(g.Attrs, nil)
	seen := t.reachable(roots...)
	for more := true; more; {
		more = false
		for i, n := range g.Nodes {
			if seen[i] && addTargets(n.Attrs, seen) {
				more = true
			}
		}
		if more {
			seen = t.reachable(roots...)
		}
	}
	var out []Diagnostic
	for i, n := range g.Nodes {
		if !seen[i] {
			out = append(out, nodeDiag(RuleReachability, SeverityError, n,
				fmt.Sprintf("add an edge to %s from a stage the run reaches, or remove it", n.ID),
				"node %s cannot be reached from the start node %s", n.ID, start.ID))
		}
	}
	return out
}

func checkEdgeTargets(g *Graph, _ ValidateOptions) []Diagnostic {
	ids := nodeIDs(g)
	var out []Diagnostic
	for _, e := range g.Edges {
		for _, end := range []string{e.From, e.To} {
			if !ids[end] {
				out = append(out, edgeDiag(RuleEdgeTargetExists, SeverityError, e,
					fmt.Sprintf("declare node %s, or point the edge at an existing node", end),
					"edge %s names node %s, which does not exist", e, end))
			}
		}
	}
	return out
}

func nodeIDs(g *Graph) map[string]bool {
	ids := make(map[string]bool, len(g.Nodes))
	for _, n := range g.Nodes {
		ids[n.ID] = true
	}
	return ids
}

func checkStartNoIncoming(g *Graph, _ ValidateOptions) []Diagnostic {
	start := g.StartNode()
	if start == nil {
		return nil
	}
	var out []Diagnostic
	for _, e := range g.Edges {
		if e.To == start.ID {
			out = append(out, edgeDiag(RuleStartNoIncoming, SeverityError, e,
				fmt.Sprintf("point the edge at the first stage after %s instead", start.ID),
				"edge %s enters the start node; the start runs once, at the beginning", e))
		}
	}
	return out
}

func checkExitNoOutgoing(g *Graph, _ ValidateOptions) []Diagnostic {
	exits := map[string]bool{}
	for _, n := range g.ExitNodes() {
		exits[n.ID] = true
	}
	var out []Diagnostic
	for _, e := range g.Edges {
		if exits[e.From] {
			out = append(out, edgeDiag(RuleExitNoOutgoing, SeverityError, e,
				fmt.Sprintf("remove the edge, or make %s a stage and add an exit after it", e.From),
				"edge %s leaves the exit node %s; the run ends there", e, e.From))
		}
	}
	return out
}

// components returns each node's strongly connected component and the
// components' members, in reverse topological order (a component comes
// after every component it reaches). Tarjan's algorithm, without
// recursion so that a long chain cannot exhaust the stack.
func (t *topology) components() (comp []int32, order [][]int32) {
	n := len(t.off) - 1
	index := make([]int32, n) // 1 + visit order; 0 for unvisited
	low := make([]int32, n)
	onStack := make([]bool, n)
	comp = make([]int32, n)
	var stack []int32
	type frame struct{ v, next int32 }
	var calls []frame
	visited := int32(0)
	visit := func(v int32) {
		visited++
		index[v], low[v] = visited, visited
		stack = append(stack, v)
		onStack[v] = true
		calls = append(calls, frame{v: v})
	}
	for root := range int32(n) {
		if index[root] != 0 {
			continue
		}
		visit(root)
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			if succ := t.successors(v); int(f.next) < len(succ) {
				w := succ[f.next]
				f.next++
				if index[w] == 0 {
					visit(w)
				} else if onStack[w] {
					low[v] = min(low[v], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			var members []int32
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = int32(len(order))
				members = append(members, w)
				if w == v {
					break
				}
			}
			order = append(order, members)
		}
	}
	return comp, order
}
