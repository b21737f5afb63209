package pipeline

import (
	"bufio"
	"io"
	"strings"
)

// WriteDOT writes g as standard Graphviz DOT, which Graphviz and
// ParseDOTNamed both read: morph's dialect accepts bare words Graphviz
// rejects (dotted keys such as human.default_choice, durations such as
// 30s, values such as claude-sonnet-4), so a pipeline is drawn from this
// form, not from its source.
//
// It writes the graph's name and attributes, then every node in order
// with all its attributes, then every edge in order with all its
// attributes, attributes sorted by key. Every id, key and value is
// double-quoted: '"' is written \", a newline \n and a backslash \\,
// except a backslash before one of the letters of Graphviz's label escapes
// (\l, \r, \N, \G, \E, \T, \H, \L), which is written as it is: the parser
// keeps those two characters as written, so that they keep their meaning
// in a label, and "line\l" is drawn left-justified as written. Reading the
// output back gives the same name, nodes, edges and attributes (not the
// same lines, nor Graph.File).
//
// There are no subgraphs and no node or edge defaults: the parser has
// already applied defaults to each node and edge and turned subgraph
// labels into the class attributes of their nodes. An HTML string's value
// is written as a quoted string, so Graphviz shows its markup as text.
func (g *Graph) WriteDOT(w io.Writer) error {
	b := bufio.NewWriter(w)
	b.WriteString("digraph ")
	if g.Name != "" {
		writeDOTString(b, g.Name)
		b.WriteByte(' ')
	}
	b.WriteString("{\n")
	for _, k := range sortedKeys(g.Attrs) {
		b.WriteByte('\t')
		writeDOTString(b, k)
		b.WriteByte('=')
		writeDOTString(b, g.Attrs[k])
		b.WriteString(";\n")
	}
	for _, n := range g.Nodes {
		b.WriteByte('\t')
		writeDOTString(b, n.ID)
		writeDOTAttrs(b, n.Attrs)
		b.WriteString(";\n")
	}
	for _, e := range g.Edges {
		b.WriteByte('\t')
		writeDOTString(b, e.From)
		b.WriteString(" -> ")
		writeDOTString(b, e.To)
		writeDOTAttrs(b, e.Attrs)
		b.WriteString(";\n")
	}
	b.WriteString("}\n")
	return b.Flush() // a bufio.Writer keeps its first error
}

// writeDOTAttrs writes an attribute list, [k="v", ...] sorted by key,
// after a space; nothing when attrs is empty.
func writeDOTAttrs(b *bufio.Writer, attrs map[string]string) {
	if len(attrs) == 0 {
		return
	}
	b.WriteString(" [")
	for i, k := range sortedKeys(attrs) {
		if i > 0 {
			b.WriteString(", ")
		}
		writeDOTString(b, k)
		b.WriteByte('=')
		writeDOTString(b, attrs[k])
	}
	b.WriteByte(']')
}

// graphvizLabelEscapes are the letters of Graphviz's label escapes (\l,
// \N, ...), which the parser keeps as written: a backslash before one of
// them is written as it is, any other one doubled.
const graphvizLabelEscapes = "lrNGETHL"

// writeDOTString writes s as a DOT quoted string (see WriteDOT).
func writeDOTString(b *bufio.Writer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		case '\\':
			if i+1 < len(s) && strings.IndexByte(graphvizLabelEscapes, s[i+1]) >= 0 {
				b.WriteByte(c)
			} else {
				b.WriteString(`\\`)
			}
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}
