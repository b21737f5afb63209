package pipeline

import (
	"fmt"
	"testing"
)

// vNode is a node with attributes given as key, value pairs.
func vNode(id string, kv ...string) *Node {
	return &Node{ID: id, Attrs: vAttrs(kv)}
}

// vEdge is an edge with attributes given as key, value pairs.
func vEdge(from, to string, kv ...string) *Edge {
	return &Edge{From: from, To: to, Attrs: vAttrs(kv)}
}

func vAttrs(kv []string) map[string]string {
	if len(kv)%2 != 0 {
		panic(fmt.Sprintf("odd attribute list %q", kv))
	}
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// vGraph builds an indexed graph of *Node and *Edge items; each item gets
// its position (from 1) as its line unless it has one.
func vGraph(attrs map[string]string, items ...any) *Graph {
	if attrs == nil {
		attrs = map[string]string{}
	}
	g := &Graph{Attrs: attrs, File: "test.dot"}
	for i, it := range items {
		switch x := it.(type) {
		case *Node:
			if x.Line == 0 {
				x.Line = i + 1
			}
			g.Nodes = append(g.Nodes, x)
		case *Edge:
			if x.Line == 0 {
				x.Line = i + 1
			}
			g.Edges = append(g.Edges, x)
		default:
			panic(fmt.Sprintf("vGraph: %T", it))
		}
	}
	g.reindex()
	return g
}

// selectTo runs SelectEdge from "n" and returns the target ("" for none).
func selectTo(t *testing.T, g *Graph, o *Outcome, pctx *Context) string {
	t.Helper()
	e := SelectEdge(g.Node("n"), o, pctx, g)
	if e == nil {
		return ""
	}
	return e.To
}

func TestSelectEdgeConditionStep(t *testing.T) {
	g := vGraph(nil,
		vNode("n"),
		vEdge("n", "plain", "weight", "100"),
		vEdge("n", "ok_low", "condition", "outcome=success", "weight", "1"),
		vEdge("n", "ok_high", "condition", "outcome=success", "weight", "5"),
		vEdge("n", "fails", "condition", "outcome=fail", "weight", "50"),
		vEdge("n", "broken", "condition", "outcome=", "weight", "99"),
		vEdge("n", "labelled", "label", "Go"),
	)
	// A true condition beats any unconditional edge, a label, a suggestion
	// and a heavier false or unparsable condition.
	o := &Outcome{Status: StatusSuccess, PreferredLabel: "Go", SuggestedNextIDs: []string{"plain"}}
	if got := selectTo(t, g, o, nil); got != "ok_high" {
		t.Errorf("got %q, want ok_high (the heaviest true condition)", got)
	}
	if got := selectTo(t, g, &Outcome{Status: StatusFail}, nil); got != "fails" {
		t.Errorf("fail: got %q, want fails", got)
	}
}

func TestSelectEdgeConditionTieBreak(t *testing.T) {
	g := vGraph(nil,
		vNode("n"),
		vEdge("n", "zeta", "condition", "outcome=success", "weight", "2"),
		vEdge("n", "alpha", "condition", "outcome=success", "weight", "2"),
		vEdge("n", "beta", "condition", "outcome=success", "weight", "2"),
		vEdge("n", "aaa", "condition", "outcome=success", "weight", "1"),
	)
	if got := selectTo(t, g, Success(), nil); got != "alpha" {
		t.Errorf("got %q, want alpha (equal weights: lexically smallest target)", got)
	}
}

func TestSelectEdgePreferredLabel(t *testing.T) {
	g := vGraph(nil,
		vNode("n"),
		vEdge("n", "heavy", "weight", "10"),
		vEdge("n", "cond", "label", "Yes", "condition", "outcome=fail"),
		vEdge("n", "yes1", "label", "[Y] Yes"),
		vEdge("n", "yes2", "label", "Yes"),
		vEdge("n", "no", "label", "N) No"),
		vEdge("n", "later", "label", "L - Later please"),
	)
	cases := map[string]string{
		"yes":              "yes1", // the first match, not the conditional edge
		"  YES ":           "yes1",
		"[Y] Yes":          "yes1",
		"no":               "no",
		"n) no":            "no",
		"Later please":     "later",
		"maybe":            "heavy", // no match: on to the later steps
		"":                 "heavy",
		"   ":              "heavy",
		"[L] later PLEASE": "later",
	}
	for label, want := range cases {
		o := &Outcome{Status: StatusSuccess, PreferredLabel: label}
		if got := selectTo(t, g, o, nil); got != want {
			t.Errorf("preferred label %q: got %q, want %q", label, got, want)
		}
	}
	// The label wins over a suggestion.
	o := &Outcome{Status: StatusSuccess, PreferredLabel: "no", SuggestedNextIDs: []string{"yes2"}}
	if got := selectTo(t, g, o, nil); got != "no" {
		t.Errorf("label and suggestion: got %q, want no", got)
	}
}

func TestSelectEdgeSuggestedIDs(t *testing.T) {
	g := vGraph(nil,
		vNode("n"),
		vEdge("n", "heavy", "weight", "10"),
		vEdge("n", "cond", "condition", "outcome=fail"),
		vEdge("n", "b", "label", "first b"),
		vEdge("n", "b", "label", "second b"),
		vEdge("n", "c"),
	)
	cases := []struct {
		ids  []string
		want string
		lbl  string
	}{
		{[]string{"c", "b"}, "c", ""},
		{[]string{"nowhere", "b", "c"}, "b", "first b"}, // in order; the first edge to b
		{[]string{"cond"}, "heavy", ""},                 // only unconditional edges count
		{[]string{" c "}, "c", ""},
		{nil, "heavy", ""},
	}
	for _, c := range cases {
		e := SelectEdge(g.Node("n"), &Outcome{Status: StatusSuccess, SuggestedNextIDs: c.ids}, nil, g)
		if e == nil {
			t.Errorf("suggested %q: no edge, want the one to %s", c.ids, c.want)
			continue
		}
		if e.To != c.want {
			t.Errorf("suggested %q: edge to %s, want %s", c.ids, e.To, c.want)
		}
		if c.lbl != "" && e.Label() != c.lbl {
			t.Errorf("suggested %q: edge labelled %q, want %q", c.ids, e.Label(), c.lbl)
		}
	}
}

func TestSelectEdgeUnconditionalTieBreak(t *testing.T) {
	g := vGraph(nil,
		vNode("n"),
		vEdge("n", "m", "weight", "3"),
		vEdge("n", "k", "weight", "3"),
		vEdge("n", "a", "weight", "1"),
		vEdge("n", "z", "weight", "bogus"), // counts as 0
	)
	if got := selectTo(t, g, Success(), nil); got != "k" {
		t.Errorf("got %q, want k", got)
	}
	g = vGraph(nil, vNode("n"), vEdge("n", "y"), vEdge("n", "x", "weight", "-1"))
	if got := selectTo(t, g, nil, nil); got != "y" {
		t.Errorf("nil outcome: got %q, want y (weight 0 beats -1)", got)
	}
}

func TestSelectEdgeNone(t *testing.T) {
	g := vGraph(nil, vNode("n"), vNode("m"), vEdge("m", "n"), vEdge("n", "x", "condition", "outcome=fail"))
	if e := SelectEdge(g.Node("n"), Success(), nil, g); e != nil {
		t.Errorf("got %v, want nil: the only edge's condition is false", e)
	}
	if e := SelectEdge(nil, Success(), nil, g); e != nil {
		t.Errorf("nil node: got %v", e)
	}
}

// morph's FAIL rule: a failure takes a matching condition or nothing,
// never a label, suggestion or unconditional edge.
func TestSelectEdgeFailNeverFallsThrough(t *testing.T) {
	g := vGraph(nil,
		vNode("n"),
		vEdge("n", "next", "label", "Next", "weight", "9"),
		vEdge("n", "done", "condition", "outcome=success"),
	)
	for _, status := range []StageStatus{StatusFail, "FAIL", "failure"} {
		o := &Outcome{Status: status, PreferredLabel: "Next", SuggestedNextIDs: []string{"next"}}
		if e := SelectEdge(g.Node("n"), o, nil, g); e != nil {
			t.Errorf("status %q: got %v, want nil", status, e)
		}
	}
	// Spec 3.2 vs 3.7 (doc.go, "Where the spec disagrees with itself"): a
	// FAIL whose node has only an unconditional edge does not take it
	// (3.7); 3.2's select_edge would.
	only := vGraph(nil, vNode("build"), vEdge("build", "deploy"))
	if e := SelectEdge(only.Node("build"), Fail("tests failed"), nil, only); e != nil {
		t.Errorf("3.2 vs 3.7: a FAIL with only an unconditional edge took %v, want none", e)
	}
	// Other statuses fall through as usual.
	for _, status := range []StageStatus{StatusRetry, StatusPartialSuccess, StatusSkipped} {
		if got := selectTo(t, g, &Outcome{Status: status}, nil); got != "next" {
			t.Errorf("status %q: got %q, want next", status, got)
		}
	}
	// A fail edge whose condition also reads the context.
	g = vGraph(nil,
		vNode("n"),
		vEdge("n", "next"),
		vEdge("n", "fix", "condition", "outcome=fail && context.stage=build"),
	)
	pctx := NewContext()
	pctx.Set("stage", "build")
	if got := selectTo(t, g, Fail("boom"), pctx); got != "fix" {
		t.Errorf("got %q, want fix", got)
	}
	pctx.Set("stage", "test")
	if got := selectTo(t, g, Fail("boom"), pctx); got != "" {
		t.Errorf("got %q, want none", got)
	}
}

func TestAccelerator(t *testing.T) {
	cases := []struct{ label, key, rest string }{
		{"[Y] Yes", "Y", "Yes"},
		{"[y]Yes", "Y", "Yes"},
		{"  Y) Yes  ", "Y", "Yes"},
		{"n) no", "N", "no"},
		{"Y - Yes", "Y", "Yes"},
		{"A  -  Approve it", "A", "Approve it"},
		{"1) First", "1", "First"},
		{"Yes", "Y", "Yes"},
		{"approve", "A", "approve"},
		{"A-B test", "A", "A-B test"}, // no spaces around -: not a prefix
		{"X- ray", "X", "X- ray"},     // - needs a space on both sides
		{"OK - go", "O", "OK - go"},   // the key is one character
		{"Y)es", "Y", "Y)es"},
		{"[YES] ok", "[", "[YES] ok"},
		{"[] x", "[", "[] x"},
		{"- dash", "-", "- dash"},
		{"ébène", "É", "ébène"},
		{"[é] Oui", "É", "Oui"},
		{"", "", ""},
		{"   ", "", ""},
		{"Y)", "Y", ""},
	}
	for _, c := range cases {
		key, rest := Accelerator(c.label)
		if key != c.key || rest != c.rest {
			t.Errorf("Accelerator(%q) = %q, %q; want %q, %q", c.label, key, rest, c.key, c.rest)
		}
	}
}

func TestNormalizeLabel(t *testing.T) {
	cases := map[string]string{
		"[Y] Yes":      "yes",
		" Y) YES ":     "yes",
		"Y - Yes":      "yes",
		"Fix It":       "fix it",
		"A-B test":     "a-b test",
		"":             "",
		"[Q]   Quit  ": "quit",
	}
	for in, want := range cases {
		if got := NormalizeLabel(in); got != want {
			t.Errorf("NormalizeLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkSelectEdgeConditions(b *testing.B) {
	var items []any
	items = append(items, vNode("n"))
	for i := range 20 {
		to := "t" + string(rune('a'+i))
		items = append(items, vNode(to), vEdge("n", to, "condition", "outcome=success && context.k="+to))
	}
	g := vGraph(nil, items...)
	pctx := NewContext()
	pctx.Set("k", "tt")
	o := Success()
	n := g.Node("n")
	for b.Loop() {
		SelectEdge(n, o, pctx, g)
	}
}
