// Package render draws a pipeline's DOT graph as SVG, each node coloured by
// its status in a run, so that a person can see at a glance where a run
// went, where it failed and where it goes next.
//
// The layout is Graphviz's dot, compiled to WebAssembly and run on wazero by
// github.com/goccy/go-graphviz: no system Graphviz is needed. That library
// keeps one Graphviz instance per process, which cannot be interrupted and
// must not be used by two goroutines at once; SVG serialises the renders
// and bounds what a DOT source can make that instance do (see SVG).
package render

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-graphviz"
	"github.com/goccy/go-graphviz/cgraph"

	"github.com/morphhost/morph/internal/safetext"
)

// Defaults of Options. Real pipelines have tens of nodes; dot needs seconds
// for a few hundred densely connected ones (a random graph of 100 nodes and
// 300 edges: 1.4 s; 200 and 500: 13 s), so graphs near the node and edge
// limits may well meet the deadline instead.
const (
	DefaultTimeout  = 30 * time.Second
	DefaultMaxBytes = 4 << 20 // as pipeline.DefaultMaxDOTBytes: long prompts are attributes
	DefaultMaxNodes = 1000
	DefaultMaxEdges = 2000
)

// Fixed bounds on what Graphviz is given, past which it misbehaves rather
// than merely slows down (each was seen in Graphviz 12.1.2 under wazero):
//   - maxDepth bounds the nesting of braces (subgraphs, the graph's own
//     included, as pipeline.DefaultMaxDOTDepth) and of a record label's
//     fields: 500 nested clusters made dot return a few bytes of garbage
//     with no error, 20,000 nested braces failed the next parse, 10,000
//     nested record fields gave an empty SVG, 100,000 of them 35 s of
//     work. Pipelines nest a few levels.
//   - maxPeripheries and maxSides bound a node's outlines and a polygon's
//     sides, which the SVG draws one by one: peripheries=100000 is 8.6 MB of
//     SVG for one node, and a node default applies it to every node.
const (
	maxDepth       = 64
	maxPeripheries = 10
	maxSides       = 100
)

// Options tune SVG. Zero fields take their defaults.
type Options struct {
	// Timeout bounds the render, waiting for an earlier one included
	// (default DefaultTimeout); ctx's own deadline applies too.
	Timeout time.Duration
	// MaxBytes, MaxNodes and MaxEdges bound the source and the graph
	// (defaults DefaultMaxBytes, DefaultMaxNodes, DefaultMaxEdges): a
	// graph over them is refused before its layout, the costly part.
	MaxBytes int
	MaxNodes int
	MaxEdges int
	// Next is the node the run goes to next (the one running, if the run
	// is): it gets a blue outline over the fill its status gives it, so a
	// node the run loops back to shows both its last outcome and that it
	// is next. Empty: none.
	Next string
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxBytes, DefaultMaxBytes)
	def(&o.MaxNodes, DefaultMaxNodes)
	def(&o.MaxEdges, DefaultMaxEdges)
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// Colours of the statuses (pipeline.StageStatus values), light enough for
// black text. Statuses not listed here (from a newer morph) get colourOther.
var statusColours = map[string]string{
	"success":         "#a6e3a1",
	"partial_success": "#ffd966",
	"retry":           "#ffb366",
	"fail":            "#f28b82",
	"skipped":         "#d0d0d0",
}

const (
	colourNotRun = "#ffffff"
	colourOther  = "#e1d5f5"
	colourNext   = "#1a73e8"
	penwidthNext = "3"
	notRun       = "not run"
	nextLabel    = "next"
)

// legendOrder is the order of the legend's entries; other statuses follow
// in the order of their names.
var legendOrder = []string{"success", "partial_success", "retry", "fail", "skipped", notRun, nextLabel}

// slot is the one Graphviz instance of the process (see the package doc):
// a render holds it until Graphviz returns, even when SVG has returned
// at its deadline, so that the next render waits instead of corrupting it.
var slot = make(chan struct{}, 1)

// noFiles is the file system Graphviz sees. go-graphviz otherwise gives it
// the host's whole file system, so that a DOT attribute (image, shapefile,
// an HTML label's IMG) could make it read any file, and a named pipe block
// it for ever.
type noFiles struct{}

// Open finds no file. (Refusing with a permission error made Graphviz
// return garbage for the rest of that render.)
func (noFiles) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

var closeFiles = sync.OnceFunc(func() { graphviz.SetFileSystem(noFiles{}) })

// SVG lays dotSrc out with dot and returns it as SVG. With statuses (node
// id to pipeline status) or opts.Next, every node is filled by its status,
// white when it did not run, with its status as its tooltip, and a legend
// of the statuses shown is added; without, the graph is drawn as written.
// Statuses of nodes the graph does not have are ignored.
//
// The source may be hostile: it is refused over opts' size limits or
// nested deeper than Graphviz copes with, absurd outline counts are cut,
// Graphviz reads no file, the graph cannot pick another layout engine or
// multiply its drawing by layers, and links (URL, href, HTML labels' HREF,
// stylesheet) are dropped from the SVG, which a browser may open: a
// javascript: link would run there. Graphviz escapes ids and labels.
//
// SVG returns at its timeout, but Graphviz cannot be stopped: the abandoned
// render runs on in the background, holding the instance, and later
// renders wait for it within their own timeout. A CLI exits and ends it; a
// long-lived process loses a core and its renders until it finishes.
func SVG(ctx context.Context, dotSrc []byte, statuses map[string]string, opts Options) ([]byte, error) {
	opts = opts.withDefaults()
	if len(dotSrc) > opts.MaxBytes {
		return nil, fmt.Errorf("render: the source is larger than %d bytes", opts.MaxBytes)
	}
	depth, tokens := scan(dotSrc)
	if depth > maxDepth {
		return nil, fmt.Errorf("render: braces are nested %d deep, over the limit of %d", depth, maxDepth)
	}
	if !tokens {
		// Graphviz would find no graph and report its previous error.
		return nil, errors.New("render: the source has no graph")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	select {
	case slot <- struct{}{}:
	default:
		select {
		case slot <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("render: waiting for an earlier render still running: %w", ctx.Err())
		}
	}
	type result struct {
		svg []byte
		err error
	}
	done := make(chan result, 1) // never blocks an abandoned render
	drawing := drawing
	go func() {
		defer func() { <-slot }()
		defer func() {
			if p := recover(); p != nil { // go-graphviz's own Go code
				done <- result{err: fmt.Errorf("render: graphviz panicked: %v", p)}
			}
		}()
		svg, err := drawing(ctx, dotSrc, statuses, opts)
		done <- result{svg, err}
	}()
	select {
	case r := <-done:
		return r.svg, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("render: graphviz did not finish in %s: %w", time.Since(start).Round(time.Millisecond), ctx.Err())
	}
}

// drawing is what SVG runs while it holds slot: draw, or in tests a render
// that ends when the test says, so that they need no graph whose layout
// outlasts a deadline on whatever machine runs them.
var drawing = draw

// draw is SVG's work, run while it holds slot.
func draw(ctx context.Context, src []byte, statuses map[string]string, opts Options) ([]byte, error) {
	closeFiles()
	g, err := graphviz.ParseBytes(src)
	if err != nil {
		return nil, fmt.Errorf("render: parsing the DOT: %w", err)
	}
	if g == nil {
		return nil, errors.New("render: parsing the DOT: graphviz found no graph")
	}
	defer g.Close()
	if err := check(g, opts); err != nil {
		return nil, err
	}
	// The graph's layout attribute would pick the engine over the one
	// asked for; a stylesheet would be linked from the SVG.
	for _, a := range [][2]string{{"layout", string(graphviz.DOT)}, {"stylesheet", ""}} {
		if err := g.SafeSet(a[0], a[1], ""); err != nil {
			return nil, fmt.Errorf("render: setting the graph's %s: %w", a[0], err)
		}
	}
	shown, names, err := styleNodes(g, statuses, opts)
	if err != nil {
		return nil, err
	}
	if len(shown) > 0 {
		if err := addLegend(g, shown, names); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil { // SVG has returned: spare the layout
		return nil, err
	}
	gv, err := graphviz.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("render: starting graphviz: %w", err)
	}
	defer gv.Close()
	gv.SetLayout(graphviz.DOT)
	var buf bytes.Buffer
	if err := gv.Render(ctx, g, graphviz.SVG, &buf); err != nil {
		return nil, fmt.Errorf("render: laying out the graph: %w", err)
	}
	// Graphviz reports some failures only as a truncated or empty drawing.
	out := buf.Bytes()
	if !bytes.HasPrefix(out, []byte("<?xml")) || !bytes.Contains(out, []byte("</svg>")) {
		return nil, fmt.Errorf("render: graphviz returned no SVG (%d bytes)", len(out))
	}
	out = links.ReplaceAll(out, nil)
	if err := checkSVG(out); err != nil {
		return nil, err
	}
	return escapeUnsafe(out), nil
}

// escapeUnsafe writes the characters a terminal would act on (controls,
// bidirectional overrides, ...: safetext.Unsafe) as XML character
// references, which a browser shows as the same characters, so that an SVG
// written to a terminal (-o -) cannot drive it. Tab and newline stay.
func escapeUnsafe(svg []byte) []byte {
	if !bytes.ContainsFunc(svg, safetext.Unsafe) {
		return svg
	}
	var b bytes.Buffer
	for _, r := range string(svg) {
		if safetext.Unsafe(r) {
			fmt.Fprintf(&b, "&#x%x;", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.Bytes()
}

// links matches the link attributes of Graphviz's SVG (<a xlink:href>,
// <image xlink:href>). Graphviz escapes '"' in attribute values, so a
// value ends at the first '"' and text content never matches.
var links = regexp.MustCompile(`\s(?:xlink:)?href="[^"]*"`)

// svgElements are the elements Graphviz's SVG renderer writes.
var svgElements = map[string]bool{
	"svg": true, "g": true, "title": true, "a": true, "text": true, "polygon": true, "polyline": true,
	"ellipse": true, "path": true, "defs": true, "linearGradient": true, "radialGradient": true, "stop": true,
}

// checkSVG refuses SVG that could do more in a browser than draw: not
// well formed, with an element Graphviz does not write (script,
// foreignObject, animate, use, image, ...), an event handler or link
// attribute, or a reference to anything but the document itself. Graphviz
// 12.1.2 does not escape every attribute it copies from the graph (a
// fontname becomes font-family as it is), so what it writes is checked,
// not trusted.
func checkSVG(svg []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(svg)) // strict: Graphviz writes XML's entities only
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("render: graphviz wrote malformed SVG (%w): is an attribute of the graph hostile?", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if !svgElements[t.Name.Local] {
				return fmt.Errorf("render: graphviz wrote an SVG <%s> element: is an attribute of the graph hostile?", t.Name.Local)
			}
			for _, a := range t.Attr {
				name, v := strings.ToLower(a.Name.Local), strings.ToLower(a.Value)
				if strings.HasPrefix(name, "on") || name == "href" || name == "src" ||
					strings.Contains(strings.ReplaceAll(v, "url(#", ""), "url(") {
					return fmt.Errorf("render: graphviz wrote an SVG attribute %s=%q: is an attribute of the graph hostile?", a.Name.Local, a.Value)
				}
			}
		case xml.ProcInst:
			if t.Target != "xml" {
				return fmt.Errorf("render: graphviz wrote an SVG processing instruction <?%s?>", t.Target)
			}
		}
	}
}

// check refuses a graph over opts' limits, or with layers, before its
// layout.
func check(g *cgraph.Graph, opts Options) error {
	n, err := g.NodeNum()
	if err != nil {
		return fmt.Errorf("render: counting nodes: %w", err)
	}
	if n > opts.MaxNodes {
		return fmt.Errorf("render: the graph has %d nodes, over the limit of %d", n, opts.MaxNodes)
	}
	e, err := g.EdgeNum()
	if err != nil {
		return fmt.Errorf("render: counting edges: %w", err)
	}
	if e > opts.MaxEdges {
		return fmt.Errorf("render: the graph has %d edges, over the limit of %d", e, opts.MaxEdges)
	}
	// The SVG draws the graph once per layer: 2,000 layers made 75 MB of
	// it from 50 nodes. Pipelines have no use for layers, and Graphviz
	// cannot be told to ignore them (an empty value draws nothing).
	if l := g.GetStr("layers"); strings.TrimSpace(l) != "" {
		return errors.New("render: the graph has layers, which render does not draw")
	}
	return nil
}

// scan reads src as DOT's lexer does, as far as braces go: it returns
// their deepest nesting outside strings and comments, and whether src has
// anything but space and comments. It runs before Graphviz's parser,
// which 20,000 nested braces leave with unread input that fails the next
// parse.
func scan(src []byte) (depth int, tokens bool) {
	open := 0
	lineStart := true
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\n':
			lineStart = true
			continue
		case c == ' ' || c == '\t' || c == '\r':
			continue
		case c == '#' && lineStart, c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' { // a preprocessor line, a comment
				i++
			}
			i-- // the newline starts a line
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := bytes.Index(src[i+2:], []byte("*/"))
			if end < 0 {
				return depth, tokens
			}
			i += end + 3
			continue
		}
		lineStart, tokens = false, true
		switch c {
		case '"':
			for i++; i < len(src) && src[i] != '"'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case '<': // an HTML string: up to its matching '>'
			for n := 0; i < len(src); i++ {
				if src[i] == '<' {
					n++
				} else if src[i] == '>' {
					if n--; n == 0 {
						break
					}
				}
			}
		case '{':
			open++
			depth = max(depth, open)
		case '}':
			open = max(open-1, 0)
		}
	}
	return depth, tokens
}

// styleNodes bounds every node's drawing and, with statuses or opts.Next,
// colours it by its status. It returns the legend's entries (the statuses
// shown, "not run" and "next" included; none when nothing is coloured) and
// the nodes' names.
func styleNodes(g *cgraph.Graph, statuses map[string]string, opts Options) (shown map[string]bool, names []string, err error) {
	colour := len(statuses) > 0 || opts.Next != ""
	shown = map[string]bool{}
	n, err := g.FirstNode()
	for ; err == nil && n != nil; n, err = g.NextNode(n) {
		name, err := n.Name()
		if err != nil {
			return nil, nil, fmt.Errorf("render: a node's name: %w", err)
		}
		names = append(names, name)
		if err := boundNode(n, name); err != nil {
			return nil, nil, err
		}
		if !colour {
			continue
		}
		status, ran := statuses[name]
		fill, shownAs := colourNotRun, notRun
		if ran {
			fill, shownAs = statusColour(status), plain(status)
		}
		shown[shownAs] = true
		attrs := [][2]string{
			{"style", withFilled(n.GetStr("style"))},
			{"fillcolor", fill},
			{"tooltip", shownAs},
		}
		if name == opts.Next {
			shown[nextLabel] = true
			attrs[2][1] += " (next)"
			attrs = append(attrs, [2]string{"color", colourNext}, [2]string{"penwidth", penwidthNext})
		}
		for _, a := range attrs {
			if err := n.SafeSet(a[0], a[1], ""); err != nil {
				return nil, nil, fmt.Errorf("render: node %q: setting %s: %w", name, a[0], err)
			}
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("render: walking the nodes: %w", err)
	}
	return shown, names, nil
}

// boundNode refuses a record label nested deeper than maxDepth and cuts
// peripheries and sides to their bounds (see maxDepth).
func boundNode(n *cgraph.Node, name string) error {
	if shape := strings.ToLower(n.GetStr("shape")); shape == "record" || shape == "mrecord" {
		if d := braceDepth(n.GetStr("label")); d > maxDepth {
			return fmt.Errorf("render: node %q: its record label nests %d fields deep, over the limit of %d", name, d, maxDepth)
		}
	}
	for _, a := range []struct {
		name string
		max  int
	}{{"peripheries", maxPeripheries}, {"sides", maxSides}} {
		if v, err := strconv.Atoi(strings.TrimSpace(n.GetStr(a.name))); err == nil && v > a.max {
			if err := n.Set(a.name, strconv.Itoa(a.max)); err != nil {
				return fmt.Errorf("render: node %q: setting %s: %w", name, a.name, err)
			}
		}
	}
	return nil
}

// braceDepth is the deepest nesting of '{' in a record label.
func braceDepth(s string) int {
	depth, deepest := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // an escaped brace is text
		case '{':
			depth++
			deepest = max(deepest, depth)
		case '}':
			depth = max(depth-1, 0)
		}
	}
	return deepest
}

// statusColour is status's fill colour.
func statusColour(status string) string {
	if c, ok := statusColours[status]; ok {
		return c
	}
	return colourOther
}

// withFilled is a node's style with "filled" added, keeping the rest
// (rounded, dashed, ...).
func withFilled(style string) string {
	for _, s := range strings.Split(style, ",") {
		if strings.TrimSpace(s) == "filled" {
			return style
		}
	}
	if strings.TrimSpace(style) == "" {
		return "filled"
	}
	return style + ",filled"
}

// plain is a status without backslashes, which Graphviz reads as escapes
// in labels and tooltips (\N is the node's name), and reads differently in
// each. Real statuses have none.
func plain(s string) string { return strings.ReplaceAll(s, `\`, "") }

// addLegend adds a cluster with one small node per status shown, in
// legendOrder. Having no edges, it goes at the top, beside the start.
// names are the graph's nodes.
func addLegend(g *cgraph.Graph, shown map[string]bool, names []string) error {
	entries := make([]string, 0, len(shown))
	for _, s := range legendOrder {
		if shown[s] {
			entries = append(entries, s)
		}
	}
	var others []string
	for s := range shown {
		if !slices.Contains(legendOrder, s) {
			others = append(others, s)
		}
	}
	slices.Sort(others)
	entries = append(entries, others...)

	prefix, err := freePrefix(g, names)
	if err != nil {
		return err
	}
	cluster, err := g.CreateSubGraphByName("cluster_" + prefix)
	if err != nil {
		return fmt.Errorf("render: adding the legend: %w", err)
	}
	for _, a := range [][2]string{{"label", "status"}, {"fontsize", "10"}, {"style", "rounded,dashed"}, {"color", "#999999"}} {
		if err := cluster.SafeSet(a[0], a[1], ""); err != nil {
			return fmt.Errorf("render: adding the legend: %w", err)
		}
	}
	for i, status := range entries {
		n, err := cluster.CreateNodeByName(prefix + strconv.Itoa(i))
		if err != nil {
			return fmt.Errorf("render: adding the legend: %w", err)
		}
		fill := statusColour(status)
		if status == notRun || status == nextLabel {
			fill = colourNotRun
		}
		attrs := [][2]string{{"label", status}, {"shape", "box"}, {"style", "rounded,filled"}, {"fillcolor", fill},
			{"fontsize", "10"}, {"height", "0.3"}, {"tooltip", status}}
		if status == nextLabel {
			attrs = append(attrs, [2]string{"color", colourNext}, [2]string{"penwidth", penwidthNext})
		}
		for _, a := range attrs {
			if err := n.SafeSet(a[0], a[1], ""); err != nil {
				return fmt.Errorf("render: adding the legend: %w", err)
			}
		}
	}
	return nil
}

// freePrefix is a prefix for the legend's ids that none of names (g's
// nodes) starts with, and whose cluster g does not have, so that the
// legend never merges with the graph (creating a node or subgraph that
// exists finds it).
func freePrefix(g *cgraph.Graph, names []string) (string, error) {
	for i := 0; ; i++ {
		prefix := "morph_legend_"
		if i > 0 {
			prefix += strconv.Itoa(i) + "_"
		}
		sub, err := g.SubGraphByName("cluster_" + prefix)
		if err != nil {
			return "", fmt.Errorf("render: looking up a subgraph: %w", err)
		}
		if sub == nil && !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) }) {
			return prefix, nil
		}
	}
}
