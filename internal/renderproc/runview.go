package renderproc

import (
	"bytes"
	"fmt"

	"github.com/morphhost/morph/pipeline"
)

// GraphRequest is the Request drawing g, written as standard DOT (which
// Graphviz reads; morph's dialect has bare words it refuses), with what
// cp, a checkpoint of a run of g, says when cp is not nil. The caller
// sets Timeout.
func GraphRequest(g *pipeline.Graph, cp *pipeline.Checkpoint) (Request, error) {
	var dot bytes.Buffer
	if err := g.WriteDOT(&dot); err != nil {
		return Request{}, fmt.Errorf("writing the graph as DOT: %w", err)
	}
	req := Request{DOT: dot.String()}
	if cp == nil {
		return req, nil
	}
	req.Statuses = make(map[string]string, len(cp.Outcomes))
	for id, o := range cp.Outcomes {
		if o != nil {
			req.Statuses[id] = string(o.Status)
		}
	}
	req.Next = cp.NextNode
	req.Nodes, req.Edges = RunView(g, cp)
	return req, nil
}

// RunView is what cp says each node of g did, as render takes it: counts
// and history, and the edges taken named by their ends. An edge index
// that g does not have (a checkpoint of another source, resumed with
// --force) is left out.
func RunView(g *pipeline.Graph, cp *pipeline.Checkpoint) (map[string]NodeRun, []EdgeTaken) {
	nodes := make(map[string]NodeRun, len(cp.Nodes))
	var edges []EdgeTaken
	for id, nr := range cp.Nodes {
		if nr == nil {
			continue
		}
		run := NodeRun{Visits: nr.Visits, Attempts: nr.Attempts, HistoryDropped: nr.HistoryDropped}
		for _, st := range nr.History {
			run.History = append(run.History, string(st))
		}
		nodes[id] = run
		out := g.Outgoing(id)
		for i, count := range nr.EdgesTaken {
			if i < 0 || i >= len(out) || count <= 0 {
				continue
			}
			// render names an edge by its ends and its place among the
			// edges with both.
			nth := 0
			for _, e := range out[:i] {
				if e.To == out[i].To {
					nth++
				}
			}
			edges = append(edges, EdgeTaken{From: id, To: out[i].To, Nth: nth, Count: count})
		}
	}
	return nodes, edges
}
