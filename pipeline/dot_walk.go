package pipeline

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"gonum.org/v1/gonum/graph/formats/dot/ast"
)

// dotAttr is one key=value of a statement, resolved to its values.
type dotAttr struct {
	key, val string
	line     int
}

// dotRef is a node as an edge endpoint: its id and the line naming it.
type dotRef struct {
	id   string
	line int
}

// dotMembers collects the nodes named in a subgraph used as an edge
// endpoint, in order, once each.
type dotMembers struct {
	seen map[string]bool
	list []dotRef
}

// dotScope is the graph or a subgraph: the node and edge defaults in force
// (shared with the parent until written: copy on write), the classes its
// nodes get, and the node collector when it is an edge endpoint.
type dotScope struct {
	parent           *dotScope
	nodeDefs         map[string]string
	edgeDefs         map[string]string
	ownNode, ownEdge bool
	classes          []string
	members          *dotMembers
}

// dotWalker builds the Graph from gonum's AST.
type dotWalker struct {
	file           string
	lim            ParseLimits
	ids            []dotToken
	g              *Graph
	byID           map[string]*Node
	attrsLeft      int
	classBytesLeft int
}

func (w *dotWalker) errf(line int, format string, args ...any) *ParseError {
	return &ParseError{File: w.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// tok returns the token an AST id stands for.
func (w *dotWalker) tok(id string) dotToken { return lookupPlaceholder(w.ids, id) }

func (w *dotWalker) graph(ag *ast.Graph) (*Graph, error) {
	w.g = &Graph{Name: w.tok(ag.ID).val, Attrs: map[string]string{}, File: w.file}
	if err := w.stmts(&dotScope{}, ag.Stmts, true); err != nil {
		return nil, err
	}
	w.g.reindex()
	return w.g, nil
}

func (w *dotWalker) stmts(s *dotScope, stmts []ast.Stmt, top bool) error {
	for _, st := range stmts {
		var err error
		switch st := st.(type) {
		case *ast.NodeStmt:
			_, err = w.node(s, w.tok(st.Node.ID), w.attrs(st.Attrs), true)
		case *ast.EdgeStmt:
			err = w.edgeStmt(s, st)
		case *ast.AttrStmt:
			err = w.attrStmt(s, st, top)
		case *ast.Attr:
			if top { // in a subgraph only its label counts (subgraphClass)
				err = w.graphAttr(w.attr(st))
			}
		case *ast.Subgraph:
			_, err = w.subgraph(s, st, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *dotWalker) attr(a *ast.Attr) dotAttr {
	k := w.tok(a.Key)
	return dotAttr{key: k.val, val: w.tok(a.Val).val, line: k.line}
}

func (w *dotWalker) attrs(list []*ast.Attr) []dotAttr {
	out := make([]dotAttr, len(list))
	for i, a := range list {
		out[i] = w.attr(a)
	}
	return out
}

// graphAttr sets a graph attribute, renaming attractor's old
// default_max_retry.
func (w *dotWalker) graphAttr(a dotAttr) error {
	if a.key == "default_max_retry" {
		a.key = "default_max_retries"
	}
	return w.set(w.g.Attrs, a)
}

func (w *dotWalker) attrStmt(s *dotScope, st *ast.AttrStmt, top bool) error {
	attrs := w.attrs(st.Attrs)
	var defs *map[string]string
	var own *bool
	switch st.Kind {
	case ast.GraphKind:
		if !top { // a subgraph's graph [..]: only its label counts (subgraphClass)
			return nil
		}
		for _, a := range attrs {
			if err := w.graphAttr(a); err != nil {
				return err
			}
		}
		return nil
	case ast.NodeKind:
		defs, own = &s.nodeDefs, &s.ownNode
	default:
		defs, own = &s.edgeDefs, &s.ownEdge
	}
	if len(attrs) == 0 {
		return nil
	}
	if !*own {
		m, err := w.copyAttrs(*defs, len(attrs), attrs[0].line)
		if err != nil {
			return err
		}
		*defs, *own = m, true
	}
	for _, a := range attrs {
		if err := w.set(*defs, a); err != nil {
			return err
		}
	}
	return nil
}

// set sets one attribute, counting a new key against MaxAttrs.
func (w *dotWalker) set(m map[string]string, a dotAttr) error {
	if _, ok := m[a.key]; !ok {
		if err := w.charge(1, a.line); err != nil {
			return err
		}
	}
	m[a.key] = a.val
	return nil
}

// copyAttrs copies a default set, counted against MaxAttrs, with room for
// extra more.
func (w *dotWalker) copyAttrs(defs map[string]string, extra, line int) (map[string]string, error) {
	if err := w.charge(len(defs), line); err != nil {
		return nil, err
	}
	m := make(map[string]string, len(defs)+extra)
	for k, v := range defs {
		m[k] = v
	}
	return m, nil
}

func (w *dotWalker) charge(n, line int) error {
	if n > w.attrsLeft {
		return w.errf(line, "more than %d attribute values in all (ParseLimits.MaxAttrs); node and edge defaults are copied to every node and edge they apply to", w.lim.MaxAttrs)
	}
	w.attrsLeft -= n
	return nil
}

// subgraph walks a subgraph in a scope of its own and, when collect is set
// (it is an edge endpoint), returns the nodes named in it.
func (w *dotWalker) subgraph(parent *dotScope, sg *ast.Subgraph, collect bool) ([]dotRef, error) {
	s := &dotScope{parent: parent, nodeDefs: parent.nodeDefs, edgeDefs: parent.edgeDefs, classes: parent.classes}
	if c := w.subgraphClass(sg); c != "" && !slices.Contains(s.classes, c) {
		s.classes = append(parent.classes[:len(parent.classes):len(parent.classes)], c)
	}
	if collect {
		s.members = &dotMembers{seen: map[string]bool{}}
	}
	if err := w.stmts(s, sg.Stmts, false); err != nil {
		return nil, err
	}
	if collect {
		return s.members.list, nil
	}
	return nil, nil
}

// subgraphClass derives the class a subgraph's label gives its nodes. The
// label may be set anywhere in the subgraph, as label=... or graph
// [label=...]; the last one wins, as in Graphviz.
func (w *dotWalker) subgraphClass(sg *ast.Subgraph) string {
	label := ""
	for _, st := range sg.Stmts {
		switch st := st.(type) {
		case *ast.Attr:
			if a := w.attr(st); a.key == "label" {
				label = a.val
			}
		case *ast.AttrStmt:
			if st.Kind != ast.GraphKind {
				continue
			}
			for _, a := range st.Attrs {
				if a := w.attr(a); a.key == "label" {
					label = a.val
				}
			}
		}
	}
	return classFromLabel(label)
}

// classFromLabel derives a class name from a subgraph label: lowercase,
// whitespace to '-', anything but ASCII letters, digits, '-' and '_'
// dropped, so that the class can be written in a stylesheet selector
// (label="Loop A" is class loop-a).
func classFromLabel(label string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(label) {
		switch {
		case unicode.IsSpace(r):
			b.WriteByte('-')
		case 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// node names a node in scope s: declared for a node statement (whose attrs
// merge in), not for an edge endpoint. A node named for the first time gets
// the node defaults in scope; either way it then gets the scope's classes.
func (w *dotWalker) node(s *dotScope, t dotToken, attrs []dotAttr, declared bool) (dotRef, error) {
	if !validNodeID(t.val) {
		return dotRef{}, w.errf(t.line, "node id %s is not valid: ids are letters, digits and '_', not starting with a digit; put display text in label=\"...\"", quoteShort(t.val))
	}
	n := w.byID[t.val]
	created := n == nil
	if created {
		if len(w.g.Nodes) >= w.lim.MaxNodes {
			return dotRef{}, w.errf(t.line, "more than %d nodes (ParseLimits.MaxNodes)", w.lim.MaxNodes)
		}
		m, err := w.copyAttrs(s.nodeDefs, len(attrs), t.line)
		if err != nil {
			return dotRef{}, err
		}
		n = &Node{ID: t.val, Attrs: m, Line: t.line}
		w.byID[t.val] = n
		w.g.Nodes = append(w.g.Nodes, n)
	}
	if declared {
		for _, a := range attrs {
			if err := w.set(n.Attrs, a); err != nil {
				return dotRef{}, err
			}
		}
	}
	if (created || declared) && len(s.classes) > 0 {
		if err := w.addClasses(n, s.classes, t.line); err != nil {
			return dotRef{}, err
		}
	}
	r := dotRef{id: t.val, line: t.line}
	for sc := s; sc != nil; sc = sc.parent {
		if m := sc.members; m != nil && !m.seen[r.id] {
			m.seen[r.id] = true
			m.list = append(m.list, r)
		}
	}
	return r, nil
}

// validNodeID tells whether s is a node id: [A-Za-z_][A-Za-z0-9_]*.
func validNodeID(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// addClasses appends the classes (no repeats among them) the node lacks to
// its class list, which is split on commas and spaces as the stylesheet
// reads it. The bytes read and written are charged against MaxBytes (see
// ParseLimits) before the work is done.
func (w *dotWalker) addClasses(n *Node, classes []string, line int) error {
	cur := n.Attrs["class"]
	if err := w.chargeClassBytes(len(cur), line); err != nil {
		return err
	}
	found := make([]bool, len(classes))
	listed := false
	for f := range strings.FieldsFuncSeq(cur, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		listed = true
		if i := slices.Index(classes, f); i >= 0 {
			found[i] = true
		}
	}
	var b strings.Builder
	b.WriteString(cur)
	for i, c := range classes {
		if found[i] {
			continue
		}
		if listed {
			b.WriteByte(',')
		}
		b.WriteString(c)
		listed = true
	}
	if b.Len() == len(cur) {
		return nil
	}
	if err := w.chargeClassBytes(b.Len(), line); err != nil {
		return err
	}
	return w.set(n.Attrs, dotAttr{key: "class", val: b.String(), line: line})
}

func (w *dotWalker) chargeClassBytes(n, line int) error {
	if n > w.classBytesLeft {
		return w.errf(line, "class lists built from subgraph labels exceed %d bytes in all (ParseLimits.MaxBytes): shorten the class attributes", w.lim.MaxBytes)
	}
	w.classBytesLeft -= n
	return nil
}

// edgeStmt adds a statement's edges, A -> B -> C one per arrow, each with
// the statement's attributes over the edge defaults.
func (w *dotWalker) edgeStmt(s *dotScope, st *ast.EdgeStmt) error {
	attrs := w.attrs(st.Attrs)
	from, err := w.vertex(s, st.From)
	if err != nil {
		return err
	}
	for e := st.To; e != nil; e = e.To {
		to, err := w.vertex(s, e.Vertex)
		if err != nil {
			return err
		}
		if err := w.connect(s, from, to, attrs); err != nil {
			return err
		}
		from = to
	}
	return nil
}

// vertex returns the nodes an edge endpoint stands for: one node, or every
// node a subgraph names.
func (w *dotWalker) vertex(s *dotScope, v ast.Vertex) ([]dotRef, error) {
	if sg, ok := v.(*ast.Subgraph); ok {
		return w.subgraph(s, sg, true)
	}
	r, err := w.node(s, w.tok(v.(*ast.Node).ID), nil, false)
	return []dotRef{r}, err
}

// connect adds an edge from every node of from to every node of to.
func (w *dotWalker) connect(s *dotScope, from, to []dotRef, attrs []dotAttr) error {
	if len(from) == 0 || len(to) == 0 {
		return nil
	}
	if len(from)*len(to) > w.lim.MaxEdges-len(w.g.Edges) {
		return w.errf(to[0].line, "more than %d edges (ParseLimits.MaxEdges); a subgraph endpoint makes an edge per node it holds", w.lim.MaxEdges)
	}
	for _, f := range from {
		for _, t := range to {
			m, err := w.copyAttrs(s.edgeDefs, len(attrs), t.line)
			if err != nil {
				return err
			}
			for _, a := range attrs {
				if err := w.set(m, a); err != nil {
					return err
				}
			}
			w.g.Edges = append(w.g.Edges, &Edge{From: f.id, To: t.id, Attrs: m, Line: t.line})
		}
	}
	return nil
}
