package pipeline

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestGoalExpansion(t *testing.T) {
	g := vGraph(map[string]string{"goal": "fix the bug"},
		vNode("a", "prompt", "Plan: $goal. Then $goal again.", "label", "Do $goal"),
		vNode("b", "tool_input", `{"q": "$goal"}`, "label", "no goal here"),
		vNode("c"),
	)
	if err := ApplyTransforms(g); err != nil {
		t.Fatal(err)
	}
	a, b, c := g.Node("a"), g.Node("b"), g.Node("c")
	if got := a.Attrs["prompt"]; got != "Plan: fix the bug. Then fix the bug again." {
		t.Errorf("prompt %q", got)
	}
	if got := a.Attrs["label"]; got != "Do fix the bug" {
		t.Errorf("label %q", got)
	}
	if got := b.Attrs["tool_input"]; got != `{"q": "$goal"}` {
		t.Errorf("tool_input changed: %q (the tool handler fills it at run time)", got)
	}
	if _, ok := c.Attrs["prompt"]; ok {
		t.Error("a prompt appeared on a node without one")
	}
}

// With no goal, $goal stays for the run to fill from the context.
func TestGoalExpansionWithoutGoal(t *testing.T) {
	g := vGraph(nil, vNode("a", "prompt", "Plan $goal"))
	if err := ApplyTransforms(g); err != nil {
		t.Fatal(err)
	}
	if got := g.Node("a").Attrs["prompt"]; got != "Plan $goal" {
		t.Errorf("prompt %q", got)
	}
}

func TestGoalExpansionBounded(t *testing.T) {
	goal := strings.Repeat("g", 64<<10)
	g := vGraph(map[string]string{"goal": goal}, vNode("a", "prompt", strings.Repeat("$goal ", 20)))
	err := ApplyTransforms(g)
	if err == nil || !strings.Contains(err.Error(), "test.dot: goal transform: node a: prompt with $goal expanded would be") {
		t.Fatalf("got %v, want an error about the expanded size", err)
	}
	if got := g.Node("a").Attrs["prompt"]; got != strings.Repeat("$goal ", 20) {
		t.Error("the prompt changed though the expansion was refused")
	}
	// Just under the bound is fine.
	g = vGraph(map[string]string{"goal": goal}, vNode("a", "prompt", strings.Repeat("$goal", 15)))
	if err := ApplyTransforms(g); err != nil {
		t.Fatal(err)
	}
}

func TestParseStylesheet(t *testing.T) {
	s, err := ParseStylesheet(`
		/* defaults */
		* { llm_model: claude-sonnet-4-5; llm_provider: anthropic }
		box{reasoning_effort:low;}
		.critical { llm_model: "gpt 5 \"pro\""; ; }
		#review { reasoning_effort: high; llm_model: first; llm_model: second /* last wins */ }
		Mdiamond {}
	`)
	if err != nil {
		t.Fatal(err)
	}
	want := []StyleRule{
		{Selector: "*", Specificity: 0, Line: 3, Properties: map[string]string{"llm_model": "claude-sonnet-4-5", "llm_provider": "anthropic"}},
		{Selector: "box", Specificity: 1, Line: 4, Properties: map[string]string{"reasoning_effort": "low"}},
		{Selector: ".critical", Specificity: 2, Line: 5, Properties: map[string]string{"llm_model": `gpt 5 "pro"`}},
		{Selector: "#review", Specificity: 3, Line: 6, Properties: map[string]string{"reasoning_effort": "high", "llm_model": "second"}},
		{Selector: "Mdiamond", Specificity: 1, Line: 7, Properties: map[string]string{}},
	}
	if len(s.Rules) != len(want) {
		t.Fatalf("%d rules: %+v", len(s.Rules), s.Rules)
	}
	for i, r := range s.Rules {
		w := want[i]
		if r.Selector != w.Selector {
			t.Errorf("rule %d: Selector = %q, want %q", i, r.Selector, w.Selector)
		}
		if r.Specificity != w.Specificity {
			t.Errorf("rule %d (%s): Specificity = %d, want %d", i, r.Selector, r.Specificity, w.Specificity)
		}
		if r.Line != w.Line {
			t.Errorf("rule %d (%s): Line = %d, want %d", i, r.Selector, r.Line, w.Line)
		}
		if !equalMaps(r.Properties, w.Properties) {
			t.Errorf("rule %d (%s): Properties = %v, want %v", i, r.Selector, r.Properties, w.Properties)
		}
	}
	if s, err := ParseStylesheet("  /* nothing */ "); err != nil || len(s.Rules) != 0 {
		t.Errorf("empty stylesheet: %+v, %v", s, err)
	}
}

// Spec 8.4 lists llm_model, llm_provider and reasoning_effort; fabro's
// published stylesheets write model and provider, which morph reads as
// llm_model and llm_provider with a warning each, and an explicit node
// attribute still wins (8.5).
func TestStylesheetModelAlias(t *testing.T) {
	s, err := ParseStylesheet("* { llm_provider: p }\n.fast { model: small; provider: other }")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Rules[1].Properties; !equalMaps(got, map[string]string{"llm_model": "small", "llm_provider": "other"}) {
		t.Errorf("properties %v, want llm_model: small, llm_provider: other", got)
	}
	if want := []string{
		`line 2, column 9: property "model" is read as llm_model; write llm_model`,
		`line 2, column 23: property "provider" is read as llm_provider; write llm_provider`,
	}; !slices.Equal(s.Warnings, want) {
		t.Errorf("warnings %q, want %q", s.Warnings, want)
	}
	g := vGraph(map[string]string{"model_stylesheet": "* { model: small }"}, vNode("a", "prompt", "x"), vNode("b", "prompt", "y", "llm_model", "mine"))
	if err := ApplyTransforms(g); err != nil {
		t.Fatal(err)
	}
	if a, b := g.Nodes[0].Attrs["llm_model"], g.Nodes[1].Attrs["llm_model"]; a != "small" || b != "mine" {
		t.Errorf("llm_model of a %q, b %q; want small, mine", a, b)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestParseStylesheetErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"* { modle: x }", `line 1, column 5: unknown property "modle": a stylesheet sets llm_model, llm_provider, reasoning_effort`},
		{"* { model: x }", ""}, // fabro's name of llm_model (TestStylesheetModelAlias)
		{"* { llm_model x }", `line 1, column 15: expected : after property "llm_model"`},
		{"* { llm_model: }", `line 1, column 16: property "llm_model" has no value`},
		{"* { llm_model: a b\n }", ""}, // a bare value may hold spaces
		{"* { llm_model: \"open }", `line 1, column 16: unterminated quoted value`},
		{"* { llm_model: \"a\\nb\" }", `line 1, column 18: unknown escape`},
		{"* { llm_model: \"a\" b }", `line 1, column 20: expected ; or } after the value of "llm_model"`},
		{"* { llm_model: a\"b }", `line 1, column 17: unexpected '"' in a value`},
		{"* { reasoning_effort: extreme }", `line 1, column 23: reasoning_effort "extreme" is not one of low, medium, high`},
		{"\n\n  .  { }", `line 3, column 3: selector "." needs a name`},
		{"#{ }", `line 1, column 1: selector "#" needs a name`},
		{"box, .x { llm_model: m }", `line 1, column 4: expected { after selector "box" (one selector per rule)`},
		{"box llm_model: m }", `line 1, column 5: expected { after selector "box"`},
		{"* { llm_model: m", `line 1, column 1: rule "*" is not closed with }`},
		{"{ llm_model: m }", `line 1, column 1: expected a selector`},
		{"* { /* open", `line 1, column 5: unterminated comment`},
		{"* { : m }", `line 1, column 5: expected a property name`},
		{"é { }", `line 1, column 1: expected a selector`},
		{"* { llm_model: \"é\" x }", `line 1, column 20: expected ; or }`}, // columns count runes
		{strings.Repeat(" ", MaxStylesheetBytes+1), "more than the 65536 allowed"},
	}
	for _, c := range cases {
		_, err := ParseStylesheet(c.src)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("ParseStylesheet(%.40q): %v", c.src, err)
		case c.want != "" && err == nil:
			t.Errorf("ParseStylesheet(%.40q): no error, want %q", c.src, c.want)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("ParseStylesheet(%.40q) = %q, want %q", c.src, err, c.want)
		}
	}
}

func TestStylesheetApply(t *testing.T) {
	sheet := `
		* { llm_model: base; llm_provider: anthropic; reasoning_effort: medium }
		box { llm_model: boxy }
		.fast { llm_model: fast-model; reasoning_effort: low }
		.deep { llm_model: deep-model }
		#special { llm_model: special-model }
		box { llm_provider: later-box }
		* { reasoning_effort: high }
	`
	g := vGraph(map[string]string{"model_stylesheet": sheet},
		vNode("plain"), // box by default
		vNode("hexa", "shape", "hexagon"),
		vNode("fastone", "class", "fast"),
		vNode("both", "class", "deep, fast"),         // equal specificity: the later rule (.deep) wins
		vNode("spaced", "class", "fast   deep,deep"), // space-separated too
		vNode("special", "class", "fast"),            // #id beats .class
		vNode("explicit", "llm_model", "mine", "class", "fast"),
		vNode("emptyexplicit", "llm_provider", ""), // an explicit empty value still wins
	)
	if err := ApplyTransforms(g); err != nil {
		t.Fatal(err)
	}
	want := map[string][3]string{ // model, provider, effort
		"plain":         {"boxy", "later-box", "high"},
		"hexa":          {"base", "anthropic", "high"},
		"fastone":       {"fast-model", "later-box", "low"},
		"both":          {"deep-model", "later-box", "low"},
		"spaced":        {"deep-model", "later-box", "low"},
		"special":       {"special-model", "later-box", "low"},
		"explicit":      {"mine", "later-box", "low"},
		"emptyexplicit": {"boxy", "", "high"},
	}
	for id, w := range want {
		n := g.Node(id)
		got := [3]string{n.Attrs["llm_model"], n.Attrs["llm_provider"], n.Attrs["reasoning_effort"]}
		if got != w {
			t.Errorf("%s: got %q, want %q", id, got, w)
		}
	}
}

func TestStylesheetApplyNilAttrs(t *testing.T) {
	g := &Graph{Attrs: map[string]string{"model_stylesheet": "#a { llm_model: m }"}, Nodes: []*Node{{ID: "a"}}}
	if err := ApplyTransforms(g); err != nil {
		t.Fatal(err)
	}
	if g.Node("a").Attrs["llm_model"] != "m" {
		t.Errorf("attrs %v", g.Node("a").Attrs)
	}
}

// A stylesheet that does not parse is skipped by the transform (nothing of
// it applied, no error) and reported by validation as an ERROR, so that it
// is listed with the other diagnostics and still refuses the run.
func TestApplyTransformsStylesheetError(t *testing.T) {
	g := vGraph(map[string]string{"model_stylesheet": "* { llm_model: m }\n*\n{ temperature: 1 }"}, vNode("a"))
	if err := ApplyTransforms(g); err != nil {
		t.Fatalf("ApplyTransforms: %v, want the sheet skipped", err)
	}
	if m, ok := g.Node("a").Attrs["llm_model"]; ok {
		t.Errorf("llm_model=%q: a rule of a stylesheet that does not parse was applied", m)
	}
	ds := Validate(g, ValidateOptions{})
	got := withRule(ds, RuleStylesheetSyntax)
	want := `graph attribute model_stylesheet: line 3, column 3: unknown property "temperature"`
	if len(got) != 1 {
		t.Fatalf("%d stylesheet_syntax diagnostics %+v, want 1", len(got), got)
	}
	if got[0].Severity != SeverityError {
		t.Errorf("stylesheet_syntax: Severity = %v, want %v", got[0].Severity, SeverityError)
	}
	if !strings.HasPrefix(got[0].Message, want) {
		t.Errorf("stylesheet_syntax: Message = %q, want it to start %q", got[0].Message, want)
	}
	if !HasErrors(ds) {
		t.Error("HasErrors is false: the runner would run the graph")
	}
}

// The same from DOT source: validate lists the stylesheet error among the
// others instead of stopping at it, and the runner refuses the graph.
func TestStylesheetErrorRefusesRun(t *testing.T) {
	src := `digraph p {
  model_stylesheet = "* { modle: x }"
  start [shape=Mdiamond]
  work  [prompt="do it"]
  done  [shape=Msquare]
  start -> work -> done
  work -> start [condition="outcome=fail"]
}`
	g, err := ParseDOTNamed("p.dot", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	diags, err := (&Runner{}).Prepare(g)
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("Prepare: %v, want a *ValidationError", err)
	}
	var rules []string
	for _, d := range diags {
		rules = append(rules, d.Rule)
	}
	if !slices.Contains(rules, RuleStylesheetSyntax) || !slices.Contains(rules, RuleStartNoIncoming) {
		t.Errorf("rules %q, want stylesheet_syntax and start_no_incoming", rules)
	}
	if !strings.Contains(err.Error(), `p.dot: stylesheet_syntax: graph attribute model_stylesheet: line 1, column 5: unknown property "modle"`) {
		t.Errorf("error %q", err)
	}
}

// addNode is a host transform that adds a node.
type addNode struct{ id string }

func (a addNode) Name() string { return "add-" + a.id }

func (a addNode) Apply(g *Graph) error {
	g.Nodes = append(g.Nodes, &Node{ID: a.id, Attrs: map[string]string{"prompt": "$goal"}})
	return nil
}

type failing struct{}

func (failing) Name() string         { return "failing" }
func (failing) Apply(g *Graph) error { return errNope }

var errNope = errors.New("nope")

func TestApplyTransformsWith(t *testing.T) {
	g := vGraph(map[string]string{"goal": "G", "model_stylesheet": "* { llm_model: m }"}, vNode("a", "prompt", "$goal"))
	if err := ApplyTransformsWith(g, addNode{"x"}); err != nil {
		t.Fatal(err)
	}
	x := g.Node("x") // found: the graph was re-indexed
	if x == nil {
		t.Fatal("the host transform's node is not indexed")
	}
	// Host transforms run after the built-in ones.
	if x.Attrs["prompt"] != "$goal" || x.Attrs["llm_model"] != "" {
		t.Errorf("x: %v", x.Attrs)
	}
	if a := g.Node("a"); a.Attrs["prompt"] != "G" || a.Attrs["llm_model"] != "m" {
		t.Errorf("a: %v", a.Attrs)
	}

	err := ApplyTransformsWith(g, failing{}, addNode{"never"})
	if !errors.Is(err, errNope) || !strings.Contains(err.Error(), "failing transform") {
		t.Errorf("got %v", err)
	}
	if g.Node("never") != nil {
		t.Error("a transform ran after one failed")
	}
}

func FuzzParseStylesheet(f *testing.F) {
	for _, s := range []string{"* { llm_model: a }", "#x{llm_provider:\"q\\\"\"}", "/* c */ .a { reasoning_effort: low; }", "box {"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sheet, err := ParseStylesheet(s)
		if err != nil {
			return
		}
		g := vGraph(nil, vNode("x", "class", "a"), vNode("y", "shape", "box"))
		sheet.Apply(g)
	})
}
