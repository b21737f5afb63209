package pipeline

import (
	"fmt"
	"slices"
	"strings"
)

func checkConditionSyntax(g *Graph, _ ValidateOptions) []Diagnostic {
	var out []Diagnostic
	for _, e := range g.Edges {
		c := e.Condition()
		if c == "" {
			continue
		}
		cond, err := ParseCondition(c)
		if err != nil {
			out = append(out, edgeDiag(RuleConditionSyntax, SeverityError, e,
				`write clauses key=value or key!=value joined by &&, e.g. condition="outcome=success && context.tests=passed"`,
				"edge %s: %v", e, err))
			continue
		}
		for _, v := range cond.customOutcomes() {
			out = append(out, edgeDiag(RuleConditionSyntax, SeverityWarning, e,
				"fine if a stage reports that status; else write success, fail, partial_success, retry or skipped",
				"edge %s: outcome=%s is not a standard status: it matches only a stage that reports it", e, v))
		}
	}
	return out
}

// retryAttrs are the attributes that name a node to go back to.
var retryAttrs = []string{"retry_target", "fallback_retry_target"}

func checkRetryTargets(g *Graph, _ ValidateOptions) []Diagnostic {
	ids := nodeIDs(g)
	fix := func(target string) string {
		return fmt.Sprintf("name an existing node, or declare %s", target)
	}
	var out []Diagnostic
	for _, key := range retryAttrs {
		if v := strings.TrimSpace(g.Attrs[key]); v != "" && !ids[v] {
			out = append(out, graphDiag(RuleRetryTarget, SeverityWarning, fix(v), "graph %s=%q names no node", key, v))
		}
	}
	for _, n := range g.Nodes {
		for _, key := range retryAttrs {
			if v := strings.TrimSpace(n.Attrs[key]); v != "" && !ids[v] {
				out = append(out, nodeDiag(RuleRetryTarget, SeverityWarning, n, fix(v), "node %s: %s=%q names no node", n.ID, key, v))
			}
		}
	}
	return out
}

// hasRetryTarget reports whether any of the attribute maps sets a retry
// target.
func hasRetryTarget(attrs ...map[string]string) bool {
	for _, a := range attrs {
		for _, key := range retryAttrs {
			if strings.TrimSpace(a[key]) != "" {
				return true
			}
		}
	}
	return false
}

func checkGoalGateRetry(g *Graph, _ ValidateOptions) []Diagnostic {
	var out []Diagnostic
	for _, n := range g.Nodes {
		if gate, err := n.Bool("goal_gate", false); err != nil || !gate || hasRetryTarget(n.Attrs, g.Attrs) {
			continue
		}
		out = append(out, nodeDiag(RuleGoalGateRetry, SeverityWarning, n,
			fmt.Sprintf("set retry_target on %s (or on the graph) to the stage that should run again", n.ID),
			"goal gate %s has no retry_target or fallback_retry_target: if it is unsatisfied at the exit, the run fails", n.ID))
	}
	return out
}

// humanChoices are the choices a human gate offers, as HumanHandler builds
// them: one per outgoing edge in source order, its label (else the
// target's id), the label's accelerator key, and the target.
func humanChoices(out []*Edge) []Choice {
	choices := make([]Choice, 0, len(out))
	for _, e := range out {
		label := e.Label()
		if label == "" {
			label = e.To
		}
		key, _ := Accelerator(label)
		choices = append(choices, Choice{Key: key, Label: label, To: e.To})
	}
	return choices
}

// checkHumanDefaultChoice checks that a human gate's human.default_choice
// names one of its choices, matched as the gate matches an answer
// (matchChoice: the accelerator key, the normalised label, or the target
// id). A default that names none would pass validation and fail the gate
// at the first timeout, so it is an error.
func checkHumanDefaultChoice(g *Graph, _ ValidateOptions) []Diagnostic {
	var gates []*Node
	for _, n := range g.Nodes {
		if n.Attrs["human.default_choice"] != "" && n.Type() == TypeHuman {
			gates = append(gates, n)
		}
	}
	if len(gates) == 0 {
		return nil
	}
	outgoing := make(map[string][]*Edge, len(gates))
	for _, n := range gates {
		outgoing[n.ID] = nil
	}
	for _, e := range g.Edges {
		if _, ok := outgoing[e.From]; ok {
			outgoing[e.From] = append(outgoing[e.From], e)
		}
	}
	var out []Diagnostic
	for _, n := range gates {
		def := n.Attrs["human.default_choice"]
		choices := humanChoices(outgoing[n.ID])
		switch t, _ := gateType(n); t {
		case QuestionFreeform:
			continue // any text will do
		case QuestionYesNo, QuestionConfirmation:
			if choices = mapYesNo(outgoing[n.ID]).choices(); len(outgoing[n.ID]) > 0 {
				if _, ok := yesNoValue(Question{Choices: choices}, def); ok {
					continue
				}
			}
		}
		if _, ok := matchChoice(choices, def); ok {
			continue
		}
		if len(choices) == 0 {
			out = append(out, nodeDiag(RuleHumanDefault, SeverityError, n,
				fmt.Sprintf("add an edge from %s for each choice, with the choice as its label", n.ID),
				"human gate %s: human.default_choice=%q names no choice: the gate has no outgoing edges", n.ID, def))
			continue
		}
		var names []string
		for _, c := range choices {
			names = append(names, fmt.Sprintf("%q (key %s, to %s)", c.Label, c.Key, c.To))
		}
		c := choices[0]
		out = append(out, nodeDiag(RuleHumanDefault, SeverityError, n,
			fmt.Sprintf("set human.default_choice to a choice's key, label or target: e.g. %q, %q or %q", c.Key, c.Label, c.To),
			"human gate %s: human.default_choice=%q names none of its choices %s; on a timeout the gate would fail",
			n.ID, def, strings.Join(names, ", ")))
	}
	return out
}

// checkParallelFanIn warns about a parallel node whose branches (its
// outgoing edges) do not all reach one fan-in node: the parallel handler
// sends the run on to the fan-in they share, and without one the
// branches' results are never joined. Which fan-ins each node reaches is
// computed once for the whole graph (strongly connected components, then
// one pass in reverse topological order per 64 fan-ins), so the work is
// nodes plus edges times fan-ins/64, however many parallel nodes there
// are, rather than a search from every branch.
func checkParallelFanIn(g *Graph, _ ValidateOptions) []Diagnostic {
	if !slices.ContainsFunc(g.Nodes, func(n *Node) bool { return n.Type() == TypeParallel }) {
		return nil
	}
	t := newTopology(g)
	var parallels, fanIns []int32
	for i, n := range g.Nodes {
		if t.index[n.ID] != int32(i) {
			continue // a repeated id
		}
		switch n.Type() {
		case TypeParallel:
			parallels = append(parallels, int32(i))
		case TypeFanIn:
			fanIns = append(fanIns, int32(i))
		}
	}
	joined := make([]bool, len(parallels))
	if len(fanIns) > 0 {
		comp, order := t.components()
		reach := make([]uint64, len(order)) // per component, this chunk's fan-ins it reaches
		for base := 0; base < len(fanIns); base += 64 {
			clear(reach)
			for bit, f := range fanIns[base:min(base+64, len(fanIns))] {
				reach[comp[f]] |= 1 << bit
			}
			for c, members := range order { // sinks first
				for _, v := range members {
					for _, w := range t.successors(v) {
						reach[c] |= reach[comp[w]]
					}
				}
			}
			for i, p := range parallels {
				if joined[i] || len(t.successors(p)) == 0 {
					continue
				}
				common := ^uint64(0)
				for _, b := range t.successors(p) {
					common &= reach[comp[b]]
				}
				joined[i] = common != 0
			}
		}
	}
	var out []Diagnostic
	for i, p := range parallels {
		if joined[i] {
			continue
		}
		n := g.Nodes[p]
		if len(t.successors(p)) == 0 {
			out = append(out, nodeDiag(RuleParallelFanIn, SeverityWarning, n,
				fmt.Sprintf("add an edge from %s to the first stage of each branch, and from each branch's end to a fan-in node (shape=tripleoctagon)", n.ID),
				"parallel node %s has no branches", n.ID))
			continue
		}
		out = append(out, nodeDiag(RuleParallelFanIn, SeverityWarning, n,
			fmt.Sprintf("add a fan-in node (shape=tripleoctagon) and an edge to it from the end of every branch of %s", n.ID),
			"the branches of parallel node %s do not reach a common fan-in node, so their results are never joined", n.ID))
	}
	return out
}
