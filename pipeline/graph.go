package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Graph is a parsed pipeline: one DOT digraph. Attrs are the graph's own
// attributes (goal, label, model_stylesheet, ...). Nodes and Edges are in
// source order. A Graph is built by ParseDOT and changed by the transforms
// (ApplyTransforms); the runner only reads it.
type Graph struct {
	Name  string
	Attrs map[string]string
	Nodes []*Node
	Edges []*Edge
	// File names the source in diagnostics and errors ("" when parsed from
	// bytes with no name).
	File string

	index map[string]*Node
	// out indexes Edges by their source, as reindex found them (outOf
	// edges): a graph whose edge list changed since is scanned instead.
	out   map[string][]*Edge
	outOf int
}

// Node is a stage. Attrs hold every attribute the DOT gave it, defaults and
// stylesheet rules applied; Line is the line of the statement that first
// named it (0 when unknown).
type Node struct {
	ID    string
	Attrs map[string]string
	Line  int
	// role is start or exit for a node that is one by its id alone (see
	// assignRoles), else "".
	role string
}

// Edge is a transition from one node to another. Line is the line of its
// statement (0 when unknown).
type Edge struct {
	From, To string
	Attrs    map[string]string
	Line     int
	// weight is Weight parsed once, when weighed: a run sets it on its
	// own copy of the graph (newRun), which nothing changes after.
	weight  int
	weighed bool
}

// Handler types, as a node's type attribute names them.
const (
	TypeStart       = "start"
	TypeExit        = "exit"
	TypeCodergen    = "codergen"
	TypeConditional = "conditional"
	TypeHuman       = "wait.human"
	TypeTool        = "tool"
	TypeParallel    = "parallel"
	TypeFanIn       = "parallel.fan_in"
	TypeManagerLoop = "stack.manager_loop"
	// TypeWasmPrefix opens the type of a node run by a WebAssembly stage
	// handler: "wasm:<plugin>".
	TypeWasmPrefix = "wasm:"
)

// shapeTypes maps a node's shape to its handler type when it has no type
// attribute; any other shape is a codergen stage.
var shapeTypes = map[string]string{
	"Mdiamond":      TypeStart,
	"Msquare":       TypeExit,
	"box":           TypeCodergen,
	"diamond":       TypeConditional,
	"hexagon":       TypeHuman,
	"parallelogram": TypeTool,
	"component":     TypeParallel,
	"tripleoctagon": TypeFanIn,
	"house":         TypeManagerLoop,
}

// Node returns the node of that id, or nil. It never writes to g, so
// parallel branches may call it at once.
func (g *Graph) Node(id string) *Node {
	if g.index != nil && len(g.index) == len(g.Nodes) {
		return g.index[id]
	}
	for _, n := range g.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// reindex builds the id index; whoever changes Nodes calls it (the parser,
// the transforms) before the graph is shared.
func (g *Graph) reindex() {
	g.index = make(map[string]*Node, len(g.Nodes))
	for _, n := range g.Nodes {
		g.index[n.ID] = n
	}
	g.out = make(map[string][]*Edge, len(g.Nodes))
	for _, e := range g.Edges {
		g.out[e.From] = append(g.out[e.From], e)
	}
	g.outOf = len(g.Edges)
	g.assignRoles()
}

// roleIDs are the ids that make a node the start or the exit of a graph
// with none by shape or type, compared without case. Spec 4.3: "Every
// graph must have exactly one start node (shape=Mdiamond or id matching
// start/Start)"; 4.4: "exactly one exit node (shape=Msquare or id matching
// exit/end)". Published pipelines also write Exit and END.
var roleIDs = []struct {
	role string
	ids  []string
}{{TypeStart, []string{"start"}}, {TypeExit, []string{"exit", "end"}}}

// roleNodes are the nodes whose id names role (any case), in source order,
// except that a node named exactly start comes first: the one start
// StartNode picks when several match.
func (g *Graph) roleNodes(role string, ids []string) []*Node {
	var out []*Node
	for _, n := range g.Nodes {
		for _, id := range ids {
			if strings.EqualFold(n.ID, id) {
				out = append(out, n)
				break
			}
		}
	}
	if i := slices.IndexFunc(out, func(n *Node) bool { return n.ID == "start" }); role == TypeStart && i > 0 {
		exact := out[i]
		copy(out[1:i+1], out[:i])
		out[0] = exact
	}
	return out
}

// assignRoles makes a node named start (any case; start first) the start,
// and those named exit or end (any case) exits, when no node is one by its
// shape or type and the named node would otherwise be a codergen stage (no
// type, no handler, a box or no shape): a node that names another handler
// keeps it. reindex calls it, with the index built.
func (g *Graph) assignRoles() {
	declared := map[string]bool{}
	for _, n := range g.Nodes {
		n.role = ""
		declared[n.Type()] = true
	}
	for _, r := range roleIDs {
		if declared[r.role] {
			continue
		}
		for _, n := range g.roleNodes(r.role, r.ids) {
			if n.Type() != TypeCodergen || n.explicitType() != "" || strings.TrimSpace(n.Attrs["handler"]) != "" {
				continue
			}
			n.role = r.role
			if r.role == TypeStart {
				break // one start
			}
		}
	}
}

// Clone returns a deep copy of g: the runner transforms its own copy, so a
// parsed graph may be run again, and by several runs at once.
func (g *Graph) Clone() *Graph {
	c := &Graph{Name: g.Name, File: g.File, Attrs: maps.Clone(g.Attrs)}
	if c.Attrs == nil {
		c.Attrs = map[string]string{}
	}
	for _, n := range g.Nodes {
		c.Nodes = append(c.Nodes, &Node{ID: n.ID, Attrs: maps.Clone(n.Attrs), Line: n.Line})
	}
	for _, e := range g.Edges {
		c.Edges = append(c.Edges, &Edge{From: e.From, To: e.To, Attrs: maps.Clone(e.Attrs), Line: e.Line})
	}
	c.reindex()
	return c
}

// Outgoing returns the edges leaving id, in source order.
func (g *Graph) Outgoing(id string) []*Edge {
	if g.out != nil && g.outOf == len(g.Edges) {
		return slices.Clip(g.out[id]) // a caller's append copies
	}
	var out []*Edge
	for _, e := range g.Edges {
		if e.From == id {
			out = append(out, e)
		}
	}
	return out
}

// Incoming returns the edges entering id, in source order.
func (g *Graph) Incoming(id string) []*Edge {
	var in []*Edge
	for _, e := range g.Edges {
		if e.To == id {
			in = append(in, e)
		}
	}
	return in
}

// Goal is the graph's goal attribute.
func (g *Graph) Goal() string { return g.Attrs["goal"] }

// StartNode returns the start node: the one node of type start (by shape
// Mdiamond, explicit type, or its id: see assignRoles), else a node named
// start in any case (start first). It is nil
// when there is none or more than one (validation reports which).
func (g *Graph) StartNode() *Node {
	var found *Node
	for _, n := range g.Nodes {
		if n.Type() == TypeStart {
			if found != nil {
				return nil
			}
			found = n
		}
	}
	if found == nil {
		if named := g.roleNodes(TypeStart, roleIDs[0].ids); len(named) > 0 {
			return named[0]
		}
	}
	return found
}

// ExitNodes returns the nodes of type exit: by shape Msquare, explicit
// type, or, when there is none of those, a node named exit or end (any
// case).
func (g *Graph) ExitNodes() []*Node {
	var out []*Node
	for _, n := range g.Nodes {
		if n.Type() == TypeExit {
			out = append(out, n)
		}
	}
	return out
}

// Where names a place in the source for errors: "file:line" or what of it
// is known.
func (g *Graph) Where(line int) string {
	f := g.File
	if f == "" {
		f = "<dot>"
	}
	if line > 0 {
		return fmt.Sprintf("%s:%d", f, line)
	}
	return f
}

// Attr returns the attribute's value, or def when it is not set.
func (n *Node) Attr(key, def string) string {
	if v, ok := n.Attrs[key]; ok {
		return v
	}
	return def
}

// Shape is the node's shape (default box).
func (n *Node) Shape() string { return n.Attr("shape", "box") }

// Type is the node's handler type: its type attribute, else start or
// exit for a node that is one by its id (see Graph.StartNode and
// ExitNodes), else the one its shape implies (ShapeType).
func (n *Node) Type() string {
	if t := n.explicitType(); t != "" {
		return t
	}
	if h := strings.TrimSpace(n.Attrs["handler"]); h != "" {
		return TypeWasmPrefix + h
	}
	if n.role != "" {
		return n.role
	}
	return n.ShapeType()
}

// explicitType is the node's type attribute, else its node_type: spec 2.6
// names the attribute type and lets an implementation call it node_type
// internally, and kilroy's and fabro's files write node_type (attr_value
// warns, suggesting type).
func (n *Node) explicitType() string {
	if t := strings.TrimSpace(n.Attrs["type"]); t != "" {
		return t
	}
	return strings.TrimSpace(n.Attrs["node_type"])
}

// ShapeType is the handler type the node's shape implies, codergen for a
// shape that implies none: the handler of a node whose type no handler
// runs (spec 4.2).
func (n *Node) ShapeType() string {
	if t, ok := shapeTypes[n.Shape()]; ok {
		return t
	}
	return TypeCodergen
}

// Label is the node's label, else its id.
func (n *Node) Label() string { return n.Attr("label", n.ID) }

// Prompt is the node's prompt, else its label.
func (n *Node) Prompt() string {
	if p := n.Attrs["prompt"]; p != "" {
		return p
	}
	return n.Attrs["label"]
}

// Int returns an integer attribute, def when it is not set, and an error
// naming the node and key when it is not an integer.
func (n *Node) Int(key string, def int) (int, error) {
	if strings.TrimSpace(n.Attrs[key]) == "" {
		return def, nil // the common case, read for every visit: no error text built
	}
	return intAttr(n.Attrs, key, def, "node "+n.ID)
}

// Bool returns a boolean attribute (true/false/yes/no/1/0), def when unset.
func (n *Node) Bool(key string, def bool) (bool, error) {
	if strings.TrimSpace(n.Attrs[key]) == "" {
		return def, nil // as Int
	}
	return boolAttr(n.Attrs, key, def, "node "+n.ID)
}

// Duration returns a duration attribute (see ParseDuration), def when unset.
func (n *Node) Duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := n.Attrs[key]
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	d, err := ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("node %s: %s=%q: %w", n.ID, key, v, err)
	}
	return d, nil
}

// Label is the edge's label ("" when none).
func (e *Edge) Label() string { return e.Attrs["label"] }

// Condition is the edge's condition ("" when none).
func (e *Edge) Condition() string { return strings.TrimSpace(e.Attrs["condition"]) }

// Weight is the edge's weight (default 0; a bad value counts as 0 and is a
// validation warning).
func (e *Edge) Weight() int {
	if e.weighed {
		return e.weight
	}
	v := strings.TrimSpace(e.Attrs["weight"])
	if v == "" {
		return 0 // most edges: no strconv error allocated on every selection
	}
	w, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return w
}

// String names the edge as "From -> To".
func (e *Edge) String() string { return e.From + " -> " + e.To }

func intAttr(attrs map[string]string, key string, def int, who string) (int, error) {
	v, ok := attrs[key]
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	i, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return def, fmt.Errorf("%s: %s=%q is not an integer", who, key, v)
	}
	return i, nil
}

func boolAttr(attrs map[string]string, key string, def bool, who string) (bool, error) {
	v, ok := attrs[key]
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "1", "on":
		return true, nil
	case "false", "no", "0", "off":
		return false, nil
	}
	return def, fmt.Errorf("%s: %s=%q is not a boolean (true or false)", who, key, v)
}

// ParseDuration reads a duration as pipelines write them: a number and a
// unit, ms, s, m, h or d ("250ms", "30s", "5m", "2h", "1d"), or anything
// time.ParseDuration accepts ("1h30m"). A bare whole number is seconds
// ("300" is 5m): published pipelines write timeout="300", and the
// attr_value rule warns about it (see bareSeconds).
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, ok := bareSeconds(s); ok {
		return time.Duration(n) * time.Second, nil
	}
	if strings.HasSuffix(s, "d") {
		n, err := strconv.ParseFloat(strings.TrimSuffix(s, "d"), 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad duration %q: want e.g. 250ms, 30s, 5m, 2h or 1d", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad duration %q: want e.g. 250ms, 30s, 5m, 2h or 1d", s)
	}
	return d, nil
}

// maxBareSeconds bounds a unitless duration so that it cannot overflow
// time.Duration (about 292 years).
const maxBareSeconds = 1 << 32

// bareSeconds reads s, already trimmed, as a whole number of seconds
// without a unit ("300"), the way the spec's Duration type (2.4: "Integer
// + unit suffix") does not have it but published pipelines write it.
func bareSeconds(s string) (int64, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > maxBareSeconds || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	return n, true
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
