package render

import (
	"bytes"
	"encoding/xml"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/morphhost/morph/internal/renderproc"
)

// box is a rectangle in the SVG's coordinates (y down).
type box struct{ x0, y0, x1, y1 float64 }

func (b box) String() string {
	return strconv.FormatFloat(b.x0, 'f', 1, 64) + "," + strconv.FormatFloat(b.y0, 'f', 1, 64) + " - " +
		strconv.FormatFloat(b.x1, 'f', 1, 64) + "," + strconv.FormatFloat(b.y1, 'f', 1, 64)
}

func (b box) contains(x, y float64) bool { return x >= b.x0 && x <= b.x1 && y >= b.y0 && y <= b.y1 }

// svgText is one <text> of the drawing: its content, an upper bound of its
// box, and the edge it labels ("" when it is not an edge's).
type svgText struct {
	text, edge string
	box        box
}

// geometry is what the geometry tests read of an SVG: the viewBox, every
// text's box and every edge's path as a polyline, in the viewBox's
// coordinates.
type geometry struct {
	view  box
	texts []svgText
	paths map[string][][2]float64 // by edge title
}

var numbers = regexp.MustCompile(`-?[0-9]*\.?[0-9]+(?:e-?[0-9]+)?`)

func floats(t *testing.T, s string) []float64 {
	t.Helper()
	var out []float64
	for _, m := range numbers.FindAllString(s, -1) {
		f, err := strconv.ParseFloat(m, 64)
		if err != nil {
			t.Fatalf("a number in %q: %v", s, err)
		}
		out = append(out, f)
	}
	return out
}

// parseGeometry reads svg. A text's width is bounded by 0.6 em a
// character (wider than Helvetica's widest letters on average), its
// height by the font size, from 0.8 em above its baseline.
func parseGeometry(t *testing.T, svg []byte) geometry {
	t.Helper()
	geo := geometry{paths: map[string][][2]float64{}}
	var dx, dy float64
	var edge, title string
	var text *svgText
	var inTitle bool
	var size, x, y float64
	var anchor string
	dec := xml.NewDecoder(bytes.NewReader(svg))
	dec.Entity = xml.HTMLEntity
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
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
			switch el.Name.Local {
			case "svg":
				v := floats(t, attr("viewBox"))
				if len(v) != 4 {
					t.Fatalf("viewBox %q", attr("viewBox"))
				}
				geo.view = box{v[0], v[1], v[0] + v[2], v[1] + v[3]}
			case "g":
				switch attr("class") {
				case "graph":
					tr := attr("transform")
					if !strings.Contains(tr, "scale(1 1)") {
						t.Fatalf("the graph is scaled: %s", tr)
					}
					_, tl, _ := strings.Cut(tr, "translate(")
					v := floats(t, tl)
					dx, dy = v[0], v[1]
				case "edge":
					edge = "?"
				case "node", "cluster":
					edge = ""
				}
			case "title":
				inTitle = true
				title = ""
			case "text":
				text = &svgText{edge: edge}
				size = 14
				if s := attr("font-size"); s != "" {
					size = floats(t, s)[0]
				}
				x, y = floats(t, attr("x"))[0]+dx, floats(t, attr("y"))[0]+dy
				anchor = attr("text-anchor")
			case "path":
				if edge != "" {
					geo.paths[edge] = append(geo.paths[edge], bezier(floats(t, attr("d")), dx, dy)...)
				}
			}
		case xml.CharData:
			if inTitle {
				title += string(el)
			}
			if text != nil {
				text.text += string(el)
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "title":
				inTitle = false
				if edge != "" {
					edge = title
				}
			case "text":
				// Padding is not ink: the text's box is that of the
				// rest, at the same anchor.
				text.text = strings.TrimSpace(text.text)
				w := 0.6 * size * float64(utf8.RuneCountInString(text.text))
				x0 := x
				switch anchor {
				case "middle":
					x0 = x - w/2
				case "end":
					x0 = x - w
				}
				text.box = box{x0, y - 0.8*size, x0 + w, y + 0.2*size}
				geo.texts = append(geo.texts, *text)
				text = nil
			}
		}
	}
	return geo
}

// bezier samples the cubic Béziers of a path "M x,y C x1,y1 x2,y2 x3,y3 ..."
// (Graphviz's edges), moved by dx, dy.
func bezier(v []float64, dx, dy float64) [][2]float64 {
	if len(v) < 2 {
		return nil
	}
	pts := [][2]float64{{v[0] + dx, v[1] + dy}}
	for i := 2; i+5 < len(v); i += 6 {
		p0 := pts[len(pts)-1]
		p1, p2, p3 := [2]float64{v[i] + dx, v[i+1] + dy}, [2]float64{v[i+2] + dx, v[i+3] + dy}, [2]float64{v[i+4] + dx, v[i+5] + dy}
		for s := 1; s <= 16; s++ {
			u := float64(s) / 16
			a, b, c, d := (1-u)*(1-u)*(1-u), 3*(1-u)*(1-u)*u, 3*(1-u)*u*u, u*u*u
			pts = append(pts, [2]float64{a*p0[0] + b*p1[0] + c*p2[0] + d*p3[0], a*p0[1] + b*p1[1] + c*p2[1] + d*p3[1]})
		}
	}
	return pts
}

// crosses says whether the polyline pts passes through b: a sampled point
// inside it (the samples are a few points apart).
func crosses(pts [][2]float64, b box) bool {
	for i, p := range pts {
		if b.contains(p[0], p[1]) {
			return true
		}
		if i > 0 { // the midpoint too, for long straight segments
			q := pts[i-1]
			for s := 1; s < 8; s++ {
				f := float64(s) / 8
				if b.contains(q[0]+f*(p[0]-q[0]), q[1]+f*(p[1]-q[1])) {
					return true
				}
			}
		}
	}
	return false
}

// The drawing (plan-implement-verify.dot as morph passes it to
// Graphviz): its title was clipped by a viewer's font wider than
// Graphviz's estimate, and the labels of the two edges between implement
// and verify were drawn on them.
const planImplementVerify = `digraph "plan_implement_verify" {
	"label"="Plan, implement, verify";
	"start" ["shape"="Mdiamond"];
	"plan" ["label"="Plan"];
	"implement" ["label"="Implement"];
	"verify" ["label"="Verify", "shape"="diamond"];
	"done" ["shape"="Msquare"];
	"start" -> "plan";
	"plan" -> "implement";
	"implement" -> "verify";
	"verify" -> "done" ["condition"="outcome=success", "label"="pass"];
	"verify" -> "implement" ["condition"="outcome=fail", "label"="fix"];
}`

func TestSVGLabelsFitAndKeepOffTheEdges(t *testing.T) {
	for name, run := range map[string]Options{
		"graph": {},
		"run": {
			Nodes: map[string]renderproc.NodeRun{"implement": {Visits: 3, Attempts: 4, History: []string{"success", "success", "success"}},
				"verify": {Visits: 3, History: []string{"fail", "fail", "success"}}},
			Edges: []renderproc.EdgeTaken{{From: "start", To: "plan", Count: 1}, {From: "plan", To: "implement", Count: 1},
				{From: "implement", To: "verify", Count: 3}, {From: "verify", To: "implement", Count: 2}, {From: "verify", To: "done", Count: 1}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			statuses := map[string]string(nil)
			if run.Nodes != nil {
				statuses = map[string]string{"start": "success", "plan": "success", "implement": "success", "verify": "success", "done": "success"}
			}
			svg, err := SVG(t.Context(), []byte(planImplementVerify), statuses, run)
			if err != nil {
				t.Fatal(err)
			}
			geo := parseGeometry(t, svg)
			if len(geo.texts) == 0 || len(geo.paths) != 5 {
				t.Fatalf("%d texts, %d edges:\n%s", len(geo.texts), len(geo.paths), svg)
			}
			const margin = 4
			inner := box{geo.view.x0 + margin, geo.view.y0 + margin, geo.view.x1 - margin, geo.view.y1 - margin}
			for _, tx := range geo.texts {
				if !inner.contains(tx.box.x0, tx.box.y0) || !inner.contains(tx.box.x1, tx.box.y1) {
					t.Errorf("%q (%s) is not inside the drawing (%s) with a %d pt margin", tx.text, tx.box, geo.view, margin)
				}
				for e, pts := range geo.paths {
					if tx.edge != "" && crosses(pts, tx.box) {
						t.Errorf("the label %q of %s (%s) is drawn across the edge %s", tx.text, tx.edge, tx.box, e)
					}
				}
			}
			if t.Failed() {
				t.Logf("%s", svg)
			}
		})
	}
}
