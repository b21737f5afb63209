package pipeline

import (
	"bytes"
	"errors"
	"regexp"
	"testing"
)

// fuzzDOTLimits are small, so the fuzzer reaches every limit quickly.
var fuzzDOTLimits = ParseLimits{MaxBytes: 4096, MaxDepth: 6, MaxNodes: 40, MaxEdges: 80, MaxAttrBytes: 200, MaxTokens: 1500, MaxAttrs: 400}

var fuzzNodeID = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// FuzzParseDOT checks that no source panics the parser, that every refusal
// is a *ParseError naming the file and a line of the source, and that every
// graph it accepts holds together: valid unique node ids found by g.Node,
// edge endpoints that are nodes, lines within the source, the limits kept,
// and the same graph under larger limits and on a second parse.
func FuzzParseDOT(f *testing.F) {
	for _, s := range []string{
		"digraph G { a -> b }",
		"strict digraph {}",
		"graph G { a -- b }",
		"digraph {\n graph [goal=\"g\"]\n default_max_retry=3\n node [shape=box]\n start [shape=Mdiamond]\n start -> plan -> exit [label=\"next\"]\n}",
		"digraph { subgraph cluster_x { label=\"Loop A\"; node [class=x]; a; b [class=\"y, loop-a\"] } a -> {b c} -> d }",
		"digraph { human.default_choice=yes; a [timeout=30s, model=claude-sonnet-4, n=-.5] }",
		"digraph { a [label=\"esc \\\" \\n \\t \\\\ \\l\" + \"more\\\ncont\"] }",
		"digraph { a [label=<<b>x</b>>] } ",
		"# cpp\ndigraph { /* c */ a // d\n }",
		"digraph { { { { { { { a } } } } } } }",
		"digraph { {a b c} -> {d e f} -> {g h} }",
		"digraph { a:p -> b }",
		"digraph { a [x=\"unterminated }",
		"digraph { /* unterminated }",
		"digraph { a\x00 }",
		"digraph { a [x=\"\xff\"] }",
		"\xEF\xBB\xBFDiGraph { NODE [shape=box]; Edge [type=graph]; a -> b [k=Node] }",
		"digraph { subgraph { label=Outer; subgraph { label=Inner; a -> b } } -> c }",
		"digraph { a -> }",
		"digraph a {} digraph b {}",
		"digraph { \"node\" -> 1a }",
		"digraph { a [x=1 + 2] }",
		"digraph { edge [w=1] a -> b -> c -> a [w=2] }",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		g, err := ParseDOTWith("f.dot", src, fuzzDOTLimits)
		lines := 1 + bytes.Count(src, []byte("\n"))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *ParseError", err, err)
			}
			if pe.File != "f.dot" {
				t.Fatalf("ParseError %+v: File = %q, want f.dot", pe, pe.File)
			}
			if pe.Line < 0 || pe.Line > lines {
				t.Fatalf("ParseError %+v: Line = %d, want 0 to %d (the source's lines)", pe, pe.Line, lines)
			}
			if pe.Msg == "" {
				t.Fatalf("ParseError %+v: no Msg", pe)
			}
			return
		}
		checkDOTGraph(t, g, lines, fuzzDOTLimits)

		again, err := ParseDOTWith("f.dot", src, fuzzDOTLimits)
		if err != nil || dumpDOTGraph(again) != dumpDOTGraph(g) {
			t.Fatalf("a second parse differs: %v", err)
		}
		big, err := ParseDOTNamed("f.dot", src)
		if err != nil || dumpDOTGraph(big) != dumpDOTGraph(g) {
			t.Fatalf("the default limits give another result: %v", err)
		}
	})
}

func checkDOTGraph(t *testing.T, g *Graph, lines int, lim ParseLimits) {
	t.Helper()
	if g.File != "f.dot" || g.Attrs == nil {
		t.Fatalf("graph File %q, Attrs %v", g.File, g.Attrs)
	}
	if _, ok := g.Attrs["default_max_retry"]; ok {
		t.Fatalf("default_max_retry was not renamed")
	}
	if len(g.Nodes) > lim.MaxNodes || len(g.Edges) > lim.MaxEdges {
		t.Fatalf("%d nodes, %d edges: over the limits", len(g.Nodes), len(g.Edges))
	}
	seen := map[string]bool{}
	for _, n := range g.Nodes {
		switch {
		case !fuzzNodeID.MatchString(n.ID):
			t.Fatalf("invalid node id %q", n.ID)
		case seen[n.ID]:
			t.Fatalf("node %q twice", n.ID)
		case g.Node(n.ID) != n:
			t.Fatalf("g.Node(%q) does not find it", n.ID)
		case n.Line < 1 || n.Line > lines:
			t.Fatalf("node %q line %d outside the source's %d lines", n.ID, n.Line, lines)
		case n.Attrs == nil:
			t.Fatalf("node %q has nil Attrs", n.ID)
		}
		seen[n.ID] = true
		for k, v := range n.Attrs {
			if k != "class" && len(v) > lim.MaxAttrBytes {
				t.Fatalf("node %q %s is %d bytes, over MaxAttrBytes", n.ID, k, len(v))
			}
		}
	}
	for _, e := range g.Edges {
		switch {
		case g.Node(e.From) == nil || g.Node(e.To) == nil:
			t.Fatalf("edge %s has an endpoint that is not a node", e)
		case e.Line < 1 || e.Line > lines:
			t.Fatalf("edge %s line %d outside the source's %d lines", e, e.Line, lines)
		case e.Attrs == nil:
			t.Fatalf("edge %s has nil Attrs", e)
		}
	}
}
