package pipeline

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Bounds on what the transforms accept or produce; the graph is input.
const (
	// MaxStylesheetBytes bounds the graph's model_stylesheet.
	MaxStylesheetBytes = 64 << 10
	// MaxExpandedBytes bounds a prompt or label after $goal expansion, so
	// that a long goal in a prompt that repeats $goal cannot blow up.
	MaxExpandedBytes = 1 << 20
)

// Transform changes a parsed graph before it is validated and run. The
// built-in ones expand $goal and apply the model stylesheet; a host adds
// its own with ApplyTransformsWith (say, to set a default model).
type Transform interface {
	// Name names the transform in errors.
	Name() string
	// Apply changes g in place; an error stops the transforms.
	Apply(g *Graph) error
}

// DefaultTransforms returns the built-in transforms, in the order they
// run: $goal expansion, then the model stylesheet.
func DefaultTransforms() []Transform {
	return []Transform{goalTransform{}, stylesheetTransform{}}
}

// ApplyTransforms runs the built-in transforms on g. Call it once, after
// parsing and before Validate, and run the graph only when Validate finds
// no error: a model_stylesheet that does not parse is not an error here
// but skipped, and reported by Validate (rule stylesheet_syntax).
func ApplyTransforms(g *Graph) error { return ApplyTransformsWith(g) }

// ApplyTransformsWith runs the built-in transforms, then extra, in order,
// re-indexing the graph after each (a transform may add or remove nodes).
// The first error stops them; it names the file and the transform.
func ApplyTransformsWith(g *Graph, extra ...Transform) error {
	if g.Attrs == nil {
		g.Attrs = map[string]string{}
	}
	for _, t := range append(DefaultTransforms(), extra...) {
		err := t.Apply(g)
		g.reindex()
		if err != nil {
			return fmt.Errorf("%s: %s transform: %w", g.Where(0), t.Name(), err)
		}
	}
	return nil
}

// goalAttrs are the node attributes $goal is expanded in: what an agent
// stage is asked. Tool inputs are filled at run time, as JSON.
var goalAttrs = []string{"prompt", "label"}

// goalTransform replaces $goal in node prompts and labels with the graph's
// goal. With no goal it leaves $goal as it is, so that a goal given later
// (in the context, as graph.goal) can still fill it at run time.
type goalTransform struct{}

func (goalTransform) Name() string { return "goal" }

func (goalTransform) Apply(g *Graph) error {
	goal := g.Goal()
	if goal == "" {
		return nil
	}
	for _, n := range g.Nodes {
		for _, key := range goalAttrs {
			v, ok := n.Attrs[key]
			if !ok {
				continue
			}
			k := strings.Count(v, "$goal")
			if k == 0 {
				continue
			}
			if size := len(v) + k*(len(goal)-len("$goal")); size > MaxExpandedBytes {
				return fmt.Errorf("node %s: %s with $goal expanded would be %d bytes, more than %d: shorten the goal or use $goal less often",
					n.ID, key, size, MaxExpandedBytes)
			}
			n.Attrs[key] = strings.ReplaceAll(v, "$goal", goal)
		}
	}
	return nil
}

// stylesheetTransform applies the graph's model_stylesheet. A stylesheet
// that does not parse is skipped, none of it applied, and no error
// returned: validation's stylesheet_syntax rule reports it as an ERROR, in
// the diagnostics with everything else wrong with the graph (so that
// `morph pipeline validate --json` lists it), and the runner refuses the
// graph as it refuses any ERROR.
type stylesheetTransform struct{}

func (stylesheetTransform) Name() string { return "stylesheet" }

func (stylesheetTransform) Apply(g *Graph) error {
	src := g.Attrs["model_stylesheet"]
	if strings.TrimSpace(src) == "" {
		return nil
	}
	s, err := ParseStylesheet(src)
	if err != nil {
		return nil // stylesheet_syntax reports it
	}
	s.Apply(g)
	return nil
}

// stylesheetProps are the properties a stylesheet may set: the node
// attributes that choose an agent stage's model.
var stylesheetProps = []string{"llm_model", "llm_provider", "reasoning_effort"}

// Stylesheet is a parsed model stylesheet: CSS-like rules that set the
// model of many nodes at once, so that a pipeline can change models
// without editing every stage.
type Stylesheet struct {
	Rules []StyleRule
	// Warnings are what the stylesheet_syntax rule reports as warnings:
	// an alias read as its property, with the line and column.
	Warnings []string
}

// stylesheetAliases are other runners' names of stylesheet properties,
// read as morph's (fabro writes model for llm_model and provider for
// llm_provider).
var stylesheetAliases = map[string]string{"model": "llm_model", "provider": "llm_provider"}

// StyleRule is one rule: a selector and the properties it sets.
type StyleRule struct {
	// Selector is "*", a shape ("box"), ".class" or "#id".
	Selector string
	// Specificity is 0 for *, 1 for a shape, 2 for a class, 3 for an id;
	// the higher wins, and among equals the later rule.
	Specificity int
	// Properties maps llm_model, llm_provider or reasoning_effort to a
	// value.
	Properties map[string]string
	// Line is the rule's line in the stylesheet (1-based).
	Line int
}

// ParseStylesheet parses a model stylesheet:
//
//   - { llm_model: claude-sonnet-4-5; }
//     box { llm_provider: anthropic }
//     .critical { reasoning_effort: high }
//     #review { llm_model: "gpt-5" }
//
// One selector per rule; declarations "key: value" separated by ';' (the
// last may omit it); values bare (up to ';', '}' or the line's end) or
// double-quoted with \" and \\; /* comments */ anywhere between tokens.
// The properties model and provider (fabro's names) are read as llm_model
// and llm_provider, each with one of the stylesheet's Warnings. Any other property than llm_model,
// llm_provider and reasoning_effort is an error naming it, and so is a reasoning_effort other than low, medium
// or high. Errors give the line and column in the stylesheet.
func ParseStylesheet(src string) (*Stylesheet, error) {
	if len(src) > MaxStylesheetBytes {
		return nil, fmt.Errorf("stylesheet is %d bytes, more than the %d allowed", len(src), MaxStylesheetBytes)
	}
	p := &sheetParser{src: src, line: 1, col: 1}
	s := &Stylesheet{}
	for {
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.eof() {
			return s, nil
		}
		r, err := p.rule()
		if err != nil {
			return nil, err
		}
		s.Rules = append(s.Rules, r)
		s.Warnings = append(s.Warnings, p.warnings...)
		p.warnings = p.warnings[:0]
	}
}

// Apply sets each node's llm_model, llm_provider and reasoning_effort from
// the rule of highest specificity that matches it and sets the property
// (the later rule among equals), unless the node sets the attribute
// itself: an explicit attribute always wins. Rules are indexed by selector
// first, so the work is linear in nodes and rules.
func (s *Stylesheet) Apply(g *Graph) {
	bySelector := map[string][]int{}
	for i, r := range s.Rules {
		bySelector[r.Selector] = append(bySelector[r.Selector], i)
	}
	for _, n := range g.Nodes {
		winner := make([]int, len(stylesheetProps))
		for i := range winner {
			winner[i] = -1
		}
		consider := func(selector string) {
			for _, ri := range bySelector[selector] {
				r := s.Rules[ri]
				for pi, prop := range stylesheetProps {
					if _, ok := r.Properties[prop]; !ok {
						continue
					}
					// Rules are visited by selector, not in order: compare.
					if w := winner[pi]; w < 0 || r.Specificity > s.Rules[w].Specificity ||
						(r.Specificity == s.Rules[w].Specificity && ri > w) {
						winner[pi] = ri
					}
				}
			}
		}
		consider("*")
		consider(n.Shape())
		for _, c := range nodeClasses(n) {
			consider("." + c)
		}
		consider("#" + n.ID)
		for pi, prop := range stylesheetProps {
			if winner[pi] < 0 {
				continue
			}
			if _, explicit := n.Attrs[prop]; explicit {
				continue
			}
			if n.Attrs == nil {
				n.Attrs = map[string]string{}
			}
			n.Attrs[prop] = s.Rules[winner[pi]].Properties[prop]
		}
	}
}

// nodeClasses is the node's class attribute as a list (comma- or
// space-separated), without repeats.
func nodeClasses(n *Node) []string {
	fields := strings.FieldsFunc(n.Attrs["class"], func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	seen := make(map[string]bool, len(fields))
	out := fields[:0]
	for _, f := range fields {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// sheetParser scans a stylesheet, keeping the line and column of pos.
type sheetParser struct {
	src       string
	pos       int
	line, col int
	warnings  []string // of the rule being read
}

func (p *sheetParser) eof() bool { return p.pos >= len(p.src) }

func (p *sheetParser) peek() byte { return p.src[p.pos] }

// advance moves past one byte, counting lines and columns (in runes).
func (p *sheetParser) advance() {
	c := p.src[p.pos]
	p.pos++
	switch {
	case c == '\n':
		p.line++
		p.col = 1
	case c < 0x80 || c >= 0xC0: // a rune's first byte
		p.col++
	}
}

func (p *sheetParser) errorf(line, col int, format string, args ...any) error {
	return fmt.Errorf("line %d, column %d: %s", line, col, fmt.Sprintf(format, args...))
}

// skip passes whitespace and /* comments */.
func (p *sheetParser) skip() error {
	for !p.eof() {
		switch {
		case isCondSpace(p.peek()):
			p.advance()
		case strings.HasPrefix(p.src[p.pos:], "/*"):
			line, col := p.line, p.col
			end := strings.Index(p.src[p.pos+2:], "*/")
			if end < 0 {
				return p.errorf(line, col, "unterminated comment")
			}
			for stop := p.pos + 2 + end + 2; p.pos < stop; {
				p.advance()
			}
		default:
			return nil
		}
	}
	return nil
}

// ident reads [A-Za-z0-9_-]+ (possibly empty).
func (p *sheetParser) ident() string {
	start := p.pos
	for !p.eof() && isIdentByte(p.peek()) {
		p.advance()
	}
	return p.src[start:p.pos]
}

func (p *sheetParser) rule() (StyleRule, error) {
	r := StyleRule{Line: p.line, Properties: map[string]string{}}
	line, col := p.line, p.col
	switch c := p.peek(); c {
	case '*':
		p.advance()
		r.Selector = "*"
	case '.', '#':
		p.advance()
		name := p.ident()
		if name == "" {
			return r, p.errorf(line, col, "selector %q needs a name after it", string(c))
		}
		r.Selector = string(c) + name
		r.Specificity = 2
		if c == '#' {
			r.Specificity = 3
		}
	default:
		r.Selector = p.ident()
		if r.Selector == "" {
			return r, p.errorf(line, col, "expected a selector (*, a shape, .class or #id), found %q", c)
		}
		r.Specificity = 1
	}
	if err := p.skip(); err != nil {
		return r, err
	}
	if p.eof() || p.peek() != '{' {
		return r, p.errorf(p.line, p.col, "expected { after selector %q (one selector per rule)", r.Selector)
	}
	p.advance()
	for {
		if err := p.skip(); err != nil {
			return r, err
		}
		if p.eof() {
			return r, p.errorf(line, col, "rule %q is not closed with }", r.Selector)
		}
		switch p.peek() {
		case '}':
			p.advance()
			return r, nil
		case ';':
			p.advance()
			continue
		}
		if err := p.declaration(r.Properties); err != nil {
			return r, err
		}
	}
}

// declaration reads "key: value" into props.
func (p *sheetParser) declaration(props map[string]string) error {
	line, col := p.line, p.col
	key := p.ident()
	if key == "" {
		return p.errorf(line, col, "expected a property name, found %q", p.peek())
	}
	if prop, ok := stylesheetAliases[key]; ok {
		p.warnings = append(p.warnings, fmt.Sprintf("line %d, column %d: property %q is read as %s; write %s", line, col, key, prop, prop))
		key = prop
	}
	if !slices.Contains(stylesheetProps, key) {
		return p.errorf(line, col, "unknown property %q: a stylesheet sets %s", key, strings.Join(stylesheetProps, ", "))
	}
	if err := p.skip(); err != nil {
		return err
	}
	if p.eof() || p.peek() != ':' {
		return p.errorf(p.line, p.col, "expected : after property %q", key)
	}
	p.advance()
	for !p.eof() && (p.peek() == ' ' || p.peek() == '\t') {
		p.advance()
	}
	vline, vcol := p.line, p.col
	value, err := p.value()
	if err != nil {
		return err
	}
	if value == "" {
		return p.errorf(vline, vcol, "property %q has no value", key)
	}
	if key == "reasoning_effort" && !slices.Contains(reasoningEfforts, value) {
		return p.errorf(vline, vcol, "reasoning_effort %q is not one of %s", value, strings.Join(reasoningEfforts, ", "))
	}
	props[key] = value
	if err := p.skip(); err != nil {
		return err
	}
	if !p.eof() && p.peek() != ';' && p.peek() != '}' {
		return p.errorf(p.line, p.col, "expected ; or } after the value of %q", key)
	}
	return nil
}

// value reads a quoted value, or a bare one up to ';', '}', a comment or
// the line's end, trimmed.
func (p *sheetParser) value() (string, error) {
	if !p.eof() && p.peek() == '"' {
		v, n, qerr := scanQuoted(p.src[p.pos:])
		stop := p.pos + n
		if qerr != nil {
			stop = p.pos + qerr.off
		}
		for p.pos < stop {
			p.advance()
		}
		if qerr != nil {
			return "", p.errorf(p.line, p.col, "%s", qerr.msg)
		}
		return v, nil
	}
	start := p.pos
	for !p.eof() && !strings.ContainsRune(";}\n", rune(p.peek())) && !strings.HasPrefix(p.src[p.pos:], "/*") {
		if c := p.peek(); c == '"' || c == '{' {
			return "", p.errorf(p.line, p.col, "unexpected %q in a value (quote the whole value)", c)
		}
		p.advance()
	}
	return strings.TrimSpace(p.src[start:p.pos]), nil
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
