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

	"github.com/morphhost/morph/internal/renderproc"
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
	// Nodes are what the run did at each node past its last status: a
	// node visited or attempted more than once has the counts under its
	// label ("x2, 3 attempts"), and its tooltip lists the statuses of its
	// visits, which are also drawn under its label when they were not all
	// its last (a verify that failed, then passed: "fail > success").
	Nodes map[string]renderproc.NodeRun
	// Edges are the edges the run took: when there are any, those are
	// drawn thick and dark, with their count when over one, and the
	// others thin and grey.
	Edges []renderproc.EdgeTaken
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

	colourTaken   = "#1b5e20"
	penwidthTaken = "2.5"
	colourUntaken = "#b0b0b0"
	// maxHistoryShown bounds the statuses drawn beside a node; its tooltip
	// lists up to maxHistory.
	maxHistoryShown = 4
	maxHistory      = 20
)

// font is the drawing's font: Graphviz has no font metrics under wazero and
// estimates text widths from tables it has for Helvetica (Arial, and
// Liberation Sans on Linux, share its metrics), where Times, its default,
// is drawn in whatever serif font a viewer has, often wider, clipping the
// graph's title.
const font = "Helvetica,Arial,sans-serif"

// Defaults set where the source sets none. pad (in inches) leaves a margin
// for a viewer's font that is wider still: 0.6 em a character instead of
// Graphviz's Helvetica estimate, about 0.5, makes a 25-character title at
// 14 pt 35 pt wider.
var (
	graphDefaults = [][2]string{{"pad", "0.5"}, {"nodesep", "0.4"}, {"fontname", font}}
	// A node without a shape is a box, as the pipeline spec has it
	// (Graphviz's own default is an ellipse).
	nodeDefaults = [][2]string{{"shape", "box"}, {"fontname", font}}
	edgeDefaults = [][2]string{{"fontname", font}}
)

// labelPad is put either side of an edge's label: dot draws the label's
// box flush against its edge, so that a viewer's font wider than
// Graphviz's estimate draws the label across it. No-break spaces: Graphviz
// trims ordinary ones.
const labelPad = "\u00a0\u00a0"

// attrs is what setDefaults sets attributes on: a graph, node or edge.
type attrs interface {
	GetStr(name string) string
	SafeSet(name, value, def string) error
}

// setDefaults sets each of defs on obj that the source leaves empty.
func setDefaults(obj attrs, defs [][2]string) error {
	for _, a := range defs {
		if strings.TrimSpace(obj.GetStr(a[0])) != "" {
			continue
		}
		if err := obj.SafeSet(a[0], a[1], ""); err != nil {
			return fmt.Errorf("render: setting %s: %w", a[0], err)
		}
	}
	return nil
}

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
	if err := setDefaults(g, graphDefaults); err != nil {
		return nil, err
	}
	shown, names, err := styleNodes(g, statuses, opts)
	if err != nil {
		return nil, err
	}
	if err := styleEdges(g, opts.Edges); err != nil {
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

// styleNodes bounds every node's drawing, gives it the defaults and, with
// statuses or opts.Next, colours it by its status, with opts.Nodes labels
// it with its counts and history. It returns the legend's entries (the
// statuses shown, "not run" and "next" included; none when nothing is
// coloured) and the nodes' names.
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
		if err := setDefaults(n, nodeDefaults); err != nil {
			return nil, nil, fmt.Errorf("render: node %q: %w", name, err)
		}
		var attrs [][2]string
		var tooltip []string
		if colour {
			status, ran := statuses[name]
			fill, shownAs := colourNotRun, notRun
			if ran {
				fill, shownAs = statusColour(status), plain(status)
			}
			shown[shownAs] = true
			attrs = append(attrs, [2]string{"style", withFilled(n.GetStr("style"))}, [2]string{"fillcolor", fill})
			tooltip = append(tooltip, shownAs)
			if name == opts.Next {
				shown[nextLabel] = true
				tooltip = append(tooltip, "(next)")
				attrs = append(attrs, [2]string{"color", colourNext}, [2]string{"penwidth", penwidthNext})
			}
		}
		if run, ok := opts.Nodes[name]; ok {
			lines, tip := runText(run)
			if lines != "" && !isRecord(n) {
				// Lines of the label, not an xlabel: dot leaves room for
				// a label, where an xlabel may be drawn past the drawing.
				label := n.GetStr("label")
				if label == "" {
					label = `\N` // Graphviz's default: the node's name
				}
				attrs = append(attrs, [2]string{"label", label + `\n` + lines})
			}
			if tip != "" {
				tooltip = append(tooltip, tip)
			}
		}
		if len(tooltip) > 0 {
			attrs = append(attrs, [2]string{"tooltip", strings.Join(tooltip, " ")})
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

// runText is what a node's drawing says of run: lines added to its label
// (the visit and attempt counts over one, then the statuses of its
// last visits when they were not all its last one) and its tooltip's
// part (the counts and every status kept, oldest first).
func runText(run renderproc.NodeRun) (label, tooltip string) {
	var counts []string
	if run.Visits > 1 {
		counts = append(counts, "x"+strconv.Itoa(run.Visits))
	}
	if run.Attempts > 1 {
		counts = append(counts, strconv.Itoa(run.Attempts)+" attempts")
	}
	history, dropped := run.History, max(run.HistoryDropped, 0)
	if len(history) > maxHistory { // a checkpoint may hold any number
		dropped += len(history) - maxHistory
		history = history[len(history)-maxHistory:]
	}
	statuses := make([]string, len(history))
	for i, s := range history {
		statuses[i] = plain(s)
	}
	var lines, tip []string
	if len(counts) > 0 {
		lines = append(lines, strings.Join(counts, ", "))
		tip = append(tip, "("+strings.Join(counts, ", ")+")")
	}
	if len(statuses) > 1 || dropped > 0 {
		earlier := ""
		if dropped > 0 {
			earlier = "+" + strconv.Itoa(dropped) + " earlier, "
		}
		tip = append(tip, "visits: "+earlier+strings.Join(statuses, ", "))
	}
	if len(statuses) > 0 && slices.ContainsFunc(statuses, func(s string) bool { return s != statuses[len(statuses)-1] }) {
		shownHistory := statuses[max(len(statuses)-maxHistoryShown, 0):]
		prefix := ""
		if len(shownHistory) < len(statuses) || dropped > 0 {
			prefix = "... > "
		}
		lines = append(lines, prefix+strings.Join(shownHistory, " > "))
	}
	// Graphviz reads "\n" in a label as a line break.
	return strings.Join(lines, `\n`), strings.Join(tip, " ")
}

// styleEdges gives every edge the defaults and, when the run took any
// (taken), draws those thick and dark, with their count when over one,
// and the others thin and grey.
func styleEdges(g *cgraph.Graph, taken []renderproc.EdgeTaken) error {
	counts := make(map[renderproc.EdgeTaken]int, len(taken))
	for _, e := range taken {
		if e.Count > 0 {
			counts[renderproc.EdgeTaken{From: e.From, To: e.To, Nth: e.Nth}] += e.Count
		}
	}
	n, err := g.FirstNode()
	for ; err == nil && n != nil; n, err = g.NextNode(n) {
		from, err := n.Name()
		if err != nil {
			return fmt.Errorf("render: a node's name: %w", err)
		}
		nth := map[string]int{} // cgraph keeps a node's edges in the order they were made: the source's
		e, err := g.FirstOut(n)
		for ; err == nil && e != nil; e, err = g.NextOut(e) {
			to, err := e.Node().Name()
			if err != nil {
				return fmt.Errorf("render: an edge from %q: %w", from, err)
			}
			key := renderproc.EdgeTaken{From: from, To: to, Nth: nth[to]}
			nth[to]++
			if err := styleEdge(e, key, counts, len(taken) > 0); err != nil {
				return fmt.Errorf("render: edge %s -> %s: %w", from, to, err)
			}
		}
		if err != nil {
			return fmt.Errorf("render: walking the edges of %q: %w", from, err)
		}
	}
	if err != nil {
		return fmt.Errorf("render: walking the nodes: %w", err)
	}
	return nil
}

// styleEdge styles e, key among the edges, as styleEdges says: by its
// count when run.
func styleEdge(e *cgraph.Edge, key renderproc.EdgeTaken, counts map[renderproc.EdgeTaken]int, run bool) error {
	if err := setDefaults(e, edgeDefaults); err != nil {
		return err
	}
	label := e.GetStr("label")
	var attrs [][2]string
	if run {
		attrs = [][2]string{{"color", colourUntaken}, {"fontcolor", colourUntaken}, {"penwidth", "1"}, {"tooltip", "not taken"}}
		if c := counts[key]; c > 0 {
			attrs = [][2]string{{"color", colourTaken}, {"penwidth", penwidthTaken}, {"tooltip", "taken once"}}
			if c > 1 {
				attrs[2][1] = fmt.Sprintf("taken %d times", c)
				label = strings.TrimSpace(label + " x" + strconv.Itoa(c))
			}
		}
	}
	if label != "" {
		attrs = append(attrs, [2]string{"label", labelPad + label + labelPad})
	}
	for _, a := range attrs {
		if err := e.SafeSet(a[0], a[1], ""); err != nil {
			return fmt.Errorf("setting %s: %w", a[0], err)
		}
	}
	return nil
}

// boundNode refuses a record label nested deeper than maxDepth and cuts
// peripheries and sides to their bounds (see maxDepth).
func boundNode(n *cgraph.Node, name string) error {
	if isRecord(n) {
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

// isRecord says whether n is drawn as a record, whose label is its
// fields.
func isRecord(n *cgraph.Node) bool {
	shape := strings.ToLower(n.GetStr("shape"))
	return shape == "record" || shape == "mrecord"
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
			{"fontsize", "10"}, {"fontname", font}, {"height", "0.3"}, {"tooltip", status}}
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
