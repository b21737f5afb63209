package render

import (
	"bytes"
	"encoding/xml"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/morphhost/morph/internal/renderproc"
)

// svgEdge is an edge's <g class="edge">: its title ("a->b"), tooltip,
// line colour and width, and label text (padding trimmed).
type svgEdge struct {
	title, tooltip, stroke, width, text string
}

// parseEdges reads svg's edges, in the order drawn.
func parseEdges(t *testing.T, svg []byte) []svgEdge {
	t.Helper()
	var edges []svgEdge
	var cur *svgEdge
	var inTitle, inText bool
	dec := xml.NewDecoder(bytes.NewReader(svg))
	dec.Entity = xml.HTMLEntity
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return edges
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			attr := func(name string) string {
				for _, a := range el.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			if el.Name.Local == "g" {
				depth++
				if attr("class") == "edge" {
					edges = append(edges, svgEdge{})
					cur = &edges[len(edges)-1]
					depth = 1
				}
			}
			if cur == nil {
				continue
			}
			switch el.Name.Local {
			case "title":
				inTitle = true
			case "a":
				cur.tooltip = attr("title")
			case "path":
				cur.stroke, cur.width = attr("stroke"), attr("stroke-width")
			case "text":
				inText = true
			}
		case xml.CharData:
			switch {
			case cur == nil:
			case inTitle:
				cur.title += string(el)
			case inText:
				cur.text += strings.TrimSpace(string(el))
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "title":
				inTitle = false
			case "text":
				inText = false
			case "g":
				if depth--; depth == 0 {
					cur = nil
				}
			}
		}
	}
}

// TestSVGShapelessNodesAreBoxes: a node without a shape is drawn as the
// pipeline spec's default, a box (a polygon of 4 points), not Graphviz's
// ellipse; a shape the source gives is kept.
func TestSVGShapelessNodesAreBoxes(t *testing.T) {
	svg, err := SVG(t.Context(), []byte(`digraph { plain; round [shape=ellipse]; plain -> round }`), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	node := func(id string) string {
		_, after, ok := strings.Cut(string(svg), "<title>"+id+"</title>")
		if !ok {
			t.Fatalf("no node %s in\n%s", id, svg)
		}
		g, _, _ := strings.Cut(after, "</g>")
		return g
	}
	points := regexp.MustCompile(`<polygon [^>]*points="([^"]+)"`).FindStringSubmatch(node("plain"))
	if points == nil {
		t.Fatalf("plain is not drawn as a polygon:\n%s", node("plain"))
	}
	// Graphviz closes the polygon: the first point again.
	if n := len(strings.Fields(points[1])); n != 5 {
		t.Errorf("plain's polygon has %d points (%s), want a box's 4 and the closing one", n, points[1])
	}
	if !strings.Contains(node("round"), "<ellipse") {
		t.Errorf("round, shape=ellipse, is not an ellipse:\n%s", node("round"))
	}
}

// runDOT is a verify loop with two edges from verify to implement (the
// second taken) and one untaken edge.
const runDOT = `digraph {
	start [shape=Mdiamond]; done [shape=Msquare]; abandon
	start -> implement -> verify
	verify -> implement [label="fix"]
	verify -> implement [label="redo"]
	verify -> done [label="pass"]
	implement -> abandon
}`

func TestSVGDrawsTheRun(t *testing.T) {
	statuses := map[string]string{"start": "success", "implement": "success", "verify": "success", "done": "success"}
	opts := Options{
		Nodes: map[string]renderproc.NodeRun{
			"start":     {Visits: 1, Attempts: 1, History: []string{"success"}},
			"implement": {Visits: 2, Attempts: 3, History: []string{"success", "success"}},
			"verify":    {Visits: 2, Attempts: 2, History: []string{"fail", "success"}},
			"done":      {Visits: 1, Attempts: 1, History: []string{"success"}},
		},
		Edges: []renderproc.EdgeTaken{
			{From: "start", To: "implement", Count: 1},
			{From: "implement", To: "verify", Count: 2},
			{From: "verify", To: "implement", Nth: 1, Count: 1}, // "redo", not "fix"
			{From: "verify", To: "done", Count: 1},
			{From: "gone", To: "done", Count: 1}, // not in the graph: ignored
		},
	}
	svg, err := SVG(t.Context(), []byte(runDOT), statuses, opts)
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, svg)
	for id, want := range map[string]struct{ text, tooltip string }{
		"start":     {"start", "success"},
		"implement": {"implementx2, 3 attempts", "success (x2, 3 attempts) visits: success, success"},
		"verify":    {"verifyx2, 2 attemptsfail > success", "success (x2, 2 attempts) visits: fail, success"},
		"abandon":   {"abandon", "not run"},
	} {
		if got := doc.nodes[id]; got.text != want.text || got.tooltip != want.tooltip {
			t.Errorf("node %s: text %q, tooltip %q; want %q, %q", id, got.text, got.tooltip, want.text, want.tooltip)
		}
	}
	want := []svgEdge{
		{title: "start->implement", tooltip: "taken once", stroke: colourTaken, width: penwidthTaken},
		{title: "implement->verify", tooltip: "taken 2 times", stroke: colourTaken, width: penwidthTaken, text: "x2"},
		{title: "implement->abandon", tooltip: "not taken", stroke: colourUntaken},
		{title: "verify->implement", tooltip: "not taken", stroke: colourUntaken, text: "fix"},
		{title: "verify->implement", tooltip: "taken once", stroke: colourTaken, width: penwidthTaken, text: "redo"},
		{title: "verify->done", tooltip: "taken once", stroke: colourTaken, width: penwidthTaken, text: "pass"},
	}
	got := parseEdges(t, svg)
	if len(got) != len(want) {
		t.Fatalf("%d edges drawn, want %d: %+v", len(got), len(want), got)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("no edge drawn as %+v; the edges: %+v", w, got)
		}
	}
}

// TestSVGRunOfAnOldCheckpoint: without the edges a run took (a checkpoint
// from before they were kept), no edge is greyed.
func TestSVGRunOfAnOldCheckpoint(t *testing.T) {
	svg, err := SVG(t.Context(), []byte(runDOT), map[string]string{"start": "success"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range parseEdges(t, svg) {
		if e.stroke != "black" || e.width != "" {
			t.Errorf("edge %s drawn %s %s without a run's edges, want black and thin", e.title, e.stroke, e.width)
		}
	}
}

// TestSVGRunHistoryIsBounded: a checkpoint's history may hold any number
// of statuses, with any characters: the drawing shows the last few, the
// tooltip the last maxHistory and how many it leaves out, Graphviz's
// escapes removed.
func TestSVGRunHistoryIsBounded(t *testing.T) {
	history := make([]string, 5000)
	for i := range history {
		history[i] = "fail"
	}
	history[len(history)-1] = `su\Nccess`
	opts := Options{Nodes: map[string]renderproc.NodeRun{"verify": {Visits: 5100, History: history, HistoryDropped: 100}}}
	svg, err := SVG(t.Context(), []byte(runDOT), map[string]string{"verify": "success"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := parseSVG(t, svg).nodes["verify"]
	if want := "verifyx5100... > fail > fail > fail > suNccess"; got.text != want {
		t.Errorf("text %q, want %q", got.text, want)
	}
	wantTip := "success (x5100) visits: +5080 earlier, " + strings.Repeat("fail, ", maxHistory-1) + "suNccess"
	if got.tooltip != wantTip {
		t.Errorf("tooltip %q, want %q", got.tooltip, wantTip)
	}
}
