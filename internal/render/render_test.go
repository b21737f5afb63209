package render

import (
	"github.com/morphhost/morph/internal/safetext"

	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const pipelineDOT = `digraph review_loop {
	label="Review loop"
	start [shape=Mdiamond]
	exit [shape=Msquare]
	plan [style="rounded,dashed"]
	start -> plan -> implement -> review
	review -> implement [label="fail"]
	review -> docs -> exit
	review -> exit
}`

// svgDoc is what the tests read of an SVG: every node's drawing by id.
type svgDoc struct {
	nodes map[string]svgNode
	raw   string
}

// svgNode is a node's <g class="node">: its tooltip and the fill and
// stroke of its shape (the first ellipse, polygon or path).
type svgNode struct {
	tooltip, fill, stroke, text string
}

// parseSVG reads svg as XML (so it is well formed) and collects its nodes.
func parseSVG(t *testing.T, svg []byte) svgDoc {
	t.Helper()
	doc := svgDoc{nodes: map[string]svgNode{}, raw: string(svg)}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	dec.Strict = true
	dec.Entity = xml.HTMLEntity
	var cur *svgNode
	var curID string
	var inTitle, inText bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, svg)
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
			switch {
			case el.Name.Local == "g" && attr("class") == "node":
				cur = &svgNode{}
			case cur == nil:
			case el.Name.Local == "title":
				inTitle = true
			case el.Name.Local == "a":
				cur.tooltip = attr("title")
			case el.Name.Local == "text":
				inText = true
			case cur.fill == "" && (el.Name.Local == "ellipse" || el.Name.Local == "polygon" || el.Name.Local == "path"):
				cur.fill, cur.stroke = attr("fill"), attr("stroke")
			}
		case xml.CharData:
			switch {
			case inTitle:
				curID = string(el)
			case inText:
				cur.text += string(el)
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "title":
				inTitle = false
			case "text":
				inText = false
			case "g":
				if cur != nil && curID != "" {
					doc.nodes[curID] = *cur
					cur, curID = nil, ""
				}
			}
		}
	}
	return doc
}

// legend is the legend's entries, in order, from its nodes' texts.
func (d svgDoc) legend() []string {
	var out []string
	for i := 0; ; i++ {
		n, ok := d.nodes[fmt.Sprintf("morph_legend_%d", i)]
		if !ok {
			return out
		}
		out = append(out, n.text)
	}
}

func TestSVGColoursNodesByStatus(t *testing.T) {
	statuses := map[string]string{"start": "success", "plan": "partial_success", "implement": "retry", "review": "fail", "docs": "skipped",
		"gone": "success"} // not in the graph: ignored
	svg, err := SVG(context.Background(), []byte(pipelineDOT), statuses, Options{Next: "review"})
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, svg)
	want := map[string]svgNode{
		"start":     {fill: "#a6e3a1", stroke: "black", tooltip: "success", text: "start"},
		"plan":      {fill: "#ffd966", stroke: "black", tooltip: "partial_success", text: "plan"},
		"implement": {fill: "#ffb366", stroke: "black", tooltip: "retry", text: "implement"},
		"review":    {fill: "#f28b82", stroke: "#1a73e8", tooltip: "fail (next)", text: "review"},
		"docs":      {fill: "#d0d0d0", stroke: "black", tooltip: "skipped", text: "docs"},
		"exit":      {fill: "#ffffff", stroke: "black", tooltip: "not run", text: "exit"},
	}
	for id, w := range want {
		if got := doc.nodes[id]; got != w {
			t.Errorf("node %s: got %+v, want %+v", id, got, w)
		}
	}
	if _, ok := doc.nodes["gone"]; ok {
		t.Error("a status of a node the graph does not have added the node")
	}
	wantLegend := []string{"success", "partial_success", "retry", "fail", "skipped", "not run", "next"}
	if got := doc.legend(); !slices.Equal(got, wantLegend) {
		t.Errorf("legend %q, want %q", got, wantLegend)
	}
	if !strings.Contains(doc.raw, `stroke-dasharray`) {
		t.Error("plan's dashed style was lost when it was filled")
	}
	if !strings.Contains(doc.raw, ">Review loop</text>") {
		t.Error("the graph's label was lost")
	}
}

func TestSVGLegendShowsOnlyWhatTheRunHas(t *testing.T) {
	// A finished run: every node ran, nothing is next; an unknown status
	// (a newer morph's) gets its own colour and entry.
	statuses := map[string]string{"start": "success", "plan": "success", "implement": "success", "review": "success", "docs": "success", "exit": `wai\ting`}
	svg, err := SVG(context.Background(), []byte(pipelineDOT), statuses, Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, svg)
	if got, want := doc.legend(), []string{"success", "waiting"}; !slices.Equal(got, want) {
		t.Errorf("legend %q, want %q", got, want)
	}
	if got := doc.nodes["exit"]; got.fill != colourOther || got.tooltip != "waiting" {
		t.Errorf("exit with an unknown status: %+v", got)
	}
}

func TestSVGWithoutARunDrawsTheGraphAsWritten(t *testing.T) {
	svg, err := SVG(context.Background(), []byte(`digraph { a [style=filled fillcolor=gold]; a -> b }`), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, svg)
	if len(doc.nodes) != 2 {
		t.Errorf("%d nodes %+v, want a and b", len(doc.nodes), doc.nodes)
	}
	if got := doc.nodes["a"].fill; got != "gold" {
		t.Errorf("a's fill = %q, want gold", got)
	}
	if got := doc.nodes["b"].fill; got != "none" {
		t.Errorf("b's fill = %q, want none", got)
	}
	if got := doc.nodes["b"].tooltip; got != "" {
		t.Errorf("b's tooltip = %q, want none", got)
	}
}

func TestSVGNextWithoutStatuses(t *testing.T) {
	// A run that has just started: nothing ran, start is next.
	svg, err := SVG(context.Background(), []byte(pipelineDOT), nil, Options{Next: "start"})
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, svg)
	start := doc.nodes["start"]
	if start.fill != colourNotRun {
		t.Errorf("start's fill = %q, want %q", start.fill, colourNotRun)
	}
	if start.stroke != colourNext {
		t.Errorf("start's stroke = %q, want %q", start.stroke, colourNext)
	}
	if start.tooltip != "not run (next)" {
		t.Errorf("start's tooltip = %q, want %q", start.tooltip, "not run (next)")
	}
	if got, want := doc.legend(), []string{"not run", "next"}; !slices.Equal(got, want) {
		t.Errorf("legend %q, want %q", got, want)
	}
}

func TestSVGLegendDoesNotTakeTheGraphsIDs(t *testing.T) {
	src := `digraph { morph_legend_0 -> b; subgraph cluster_morph_legend_1_ { c } }`
	svg, err := SVG(context.Background(), []byte(src), map[string]string{"morph_legend_0": "fail"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, svg)
	if got := doc.nodes["morph_legend_0"]; got.text != "morph_legend_0" || got.fill != "#f28b82" {
		t.Errorf("the graph's morph_legend_0 became %+v", got)
	}
	if got := doc.nodes["morph_legend_2_0"]; got.text != "fail" {
		t.Errorf("legend entry: %+v (nodes %v)", got, doc.nodes)
	}
}

// TestSVGEscapesAndDropsLinks gives attributes that reach the SVG a
// payload that would be markup or script if written as it is: ids,
// labels, tooltips, classes and comments must come out as text, and links
// (which a browser follows, javascript: included) not at all.
func TestSVGEscapesAndDropsLinks(t *testing.T) {
	const payload = `\"><script>alert('x')</script><a href=\"javascript:alert(1)\" onload=\"alert(2)`
	src := `digraph "` + payload + `" {
		stylesheet="javascript:alert(3)"
		URL="javascript:alert(4)"
		comment="--><script>alert(5)</script>"
		"<script>alert(\"id\")</script>" [label="` + payload + `" tooltip="` + payload + `" id="` + payload + `" class="` + payload + `" URL="javascript:alert(6)" target="` + payload + `" comment="--><script>alert(7)</script>"]
		b [label=<<table><tr><td href="javascript:alert(8)">x</td></tr></table>> image="/etc/passwd"]
		c [shape=box label="plain" href="javascript:alert(9)"]
		"<script>alert(\"id\")</script>" -> b [label="` + payload + `" URL="javascript:alert(10)" headURL="javascript:alert(11)" labelURL="javascript:alert(12)" edgetooltip="` + payload + `"]
		subgraph cluster_x { URL="javascript:alert(13)"; label="` + payload + `"; c }
	}`
	for _, statuses := range []map[string]string{nil, {`<script>alert("id")</script>`: `fail"><script>alert(14)</script>`}} {
		svg, err := SVG(context.Background(), []byte(src), statuses, Options{})
		if err != nil {
			t.Fatal(err)
		}
		parseSVG(t, svg) // well formed
		dec := xml.NewDecoder(bytes.NewReader(svg))
		dec.Entity = xml.HTMLEntity
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			switch el := tok.(type) {
			case xml.StartElement:
				switch strings.ToLower(el.Name.Local) {
				case "script", "foreignobject", "iframe", "image":
					t.Errorf("element <%s> in the SVG", el.Name.Local)
				}
				for _, a := range el.Attr {
					if name := strings.ToLower(a.Name.Local); strings.HasPrefix(name, "on") || name == "href" || name == "src" {
						t.Errorf("attribute %s=%q on <%s>", a.Name.Local, a.Value, el.Name.Local)
					}
				}
			case xml.ProcInst:
				if el.Target != "xml" {
					t.Errorf("processing instruction <?%s %s?>", el.Target, el.Inst)
				}
			case xml.Comment:
				if strings.Contains(string(el), "<") {
					t.Errorf("markup in a comment: %q", el)
				}
			}
		}
		for _, bad := range []string{"<script", `onload="`, `href="`} { // the payload's, escaped, has &quot;
			if strings.Contains(string(svg), bad) {
				t.Errorf("%q in the SVG", bad)
			}
		}
		if !strings.Contains(string(svg), "&lt;script&gt;alert(&quot;id&quot;)&lt;/script&gt;") {
			t.Errorf("the node id is not in the SVG, escaped:\n%s", svg)
		}
	}
}

// TestSVGRefusesUnsafeSVG: Graphviz 12.1.2 writes font names into the SVG
// unescaped, so these graphs made it write a <script> element.
func TestSVGRefusesUnsafeSVG(t *testing.T) {
	const p = `\"><script>alert(1)</script><x y=\"`
	for _, src := range []string{
		`digraph { a [fontname="` + p + `"] }`,
		`digraph { fontname="` + p + `"; label="g"; a }`,
		`digraph { a -> b [headlabel="h" labelfontname="` + p + `"] }`,
		`digraph { a [label=<<font face="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;">x</font>>] }`,
	} {
		svg, err := SVG(context.Background(), []byte(src), map[string]string{"a": "success"}, Options{})
		if err == nil || !strings.Contains(err.Error(), "graphviz wrote an SVG <script> element") {
			t.Errorf("%s: got %v, want unsafe SVG refused\n%s", src, err, svg)
		}
		assertStillDraws(t)
	}
}

func TestCheckSVG(t *testing.T) {
	const head = `<?xml version="1.0"?><!DOCTYPE svg><svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">`
	for _, tt := range []struct{ body, want string }{
		{`<g id="a"><a xlink:title="t &amp; &#45;"><path fill="url(#l_0)" d="M0,0"/><text>x &lt;</text></a></g><defs><linearGradient id="l_0"><stop offset="0" style="stop-color:red;"/></linearGradient></defs>`, ""},
		{`<g><foreignObject/></g>`, "an SVG <foreignObject> element"},
		{`<g><animate attributeName="href"/></g>`, "an SVG <animate> element"},
		{`<g onclick="alert(1)"/>`, "attribute onclick="},
		{`<a xlink:href="javascript:alert(1)"/>`, "attribute href="},
		{`<path fill="url(https://evil/x)"/>`, "attribute fill="},
		{`<text font-family="x" style="background:URL(//evil/x)"/>`, "attribute style="},
		{`<g>`, "malformed SVG"},
		{`<text>&nbsp;</text>`, "malformed SVG"},
		{`<?xml-stylesheet href="x"?>`, "processing instruction <?xml-stylesheet?>"},
	} {
		err := checkSVG([]byte(head + tt.body + `</svg>`))
		switch {
		case tt.want == "":
			if err != nil {
				t.Errorf("%s: error %v, want none", tt.body, err)
			}
		case err == nil:
			t.Errorf("%s: no error, want one saying %q", tt.body, tt.want)
		case !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: error %q does not say %q", tt.body, err, tt.want)
		}
	}
}

func TestSVGRefusesWhatIsTooBig(t *testing.T) {
	chain := func(n int) string {
		var b strings.Builder
		b.WriteString("digraph {")
		for i := range n {
			fmt.Fprintf(&b, "n%d -> n%d;", i, i+1)
		}
		return b.String() + "}"
	}
	for _, tt := range []struct {
		name, src string
		opts      Options
		want      string
	}{
		{"source", "digraph { a }" + strings.Repeat(" ", 100), Options{MaxBytes: 100}, "the source is larger than 100 bytes"},
		{"default source", "digraph {}" + strings.Repeat(" ", DefaultMaxBytes), Options{}, "the source is larger than 4194304 bytes"},
		{"nodes", chain(10), Options{MaxNodes: 10}, "the graph has 11 nodes, over the limit of 10"},
		{"edges", chain(10), Options{MaxEdges: 9}, "the graph has 10 edges, over the limit of 9"},
		{"default nodes", chain(DefaultMaxNodes), Options{}, "the graph has 1001 nodes, over the limit of 1000"},
		{"syntax", "digraph { a -> }", Options{}, "parsing the DOT: syntax error in line 1"},
		{"empty", "", Options{}, "the source has no graph"},
		{"comments only", "/* a */ // b\n# c\n", Options{}, "the source has no graph"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := SVG(context.Background(), []byte(tt.src), nil, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// TestSVGHostileGraphs are graphs that made Graphviz misbehave: return
// garbage or nothing with no error, work for tens of seconds, or write
// megabytes per node. Each is refused or bounded, and the instance still
// draws the next graph.
func TestSVGHostileGraphs(t *testing.T) {
	nested := func(open, inner, close string, n int) string {
		return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
	}
	for _, tt := range []struct {
		name, src string
		want      string // the error; "" for a bounded success
		maxSVG    int    // for a success
	}{
		// 500 nested clusters: a few bytes of garbage and no error.
		{"nested clusters", "digraph {" + nested("subgraph cluster_x {", "a -> b", "}", 500) + "}", "braces are nested 501 deep, over the limit of 64", 0},
		{"nested subgraphs", "digraph {" + nested("{", "a -> b", "}", 20000) + "}", "braces are nested 20001 deep", 0},
		{"braces in strings and comments", `digraph { a [label="` + strings.Repeat("{", 100) + `"] /* ` + strings.Repeat("{", 100) + ` */ // {{{
# {{{
b [label=<` + strings.Repeat("{", 100) + `>] }`, "", 10 << 10},
		{"nested clusters at the limit", "digraph {" + nested("subgraph cluster_x {", "a -> b", "}", 63) + "}", "", 100 << 10},
		// 10,000 nested record fields: an empty SVG; 100,000: 35 s.
		{"nested record", `digraph { node [shape=Mrecord]; a [label="` + nested("{", "x", "}", 10000) + `"] }`, "its record label nests 10000 fields deep, over the limit of 64", 0},
		{"escaped braces are text", `digraph { a [shape=record label="` + strings.Repeat(`\{`, 100) + `"] }`, "", 10 << 10},
		// peripheries=100000: 8.6 MB of SVG per node.
		{"peripheries", "digraph { node [peripheries=100000]; a -> b -> c }", "", 20 << 10},
		{"sides", "digraph { node [shape=polygon sides=100000]; a -> b -> c }", "", 20 << 10},
		// 2,000 layers: 75 MB of SVG from 50 nodes.
		{"layers", `digraph { layers="` + strings.Repeat("l:", 2000) + `l"; node [layer=all]; a -> b }`, "the graph has layers", 0},
		// Deeply nested HTML is refused by Graphviz's own parser: the
		// label is dropped, the node drawn.
		{"nested HTML", "digraph { a [label=<" + nested("<table><tr><td>", "x", "</td></tr></table>", 5000) + ">] }", "", 10 << 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			svg, err := SVG(context.Background(), []byte(tt.src), nil, Options{Timeout: 20 * time.Second})
			switch {
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want %q", err, tt.want)
			case tt.want == "" && err != nil:
				t.Errorf("got %v", err)
			case tt.want == "" && len(svg) > tt.maxSVG:
				t.Errorf("%d bytes of SVG, want at most %d", len(svg), tt.maxSVG)
			case tt.want == "":
				parseSVG(t, svg)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
			assertStillDraws(t)
		})
	}
}

// TestSVGUsesDot: the graph's layout attribute cannot pick another engine
// (dot draws a chain in one column; circo on a circle).
func TestSVGUsesDot(t *testing.T) {
	svg, err := SVG(context.Background(), []byte(`digraph { layout=circo; node [shape=ellipse]; a -> b -> c }`), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	xs := regexp.MustCompile(`<ellipse [^>]*cx="([^"]+)"`).FindAllStringSubmatch(string(svg), -1)
	if len(xs) != 3 {
		t.Fatalf("%d nodes drawn (%q), want 3", len(xs), xs)
	}
	if xs[0][1] != xs[1][1] || xs[1][1] != xs[2][1] {
		t.Errorf("the nodes' x: %q, want one column", xs)
	}
}

// TestSVGTimeout: SVG returns at its deadline while the render it started
// runs on (Graphviz cannot be stopped), and a render asked for meanwhile
// waits for the instance within its own deadline. The render is one that
// ends when the test says (drawing).
func TestSVGTimeout(t *testing.T) {
	release, ended := make(chan struct{}), make(chan struct{})
	drawing = func(ctx context.Context, src []byte, statuses map[string]string, opts Options) ([]byte, error) {
		defer close(ended)
		<-release
		return nil, errors.New("abandoned")
	}
	t.Cleanup(func() {
		drawing = draw
		select {
		case <-release:
		default:
			close(release)
		}
	})
	_, err := SVG(context.Background(), []byte("digraph { slow }"), nil, Options{Timeout: 50 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "graphviz did not finish in") {
		t.Fatalf("got %v, want a deadline", err)
	}
	_, err = SVG(context.Background(), []byte("digraph { a }"), nil, Options{Timeout: 20 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for an earlier render still running") {
		t.Errorf("got %v, want a deadline while waiting", err)
	}
	drawing = draw
	close(release)
	<-ended
	assertStillDraws(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err = SVG(ctx, []byte("digraph { a }"), nil, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want canceled", err)
	}
}

func TestWithFilled(t *testing.T) {
	for in, want := range map[string]string{"": "filled", "rounded": "rounded,filled", "rounded, filled": "rounded, filled", "filled": "filled", "filledx": "filledx,filled"} {
		if got := withFilled(in); got != want {
			t.Errorf("withFilled(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkSVG renders a 50-node pipeline with its statuses: a chain with
// a retry loop every fifth node, as a run's render would be.
func BenchmarkSVG(b *testing.B) {
	var src strings.Builder
	statuses := map[string]string{}
	src.WriteString("digraph bench {\n")
	for i := range 49 {
		fmt.Fprintf(&src, "  n%d -> n%d\n", i, i+1)
		if i%5 == 4 {
			fmt.Fprintf(&src, "  n%d -> n%d [label=\"retry\"]\n", i, i-3)
		}
		statuses[fmt.Sprintf("n%d", i)] = []string{"success", "partial_success", "retry", "fail", "skipped"}[i%5]
	}
	src.WriteString("}\n")
	ctx := context.Background()
	for b.Loop() {
		if _, err := SVG(ctx, []byte(src.String()), statuses, Options{Next: "n49"}); err != nil {
			b.Fatal(err)
		}
	}
}

// assertStillDraws fails t unless a small graph still renders.
func assertStillDraws(t *testing.T) {
	t.Helper()
	svg, err := SVG(context.Background(), []byte("digraph { ok1 -> ok2 }"), map[string]string{"ok1": "success"}, Options{})
	if err != nil {
		t.Fatalf("the next render failed: %v", err)
	}
	if doc := parseSVG(t, svg); doc.nodes["ok1"].fill != "#a6e3a1" || doc.nodes["ok2"].text != "ok2" {
		t.Fatalf("the next render drew %+v", doc.nodes)
	}
}

// TestSVGEscapesTerminalControls: a label's C1 control or bidi override
// reaches the SVG as a character reference, so the SVG on a terminal (-o -)
// cannot drive it, and a browser still shows the character. (C0 controls
// such as ESC are not XML: checkSVG refuses them.)
func TestSVGEscapesTerminalControls(t *testing.T) {
	src := "digraph p { a [label=\"x\u009b2Jy\u202ez\"] }"
	svg, err := SVG(context.Background(), []byte(src), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsFunc(svg, safetext.Unsafe) {
		t.Fatalf("raw control characters in the SVG: %q", svg)
	}
	for _, ref := range []string{"&#x9b;", "&#x202e;"} {
		if !bytes.Contains(svg, []byte(ref)) {
			t.Errorf("no %s in the SVG", ref)
		}
	}
	parseSVG(t, svg)
}
