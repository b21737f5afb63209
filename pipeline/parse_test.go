package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// dumpDOTGraph renders a parsed graph canonically (sorted attributes, source
// order of nodes and edges, lines) so a table can state the whole result.
func dumpDOTGraph(g *Graph) string {
	var b strings.Builder
	attrs := func(m map[string]string) {
		for _, k := range sortedKeys(m) {
			fmt.Fprintf(&b, " %s=%q", k, m[k])
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "graph %q", g.Name)
	attrs(g.Attrs)
	for _, n := range g.Nodes {
		fmt.Fprintf(&b, "node %s@%d", n.ID, n.Line)
		attrs(n.Attrs)
	}
	for _, e := range g.Edges {
		fmt.Fprintf(&b, "edge %s->%s@%d", e.From, e.To, e.Line)
		attrs(e.Attrs)
	}
	return b.String()
}

// trimDump drops the indentation of a raw-string expectation.
func trimDump(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		b.WriteString(strings.TrimSpace(l))
		b.WriteByte('\n')
	}
	return b.String()
}

func TestParseDOTSemantics(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"minimal", `digraph G { a -> b }`, `
			graph "G"
			node a@1
			node b@1
			edge a->b@1`},
		{"empty graph, anonymous", `digraph {}`, `graph ""`},
		{"quoted graph name and ids", `digraph "My Pipe" { "a" -> "b" }`, `
			graph "My Pipe"
			node a@1
			node b@1
			edge a->b@1`},
		{"escapes unescaped, unknown kept", `digraph { a [label="say \"hi\"\nnext\tTab \\ back \l keep"] }`, `
			graph ""
			node a@1 label="say \"hi\"\nnext\tTab \\ back \\l keep"`},
		{"raw newline in a string, lines after it", "digraph {\n a [prompt=\"one\ntwo\"]\n b\n}", `
			graph ""
			node a@2 prompt="one\ntwo"
			node b@4`},
		{"backslash-newline continues a string", "digraph {\n a [label=\"one\\\ntwo\", x=\"crlf\\\r\nz\"]\n b }", `
			graph ""
			node a@2 label="onetwo" x="crlfz"
			node b@5`},
		{"concatenation", "digraph { a [prompt=\"one \" + \"two\"\n + /* c */ \" three\"] b }", `
			graph ""
			node a@1 prompt="one two three"
			node b@2`},
		{"HTML string keeps its inner text", `digraph { a [label=<<b>bold</b> & <i>x</i>>] }`, `
			graph ""
			node a@1 label="<b>bold</b> & <i>x</i>"`},
		{"comments and # lines", "# 1 \"cpp line\"\ndigraph {\n /* a\n block */ a // x\n  # cpp\n b /* */ -> c\n}", `
			graph ""
			node a@4
			node b@6
			node c@6
			edge b->c@6`},
		{"optional semicolons and separators", `digraph { a; b; a -> b; c [x=1, y=2; z=3 w=4]; }`, `
			graph ""
			node a@1
			node b@1
			node c@1 w="4" x="1" y="2" z="3"
			edge a->b@1`},
		{"dotted keys, durations, numbers, hyphenated words", "digraph {\n human.default_choice=yes\n a [stack.child_dotfile=child.dot, timeout=30s, delay=250ms, n=-5, f=.5, g=-.5, v=1.5.3, model=claude-sonnet-4, label=Café]\n}", `
			graph "" human.default_choice="yes"
			node a@3 delay="250ms" f=".5" g="-.5" label="Café" model="claude-sonnet-4" n="-5" stack.child_dotfile="child.dot" timeout="30s" v="1.5.3"`},
		{"graph attributes, rename of default_max_retry", `digraph { graph [goal="g", label=L]; rankdir=LR; default_max_retry=3 }`, `
			graph "" default_max_retries="3" goal="g" label="L" rankdir="LR"`},
		{"later graph attribute wins", `digraph { goal=a; graph [goal=b] }`, `
			graph "" goal="b"`},
		{"node defaults apply later, merge later wins", "digraph {\n node [shape=box]\n a\n node [shape=diamond, x=1]\n b\n a -> c\n a [shape=hexagon]\n}", `
			graph ""
			node a@3 shape="hexagon"
			node b@5 shape="diamond" x="1"
			node c@6 shape="diamond" x="1"
			edge a->c@6`},
		{"a node statement merges only its own attributes", "digraph {\n a\n node [shape=box]\n a [x=1]\n}", `
			graph ""
			node a@2 x="1"`},
		{"edge defaults and chained attrs", "digraph {\n edge [weight=1, label=d]\n a -> b -> c [label=x]\n edge [weight=2]\n c -> a\n}", `
			graph ""
			node a@3
			node b@3
			node c@3
			edge a->b@3 label="x" weight="1"
			edge b->c@3 label="x" weight="1"
			edge c->a@5 label="d" weight="2"`},
		{"a chain split over lines takes the target's line", "digraph {\n a\n  -> b\n  -> c\n}", `
			graph ""
			node a@2
			node b@3
			node c@4
			edge a->b@3
			edge b->c@4`},
		{"node line is the line first naming it", "digraph {\n a -> b\n b [x=1]\n}", `
			graph ""
			node a@2
			node b@2 x="1"
			edge a->b@2`},
		{"attribute repeated in one list: later wins", `digraph { a [x=1, x=2] }`, `
			graph ""
			node a@1 x="2"`},
		{"subgraph scope and class (attractor 2.10)", `digraph {
			node [timeout=900s]
			subgraph cluster_loop {
				label = "Loop A"
				node [thread_id="loop-a"]
				Plan [label="Plan next step"]
				Implement [label="Implement", timeout="1800s"]
				edge [weight=5]
				Plan -> Implement
			}
			after
			Implement -> after
		}`, `
			graph ""
			node Plan@6 class="loop-a" label="Plan next step" thread_id="loop-a" timeout="900s"
			node Implement@7 class="loop-a" label="Implement" thread_id="loop-a" timeout="1800s"
			node after@11 timeout="900s"
			edge Plan->Implement@9 weight="5"
			edge Implement->after@12`},
		{"subgraph label set after its nodes, as graph [label]", "digraph {\n subgraph { a; graph [label=\"Review & Merge!\", color=red] }\n}", `
			graph ""
			node a@2 class="review--merge"`},
		{"subgraph attributes other than label stay out of the graph", `digraph { subgraph s { rank=same; label=x; a } }`, `
			graph ""
			node a@1 class="x"`},
		{"class appended to explicit and default classes, no duplicates", `digraph {
			node [class="fast"]
			subgraph { label="Loop A"; a [class="x, loop-a"]; b; b; b [y=1] }
		}`, `
			graph ""
			node a@3 class="x, loop-a"
			node b@3 class="fast,loop-a" y="1"`},
		{"nested subgraphs: outer class first", `digraph {
			subgraph { label=Outer; subgraph { label=Inner; a } b }
		}`, `
			graph ""
			node a@2 class="outer,inner"
			node b@2 class="outer"`},
		{"only nodes declared or first referenced inside get the class", `digraph {
			a
			subgraph { label=L; a -> b; c }
			subgraph { label=M; c [x=1] }
		}`, `
			graph ""
			node a@2
			node b@3 class="l"
			node c@3 class="l,m" x="1"
			edge a->b@3`},
		{"label without letters gives no class", `digraph { subgraph { label="!!"; a } }`, `
			graph ""
			node a@1`},
		{"subgraph defaults do not leak out", `digraph { { node [shape=x]; edge [w=1]; a -> b } c -> d }`, `
			graph ""
			node a@1 shape="x"
			node b@1 shape="x"
			node c@1
			node d@1
			edge a->b@1 w="1"
			edge c->d@1`},
		{"subgraph endpoints expand to an edge per node", "digraph {\n a -> {b\n c} -> d [w=1]\n}", `
			graph ""
			node a@2
			node b@2
			node c@3
			node d@3
			edge a->b@2 w="1"
			edge a->c@3 w="1"
			edge b->d@3 w="1"
			edge c->d@3 w="1"`},
		{"subgraph endpoint holding edges and nested subgraphs", `digraph { subgraph s { x -> y { z } } -> w }`, `
			graph ""
			node x@1
			node y@1
			node z@1
			node w@1
			edge x->y@1
			edge x->w@1
			edge y->w@1
			edge z->w@1`},
		{"empty subgraph endpoint adds no edge", `digraph { a -> {} }`, `
			graph ""
			node a@1`},
		{"keywords in any case; a keyword after '=' is a value", `DiGraph G { NODE [shape=box]; Edge [type=graph]; a -> b [k=Node] }`, `
			graph "G"
			node a@1 shape="box"
			node b@1 shape="box"
			edge a->b@1 k="Node" type="graph"`},
		{"a quoted keyword is an id", `digraph { "node" -> "edge" }`, `
			graph ""
			node node@1
			node edge@1
			edge node->edge@1`},
		{"byte order mark and CRLF lines", "\xEF\xBB\xBFdigraph {\r\n a\r\n b\r\n}\r\n", `
			graph ""
			node a@2
			node b@3`},
		{"self loop and duplicate edges kept", `digraph { a -> a; a -> b; a -> b }`, `
			graph ""
			node a@1
			node b@1
			edge a->a@1
			edge a->b@1
			edge a->b@1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseDOT([]byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := dumpDOTGraph(g), trimDump(tt.want); got != want {
				t.Errorf("got:\n%swant:\n%s", got, want)
			}
			for _, n := range g.Nodes {
				if g.Node(n.ID) != n {
					t.Errorf("g.Node(%q) does not find the node: the index was not built", n.ID)
				}
			}
		})
	}
}

// Spec 2.4: "Duration | Integer + unit suffix | 900s, 15m, 2h, 250ms, 1d".
// Published pipelines also write a bare integer (timeout="300"): morph
// reads it as seconds, and attr_value warns (TestValidateRules).
func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"250ms", 250 * time.Millisecond, true},
		{"900s", 900 * time.Second, true},
		{"1h30m", 90 * time.Minute, true},
		{"1d", 24 * time.Hour, true},
		{"300", 300 * time.Second, true},
		{" 45 ", 45 * time.Second, true},
		{"0", 0, true},
		{"-300", 0, false},
		{"+300", 0, false},
		{"1.5", 0, false},
		{"99999999999", 0, false}, // past the bound: no overflow
		{"5 parsecs", 0, false},
	} {
		got, err := ParseDuration(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestParseDOTErrors(t *testing.T) {
	tests := []struct {
		name, src string
		lim       ParseLimits
		line      int
		msg       string
	}{
		{"strict", "strict digraph {}", ParseLimits{}, 1, "strict graphs are not supported"},
		{"undirected graph", "\ngraph G { a -- b }", ParseLimits{}, 2, "undirected `graph` is not supported"},
		{"undirected edge", "digraph {\n a -- b }", ParseLimits{}, 2, "undirected edge '--'"},
		{"two graphs", "digraph a {}\n\ndigraph b {}", ParseLimits{}, 3, "after the digraph closed on line 1: a file holds exactly one digraph"},
		{"tokens after the graph", "digraph a {\n}\nx", ParseLimits{}, 3, `unexpected "x"`},
		{"port", "digraph {\n a:p -> b }", ParseLimits{}, 2, "ports (node:port) are not supported"},
		{"compass port", "digraph {\n a -> b:n }", ParseLimits{}, 2, "ports"},
		{"empty source", "", ParseLimits{}, 0, "no digraph"},
		{"only comments", "// nothing\n/* here */\n", ParseLimits{}, 0, "no digraph"},
		{"not a digraph", "\n\nnode [x=1]", ParseLimits{}, 3, "expected `digraph name {` to open the pipeline; got `node`"},
		{"missing brace", "digraph G\n a -> b", ParseLimits{}, 2, `expected the graph's name or '{' after ` + "`digraph`; got \"a\""},
		{"ends in the header", "digraph G", ParseLimits{}, 1, "ends before the digraph's '{'"},
		{"id starting with a digit", "digraph {\n\n 1a -> b }", ParseLimits{}, 3, `node id "1a" is not valid`},
		{"quoted id with a space", "digraph {\n \"my node\" }", ParseLimits{}, 2, `node id "my node" is not valid`},
		{"dotted node id", "digraph {\n a -> b.c }", ParseLimits{}, 2, `node id "b.c" is not valid`},
		{"duration as node", "digraph {\n a\n 30s }", ParseLimits{}, 3, `node id "30s"`},
		{"html id that is not a name", "digraph {\n <a b> }", ParseLimits{}, 2, `node id "a b"`},
		{"empty quoted id", "digraph {\n \"\" }", ParseLimits{}, 2, `node id "" is not valid`},
		{"unterminated string", "digraph {\n a [label=\"abc\n\n }", ParseLimits{}, 2, "unterminated string"},
		{"string ending in a backslash", "digraph {\n a [label=\"abc\\", ParseLimits{}, 2, "unterminated string"},
		{"unterminated comment", "digraph {\n a\n /* b\n }", ParseLimits{}, 3, "unterminated /* comment"},
		{"unterminated HTML string", "digraph {\n a [label=<<b>x</b>]\n }", ParseLimits{}, 2, "unterminated HTML string"},
		{"unclosed brace names the innermost", "digraph {\n a\n subgraph {\n b\n", ParseLimits{}, 3, "the '{' opened here is never closed"},
		{"unclosed bracket at EOF", "digraph {\n a [x=1\n", ParseLimits{}, 2, "the '[' opened here is never closed"},
		{"brace inside brackets", "digraph {\n a [x=1\n b=2\n}", ParseLimits{}, 4, "'}' inside an attribute list: close the '[' of line 2"},
		{"bracket inside brackets", "digraph {\n a [x=1\n b [y=2] }", ParseLimits{}, 3, "'[' inside an attribute list: close the '[' of line 2"},
		{"stray bracket", "digraph {\n a ]\n}", ParseLimits{}, 2, "']' without a '['"},
		{"syntax: missing target", "digraph {\n a -> \n}", ParseLimits{}, 3, "syntax error at '}': expected one of '{', `subgraph` or an id"},
		{"syntax: attribute without value", "digraph {\n a [x]\n}", ParseLimits{}, 2, "syntax error at ']': expected '='"},
		{"syntax: quoted token is shown as written", "digraph {\n node \"long value here\" }", ParseLimits{}, 2, `syntax error at "long value here": expected '['`},
		{"syntax: double assignment", "digraph {\n\n a = b = c }", ParseLimits{}, 3, "syntax error at '='"},
		{"hash mid-line", "digraph {\n a [color=#ff0000] }", ParseLimits{}, 2, `unexpected '#': quote values`},
		{"stray plus", "digraph {\n a [x=1 + 2] }", ParseLimits{}, 2, `'+' joins two quoted strings`},
		{"plus before a non-string", "digraph {\n a [x=\"1\" + 2] }", ParseLimits{}, 2, `'+' joins two quoted strings`},
		{"lone minus", "digraph {\n a - b }", ParseLimits{}, 2, `unexpected '-'`},
		{"other character", "digraph {\n a [p=$goal] }", ParseLimits{}, 2, `unexpected '$'`},
		{"NUL byte", "digraph {\n a\x00 }", ParseLimits{}, 2, "a NUL byte"},
		{"NUL byte in a string", "digraph {\n\n a [x=\"\x00\"] }", ParseLimits{}, 3, "a NUL byte"},
		{"invalid UTF-8", "digraph {\n a [x=\"\xff\"] }", ParseLimits{}, 2, "invalid UTF-8"},
		{"first of NUL and bad UTF-8", "digraph {\n\xff\n\x00 }", ParseLimits{}, 2, "invalid UTF-8"},
		{"too large", "digraph { a -> b }", ParseLimits{MaxBytes: 10}, 0, "source is 18 bytes, over the limit of 10"},
		{"too deep", "digraph {\n {\n {\n { a } } } }", ParseLimits{MaxDepth: 3}, 4, "nested more than 3 deep"},
		{"too many nodes", "digraph {\n a -> b\n c }", ParseLimits{MaxNodes: 2}, 3, "more than 2 nodes"},
		{"too many arrows", "digraph {\n a -> b\n b -> c -> d }", ParseLimits{MaxEdges: 2}, 3, "more than 2 edges"},
		{"expansion over the edge limit", "digraph {\n {a b} -> {c\n d} }", ParseLimits{MaxEdges: 3}, 2, "more than 3 edges"},
		{"string too long", "digraph {\n a [x=\"12345\"] }", ParseLimits{MaxAttrBytes: 4}, 2, "string longer than 4 bytes"},
		{"bare value too long", "digraph {\n a [x=12345] }", ParseLimits{MaxAttrBytes: 4}, 2, "value longer than 4 bytes"},
		{"joined value too long", "digraph {\n a [x=\"12\"\n + \"345\"] }", ParseLimits{MaxAttrBytes: 4}, 2, "value longer than 4 bytes"},
		{"string with escapes too long", "digraph {\n a [x=\"\\n\\n\\n\\n\\n\"] }", ParseLimits{MaxAttrBytes: 4}, 2, "string longer than 4 bytes"},
		{"too many tokens", "digraph {\n a b c }", ParseLimits{MaxTokens: 5}, 2, "more than 5 tokens"},
		{"too many attribute values", "digraph {\n node [a=1, b=2]\n x\n y }", ParseLimits{MaxAttrs: 5}, 4, "more than 5 attribute values"},
		{"subgraph default copies count", "digraph {\n node [a=1, b=2]\n { node [c=1] } }", ParseLimits{MaxAttrs: 4}, 3, "more than 4 attribute values"},
		{"class text counts against MaxBytes", "digraph {\n node [class=\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]\n subgraph { label=b; n1 n2 n3 n4 n5 } }",
			ParseLimits{MaxBytes: 300}, 3, "class lists built from subgraph labels exceed 300 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseDOTWith("p.dot", []byte(tt.src), tt.lim)
			if err == nil {
				t.Fatalf("parsed %d nodes; want an error", len(g.Nodes))
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%T %v; want a *ParseError", err, err)
			}
			if pe.File != "p.dot" {
				t.Errorf("File = %q, want p.dot", pe.File)
			}
			if pe.Line != tt.line {
				t.Errorf("Line = %d, want %d (%s)", pe.Line, tt.line, pe.Msg)
			}
			if !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("Msg = %q, want it to say %q", pe.Msg, tt.msg)
			}
		})
	}
}

// TestParseDOTLimitsInclusive checks that each limit admits its own value:
// the limits count what the graph holds (unescaped text, nodes, edges), not
// the source's spelling of it.
func TestParseDOTLimitsInclusive(t *testing.T) {
	src := "digraph {\n a [x=\"\\n\\n\\n\\n\", y=\"ab\" + \"cd\"]\n a -> {b}\n {{c}} }"
	g, err := ParseDOTWith("", []byte(src), ParseLimits{MaxAttrBytes: 4, MaxNodes: 3, MaxEdges: 1, MaxDepth: 3, MaxAttrs: 2})
	if err != nil {
		t.Fatal(err)
	}
	a := g.Node("a")
	if a == nil {
		t.Fatalf("no node a in %s", dumpDOTGraph(g))
	}
	if a.Attrs["x"] != "\n\n\n\n" {
		t.Errorf("a's x = %q, want %q", a.Attrs["x"], "\n\n\n\n")
	}
	if a.Attrs["y"] != "abcd" {
		t.Errorf("a's y = %q, want %q", a.Attrs["y"], "abcd")
	}
}

func TestParseErrorFormat(t *testing.T) {
	for _, tt := range []struct {
		e    ParseError
		want string
	}{
		{ParseError{File: "a.dot", Line: 3, Msg: "bad"}, "a.dot:3: bad"},
		{ParseError{Line: 3, Msg: "bad"}, "<dot>:3: bad"},
		{ParseError{File: "a.dot", Msg: "too big"}, "a.dot: too big"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
	_, err := ParseDOT([]byte("digraph {\n a -- b }"))
	if got, want := fmt.Sprint(err), "<dot>:2: undirected edge '--': pipelines are directed; write '->'"; got != want {
		t.Errorf("ParseDOT error %q, want %q", got, want)
	}
	g, err := ParseDOTNamed("x.dot", []byte("digraph N { a }"))
	if err != nil {
		t.Fatalf("ParseDOTNamed: %v", err)
	}
	if g.File != "x.dot" {
		t.Errorf("ParseDOTNamed: File = %q, want x.dot", g.File)
	}
	if g.Name != "N" {
		t.Errorf("ParseDOTNamed: Name = %q, want N", g.Name)
	}
	if got := g.Where(g.Nodes[0].Line); got != "x.dot:1" {
		t.Errorf("ParseDOTNamed: Where(a's line) = %q, want x.dot:1", got)
	}
}

func TestParseDOTFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.dot")
	if err := os.WriteFile(path, []byte("digraph P {\n start -> exit\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := ParseDOTFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if g.File != path {
		t.Errorf("File = %q, want %q", g.File, path)
	}
	if g.Name != "P" {
		t.Errorf("Name = %q, want P", g.Name)
	}
	if len(g.Edges) != 1 {
		t.Errorf("%d edges, want 1: %s", len(g.Edges), dumpDOTGraph(g))
	} else if g.Edges[0].Line != 2 {
		t.Errorf("the edge's Line = %d, want 2", g.Edges[0].Line)
	}

	if _, err := ParseDOTFile(filepath.Join(dir, "missing.dot")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v; want fs.ErrNotExist wrapped", err)
	}

	big := filepath.Join(dir, "big.dot")
	if err := os.WriteFile(big, make([]byte, DefaultMaxDOTBytes+10), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ParseDOTFile(big)
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("too-large file: %v; want a *ParseError", err)
	}
	if pe.File != big {
		t.Errorf("too-large file: File = %q, want %q", pe.File, big)
	}
	// The source is read to MaxBytes+1 bytes, no further.
	if want := fmt.Sprintf("source is %d bytes", DefaultMaxDOTBytes+1); !strings.Contains(pe.Msg, want) {
		t.Errorf("too-large file: Msg = %q, want it to say %q", pe.Msg, want)
	}
}

// TestParseDOTHostile feeds sources built to crash, hang or flood the
// parser. Each must end in a ParseError within a bounded time and
// allocation, or, for the joined-string flood, parse in linear time.
func TestParseDOTHostile(t *testing.T) {
	const mib = 1 << 20
	rep := strings.Repeat
	chain := func(n int) string {
		var b strings.Builder
		b.WriteString("digraph {\n")
		for i := range n {
			if i > 0 {
				b.WriteString(" -> ")
			}
			fmt.Fprintf(&b, "n%d", i)
		}
		b.WriteString("\n}")
		return b.String()
	}
	ids := func(prefix string, n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, " %s%d", prefix, i)
		}
		return b.String()
	}
	keys := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "k%d=v ", i)
		}
		return b.String()
	}
	tests := []struct {
		name string
		src  string
		lim  ParseLimits
		msg  string // "" when the source is accepted
	}{
		{"10 MB", "digraph {" + rep("a -> b\n", 10*mib/7) + "}", ParseLimits{}, "over the limit of 4194304"},
		{"100k nested braces", "digraph {" + rep("{", 100_000) + rep("}", 100_000) + "}", ParseLimits{}, "nested more than 64 deep"},
		{"100k nested subgraphs", "digraph {" + rep("subgraph s {", 100_000) + rep("}", 100_000) + "}", ParseLimits{}, "nested more than 64 deep"},
		{"100k unclosed braces", "digraph {" + rep("{", 100_000), ParseLimits{MaxDepth: 1 << 30}, "never closed"},
		{"1M-node chain", chain(1_000_000), ParseLimits{MaxBytes: 64 * mib}, "more than 50000 edges"},
		{"1M-node chain, edge limit lifted", chain(1_000_000), ParseLimits{MaxBytes: 64 * mib, MaxEdges: 1 << 30}, "more than 500000 tokens"},
		{"chain in 4 MiB", "digraph {a" + rep("->a", 4*mib/3-10) + "}", ParseLimits{}, "more than 50000 edges"},
		{"statement flood", "digraph {" + rep("a;", 2*mib-10) + "}", ParseLimits{}, "more than 500000 tokens"},
		{"20k nodes", "digraph {" + ids("n", 20_000) + "}", ParseLimits{}, "more than 10000 nodes"},
		{"2 MiB attribute", "digraph { a [prompt=\"" + rep("x", 2*mib) + "\"] }", ParseLimits{}, "string longer than 1048576 bytes (ParseLimits.MaxAttrBytes) starts here"},
		{"2 MiB bare word", "digraph { a [prompt=" + rep("x", 2*mib) + "] }", ParseLimits{}, "value longer than 1048576 bytes"},
		{"2 MiB HTML string", "digraph { a [prompt=<" + rep("x", 2*mib) + ">] }", ParseLimits{}, "value longer than 1048576 bytes"},
		{"unterminated string", "digraph { a [prompt=\"" + rep("x\n", mib), ParseLimits{}, "or close its '\"' if that is missing"},
		{"unterminated comment", "digraph { /*" + rep("*", 3*mib), ParseLimits{}, "unterminated /* comment"},
		{"unterminated HTML", "digraph { a [label=" + rep("<", 3*mib), ParseLimits{}, "unterminated HTML string"},
		{"NUL bytes", "digraph {" + rep("\x00", 3*mib) + "}", ParseLimits{}, "a NUL byte"},
		{"invalid UTF-8", "digraph {" + rep("\xc3\x28", mib) + "}", ParseLimits{}, "invalid UTF-8"},
		{"edge expansion bomb", "digraph { {" + ids("a", 1000) + "} -> {" + ids("b", 1000) + "} }", ParseLimits{}, "more than 50000 edges"},
		{"node defaults times nodes", "digraph { node [" + keys(100_000) + "]" + ids("n", 20) + " }", ParseLimits{}, "more than 1000000 attribute values"},
		{"subgraph default copies", "digraph { node [" + keys(100_000) + "]" + rep("{node[x=1]}", 20) + " }", ParseLimits{}, "more than 1000000 attribute values"},
		{"class list times nodes", "digraph { node [class=\"" + rep("a,", mib/2-1) + "\"] subgraph { label=z;" + ids("n", 10_000) + " } }", ParseLimits{}, "class lists built from subgraph labels exceed"},
		{"joined-string flood", "digraph { a [p=\"\"" + rep(`+"a"`, 1_000_000) + "] }", ParseLimits{}, ""},
		{"many ids in one list", "digraph { a [" + keys(160_000) + "] }", ParseLimits{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := ParseDOTWith("", []byte(tt.src), tt.lim)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if tt.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				var pe *ParseError
				if !errors.As(err, &pe) || !strings.Contains(pe.Msg, tt.msg) {
					t.Fatalf("got %v; want a ParseError with %q", err, tt.msg)
				}
			}
			// At the default limits the parser may allocate about 85 MB
			// for gonum's 500,000 tokens, 40 MB for its own token table and
			// 100 MB for a million attribute values; the allocation bound
			// leaves room for that and is far below what a copy of a large
			// value per node would take. The time bound is a hang guard,
			// not a speed test (BenchmarkParse1000 is): quadratic work on
			// these inputs takes hours; their linear parse seconds, 11 s
			// under -race on a loaded 2-core machine.
			if limit := 2 * time.Minute; took > limit {
				t.Errorf("took %v; want under %v", took, limit)
			}
			if alloc, limit := after.TotalAlloc-before.TotalAlloc, uint64(8*len(tt.src)+256*mib); alloc > limit {
				t.Errorf("allocated %d MiB; want under %d MiB", alloc/mib, limit/mib)
			}
		})
	}
}

// TestParseDOTAtTheLimits parses sources at the default limits, so a change
// that makes the limits unreachable or the parser superlinear shows.
func TestParseDOTAtTheLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("digraph {\n")
	for i := range DefaultMaxDOTNodes {
		fmt.Fprintf(&b, "n%d [label=\"stage %d\"]\n", i, i)
	}
	b.WriteString("n0")
	for i := 1; i <= DefaultMaxDOTEdges; i++ {
		fmt.Fprintf(&b, " -> n%d", i%DefaultMaxDOTNodes)
	}
	// The digraph's braces are one level; 63 more reach MaxDepth.
	b.WriteString("\n" + strings.Repeat("{", DefaultMaxDOTDepth-1) + "n0" + strings.Repeat("}", DefaultMaxDOTDepth-1) + "\n}")
	start := time.Now()
	g, err := ParseDOT([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Nodes) != DefaultMaxDOTNodes || len(g.Edges) != DefaultMaxDOTEdges {
		t.Errorf("got %d nodes and %d edges", len(g.Nodes), len(g.Edges))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v", took)
	}
}

// BenchmarkParse1000 parses a 1,000-node chain whose nodes and edges carry
// attributes, about the size of the largest pipelines seen in practice.
func BenchmarkParse1000(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("digraph Bench {\n  graph [goal=\"benchmark the parser\", default_max_retries=2]\n  node [shape=box, reasoning_effort=high]\n  edge [weight=1]\n")
	for i := range 1000 {
		fmt.Fprintf(&sb, "  n%d [label=\"Stage %d\", prompt=\"Do step %d of the plan.\\nReport OUTCOME:PASS when done.\", max_retries=3, timeout=30s, human.default_choice=yes]\n", i, i, i)
	}
	for i := 1; i < 1000; i++ {
		fmt.Fprintf(&sb, "  n%d -> n%d [label=\"next\", condition=\"outcome=success\"]\n", i-1, i)
	}
	sb.WriteString("}\n")
	src := []byte(sb.String())
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		g, err := ParseDOT(src)
		if err != nil {
			b.Fatal(err)
		}
		if len(g.Nodes) != 1000 {
			b.Fatalf("%d nodes, want 1000", len(g.Nodes))
		}
		if len(g.Edges) != 999 {
			b.Fatalf("%d edges, want 999", len(g.Edges))
		}
	}
}
