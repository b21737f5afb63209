package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/morphhost/morph/internal/safetext"
)

// Fidelity modes: how much of the run so far a stage's agent sees.
const (
	// FidelityFull: the agent continues one conversation per thread id
	// (see threadOf for how a stage's is found).
	FidelityFull = "full"
	// FidelityTruncate: the goal and the last stage's output, cut short.
	FidelityTruncate = "truncate"
	// FidelityCompact: the goal, and one line per stage run so far (the
	// default).
	FidelityCompact = "compact"
	// FidelitySummaryLow, ...Medium and ...High: the stage lines (10, 30,
	// 100) and the last agent stage's output (cut at 1, 4, 16 KiB).
	FidelitySummaryLow    = "summary:low"
	FidelitySummaryMedium = "summary:medium"
	FidelitySummaryHigh   = "summary:high"
)

// FidelityModes are the valid fidelity values.
var FidelityModes = []string{FidelityFull, FidelityTruncate, FidelityCompact, FidelitySummaryLow, FidelitySummaryMedium, FidelitySummaryHigh}

// validFidelity reports whether s is a fidelity mode.
func validFidelity(s string) bool { return slices.Contains(FidelityModes, s) }

// fidelityOf is the stage's fidelity (spec 5.4): the incoming edge's if
// valid, else the node's, else the context's (mammoth's hybrid diamond
// reads a fidelity an earlier stage set; the spec has no such step, so
// with no fidelity key in the context the order is the spec's), else the
// graph's default_fidelity, else compact.
func fidelityOf(x *Execution, n *Node, pctx *Context) string {
	var cands []string
	if x != nil && x.Edge != nil {
		cands = append(cands, x.Edge.Attrs["fidelity"])
	}
	cands = append(cands, n.Attrs["fidelity"], pctx.GetString("fidelity"))
	if x != nil && x.Graph != nil {
		cands = append(cands, x.Graph.Attrs["default_fidelity"])
	}
	for _, c := range cands {
		if c = strings.TrimSpace(c); validFidelity(c) {
			return c
		}
	}
	return FidelityCompact
}

// threadOf is the conversation a full-fidelity stage continues (spec 5.4):
// the node's thread_id, else the incoming edge's, else the graph's
// thread_id, else the node's first class (a subgraph's label becomes one),
// else the previous node's id: the node the incoming edge leaves. A stage
// reached without an edge (the start, a jump to a retry target or a
// fan-in) falls back to its own id.
func threadOf(x *Execution, n *Node) string {
	var edge *Edge
	if x != nil {
		edge = x.Edge
	}
	cands := []string{n.Attrs["thread_id"]}
	if edge != nil {
		cands = append(cands, edge.Attrs["thread_id"])
	}
	if x != nil && x.Graph != nil {
		cands = append(cands, x.Graph.Attrs["thread_id"])
	}
	if cl := nodeClasses(n); len(cl) > 0 {
		cands = append(cands, cl[0])
	}
	if edge != nil {
		cands = append(cands, edge.From)
	}
	for _, c := range cands {
		if c = strings.TrimSpace(c); c != "" {
			return c
		}
	}
	return n.ID
}

// Preamble is what a stage's agent is told of the run so far under a
// fidelity mode other than full: the goal, the stages run (from the
// context's log), and for truncate and the summaries the last outputs.
func Preamble(mode string, pctx *Context) string {
	var b strings.Builder
	if g := pctx.GetString(KeyGoal); g != "" {
		fmt.Fprintf(&b, "Goal of the pipeline: %s\n", g)
	}
	log := pctx.Log()
	keep, outBytes := 0, 0
	switch mode {
	case FidelityTruncate:
		keep, outBytes = 1, 2<<10
	case FidelityCompact:
		keep = 20
	case FidelitySummaryLow:
		keep, outBytes = 10, 1<<10
	case FidelitySummaryMedium:
		keep, outBytes = 30, 4<<10
	case FidelitySummaryHigh:
		keep, outBytes = 100, 16<<10
	}
	if len(log) > keep {
		log = log[len(log)-keep:]
	}
	if len(log) > 0 {
		b.WriteString("Stages so far:\n")
		for _, l := range log {
			b.WriteString("- " + l + "\n")
		}
	}
	if last := pctx.GetString(KeyLastResponse); outBytes > 0 && last != "" {
		last = safetext.Truncate(last, outBytes)
		fmt.Fprintf(&b, "Output of the last agent stage (%s):\n%s\n", pctx.GetString(KeyLastStage), last)
	}
	return b.String()
}
