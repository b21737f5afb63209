package pipeline

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameGraph fails t unless got and want have the same name, attributes,
// nodes and edges in the same order (lines and File aside).
func sameGraph(t *testing.T, got, want *Graph) {
	t.Helper()
	if got.Name != want.Name {
		t.Errorf("name %q, want %q", got.Name, want.Name)
	}
	if !reflect.DeepEqual(got.Attrs, want.Attrs) {
		t.Errorf("graph attributes %q, want %q", got.Attrs, want.Attrs)
	}
	if len(got.Nodes) != len(want.Nodes) {
		t.Fatalf("%d nodes, want %d", len(got.Nodes), len(want.Nodes))
	}
	for i, n := range got.Nodes {
		if w := want.Nodes[i]; n.ID != w.ID || !reflect.DeepEqual(n.Attrs, w.Attrs) {
			t.Errorf("node %d: %s %q, want %s %q", i, n.ID, n.Attrs, w.ID, w.Attrs)
		}
	}
	if len(got.Edges) != len(want.Edges) {
		t.Fatalf("%d edges, want %d", len(got.Edges), len(want.Edges))
	}
	for i, e := range got.Edges {
		w := want.Edges[i]
		if e.From != w.From || e.To != w.To {
			t.Errorf("edge %d: %s->%s, want %s->%s", i, e.From, e.To, w.From, w.To)
		}
		if !reflect.DeepEqual(e.Attrs, w.Attrs) {
			t.Errorf("edge %d (%s->%s): attributes %q, want %q", i, e.From, e.To, e.Attrs, w.Attrs)
		}
	}
}

// roundTrip writes g, checks that every id, key and value of the output
// is quoted, and parses it back.
func roundTrip(t *testing.T, g *Graph) (*Graph, string) {
	t.Helper()
	var b bytes.Buffer
	if err := g.WriteDOT(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	assertAllQuoted(t, out)
	back, err := ParseDOTNamed("written.dot", b.Bytes())
	if err != nil {
		t.Fatalf("parsing the output: %v\n%s", err, out)
	}
	return back, out
}

// assertAllQuoted fails t unless everything in src outside quoted strings
// is DOT's punctuation, the digraph keyword or space: no bare id, key or
// value (a dotted key, a duration) that Graphviz could refuse.
func assertAllQuoted(t *testing.T, src string) {
	t.Helper()
	var bare strings.Builder
	for i := 0; i < len(src); i++ {
		if src[i] != '"' {
			bare.WriteByte(src[i])
			continue
		}
		for i++; i < len(src) && src[i] != '"'; i++ {
			switch src[i] {
			case '\\':
				i++
			case '\n':
				t.Fatalf("a raw newline in a quoted string:\n%s", src)
			}
		}
		if i == len(src) {
			t.Fatalf("an unterminated string:\n%s", src)
		}
		bare.WriteString(" Q ")
	}
	for _, f := range strings.Fields(bare.String()) {
		switch f {
		case "digraph", "{", "}", "Q", "->", "[", "]", "=", ",", ";", "];":
		default:
			t.Errorf("bare %q outside quotes in:\n%s", f, src)
		}
	}
}

func TestWriteDOTExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/pipelines/*.dot")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			g, err := ParseDOTFile(f)
			if err != nil {
				t.Fatal(err)
			}
			back, out := roundTrip(t, g)
			sameGraph(t, back, g)
			// The parser's dialect stays out: morph's source has bare dotted
			// keys (release-review's human.default_choice), the output none.
			if strings.Contains(out, " human.") || strings.Contains(out, "\thuman.") {
				t.Errorf("a bare dotted key in:\n%s", out)
			}
		})
	}
}

func TestWriteDOTDialect(t *testing.T) {
	src := `digraph p {
		default_max_retry = 2
		node [llm_model=claude-sonnet-4, timeout=30s]
		subgraph cluster_a { label="Loop A"; a; b }
		start [shape=Mdiamond, human.default_choice=yes, stack.child_dotfile=child.dot]
		a -> b [weight=-1.5, condition="outcome=success"]
		start -> a
	}`
	g, err := ParseDOTNamed("p.dot", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	back, out := roundTrip(t, g)
	sameGraph(t, back, g)
	for _, want := range []string{
		`digraph "p" {`,
		`	"default_max_retries"="2";`,
		`	"start" ["human.default_choice"="yes", "llm_model"="claude-sonnet-4", "shape"="Mdiamond", "stack.child_dotfile"="child.dot", "timeout"="30s"];`,
		`	"a" -> "b" ["condition"="outcome=success", "weight"="-1.5"];`,
		`"class"="loop-a"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "subgraph") {
		t.Errorf("the output has a subgraph:\n%s", out)
	}
}

func TestWriteDOTHostile(t *testing.T) {
	// Parsed: every escape the parser reads, a label with Graphviz's own
	// escapes, HTML, and text that would close the string or the graph.
	src := `digraph "say \"hi\"\\" {
		label = "a\\b \"q\" \\\" end\\"
		x [label="line1\lline2\l\N", prompt="<script>alert(1)</script>", html=<<b>bold</b>>,
		   note="tab\there\nnew line", raw="multi
line", path="C:\\dir\\n\\t\\", trick="\"]; evil -> x; y [a=\"", comment="// not /* a */ comment # x"]
		x -> y [label="\\", cond="} digraph { z"]
	}`
	g, err := ParseDOTNamed("hostile.dot", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	back, out := roundTrip(t, g)
	sameGraph(t, back, g)
	if len(back.Nodes) != 2 || len(back.Edges) != 1 {
		t.Errorf("a value escaped its string:\n%s", out)
	}
	// Graphviz's label escapes stay as they are; any other backslash is
	// doubled, so it is drawn as a backslash.
	for _, want := range []string{`"line1\lline2\l\N"`, `"C:\\dir\\n\\t\\"`, `"tab` + "\t" + `here\nnew line"`, `"<script>alert(1)</script>"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %s:\n%s", want, out)
		}
	}

	// Built: values the parser cannot give but a Graph may hold.
	built := &Graph{
		Name:  "n\r\n\\",
		Attrs: map[string]string{"a.b c=d": "\\", "": "", "k": "\\\r\n\\\n\\\"\\t\\x"},
		Nodes: []*Node{
			{ID: "graph", Attrs: map[string]string{"label": `\"]; b [`, "x": "\\\\\\"}},
			{ID: "n2", Attrs: map[string]string{}},
		},
		Edges: []*Edge{{From: "graph", To: "n2", Attrs: map[string]string{"label": "\"\n<script>\n\"", "e.f": "30s"}}},
	}
	back, _ = roundTrip(t, built)
	sameGraph(t, back, built)
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteDOTWriteError(t *testing.T) {
	g, err := ParseDOT([]byte(`digraph { a -> b }`))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.WriteDOT(failWriter{}); err == nil || err.Error() != "disk full" {
		t.Errorf("WriteDOT to a failing writer: %v", err)
	}
}
