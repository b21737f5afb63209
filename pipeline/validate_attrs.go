package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/morphhost/morph/internal/suggest"
)

// checkStylesheetSyntax reports a model_stylesheet that does not parse.
// The stylesheet transform skips such a sheet (it applies none of it), so
// this error is what tells of it, and what refuses the run. The parser
// keeps no line for graph attributes, so the diagnostic has none; the
// message gives the line and column inside the stylesheet.
func checkStylesheetSyntax(g *Graph, _ ValidateOptions) []Diagnostic {
	src := g.Attrs["model_stylesheet"]
	if strings.TrimSpace(src) == "" {
		return nil
	}
	sheet, err := ParseStylesheet(src)
	if err != nil {
		return []Diagnostic{graphDiag(RuleStylesheetSyntax, SeverityError,
			`write rules selector { llm_model: NAME; llm_provider: NAME; reasoning_effort: low|medium|high } with selector *, a shape, .class or #id`,
			"graph attribute model_stylesheet: %v (none of the stylesheet was applied)", err)}
	}
	var out []Diagnostic
	for _, w := range sheet.Warnings {
		out = append(out, graphDiag(RuleStylesheetSyntax, SeverityWarning, "write llm_model, llm_provider or reasoning_effort",
			"graph attribute model_stylesheet: %s", w))
	}
	return out
}

func checkFidelity(g *Graph, _ ValidateOptions) []Diagnostic {
	const fix = "use full, truncate, compact, summary:low, summary:medium or summary:high"
	bad := func(v string) bool {
		return strings.TrimSpace(v) != "" && !validFidelity(strings.TrimSpace(v))
	}
	var out []Diagnostic
	if v := g.Attrs["default_fidelity"]; bad(v) {
		out = append(out, graphDiag(RuleFidelityValid, SeverityWarning, fix, "graph default_fidelity=%q is not a fidelity mode", v))
	}
	for _, n := range g.Nodes {
		if v := n.Attrs["fidelity"]; bad(v) {
			out = append(out, nodeDiag(RuleFidelityValid, SeverityWarning, n, fix, "node %s: fidelity=%q is not a fidelity mode", n.ID, v))
		}
	}
	for _, e := range g.Edges {
		if v := e.Attrs["fidelity"]; bad(v) {
			out = append(out, edgeDiag(RuleFidelityValid, SeverityWarning, e, fix, "edge %s: fidelity=%q is not a fidelity mode", e, v))
		}
	}
	return out
}

// attrCheck checks one typed attribute in attrs; who names the owner in
// the error.
type attrCheck struct {
	check func(attrs map[string]string, key, who string) error
	fix   string
}

func countAttr(attrs map[string]string, key, who string) error {
	n, err := intAttr(attrs, key, 0, who)
	if err == nil && n < 0 {
		err = fmt.Errorf("%s: %s=%d is negative", who, key, n)
	}
	return err
}

func intAttrCheck(attrs map[string]string, key, who string) error {
	_, err := intAttr(attrs, key, 0, who)
	return err
}

func boolAttrCheck(attrs map[string]string, key, who string) error {
	_, err := boolAttr(attrs, key, false, who)
	return err
}

// attrWarning is a value attr_value accepts, with a WARNING and its own
// fix, rather than refuses.
type attrWarning struct{ msg, fix string }

func (w *attrWarning) Error() string { return w.msg }

func durationAttr(attrs map[string]string, key, who string) error {
	v := strings.TrimSpace(attrs[key])
	if v == "" {
		return nil
	}
	if n, ok := bareSeconds(v); ok && n != 0 {
		return &attrWarning{fmt.Sprintf("%s: %s=%q has no unit: read as %ds", who, key, v, n),
			fmt.Sprintf("write %s=\"%ds\"", key, n)}
	}
	if _, err := ParseDuration(v); err != nil {
		return fmt.Errorf("%s: %s: %w", who, key, err)
	}
	return nil
}

// enumAttr checks that the attribute is one of values.
func enumAttr(values ...string) func(attrs map[string]string, key, who string) error {
	return func(attrs map[string]string, key, who string) error {
		if v := strings.TrimSpace(attrs[key]); v != "" && !slices.Contains(values, v) {
			return fmt.Errorf("%s: %s=%q is not one of %s", who, key, v, strings.Join(values, ", "))
		}
		return nil
	}
}

// attrScope is where an attribute means something: on the graph, on a
// node, on an edge, or a combination.
type attrScope uint8

const (
	onGraph attrScope = 1 << iota
	onNode
	onEdge
	anywhere = onGraph | onNode | onEdge
)

// String names the scope as a message says it ("a node attribute").
func (s attrScope) String() string {
	var names []string
	for _, x := range []struct {
		bit  attrScope
		name string
	}{{onGraph, "graph"}, {onNode, "node"}, {onEdge, "edge"}} {
		if s&x.bit != 0 {
			names = append(names, x.name)
		}
	}
	return strings.Join(names, " or ")
}

// an is the scope with its article: "a node", "an edge".
func (s attrScope) an() string {
	if name := s.String(); strings.HasPrefix(name, "edge") {
		return "an " + name
	}
	return "a " + s.String()
}

// attrSpec is a known attribute: where it applies and, when it has a
// type, how attr_value checks its value (nil: any text).
type attrSpec struct {
	scope attrScope
	value *attrCheck
}

var (
	countCheck    = &attrCheck{countAttr, "write a whole number, 0 or more"}
	boolCheck     = &attrCheck{boolAttrCheck, "write true or false"}
	durationCheck = &attrCheck{durationAttr, "write a duration such as 250ms, 30s, 5m, 2h or 1d"}
	// gv is a Graphviz presentation attribute: render reads it, the run
	// does not; it may be set anywhere.
	gv = attrSpec{scope: anywhere}
)

// knownAttrs is every attribute a pipeline may set: the reference in the
// package documentation (doc.go) and the Graphviz presentation attributes
// people put in pipelines. It drives two rules: unknown_attribute warns
// about a key that is not here (or is here for another scope), and
// attr_value checks the value of every key with a type, wherever it is
// set, since a value that does not parse would otherwise be ignored at run
// time and the run would differ from what the file says. A WebAssembly
// stage handler's own attributes are its plugin's business and are not
// listed (unknown_attribute skips its nodes).
var knownAttrs = map[string]attrSpec{
	// Graph attributes.
	"goal":                  {scope: onGraph},
	"model_stylesheet":      {scope: onGraph},
	"default_max_retries":   {onGraph, countCheck},
	"default_max_retry":     {onGraph, countCheck}, // attractor's old name; the parser renames it
	"default_fidelity":      {scope: onGraph},
	"max_node_visits":       {onGraph | onNode, countCheck},
	"max_restarts":          {onGraph, positiveCountCheck},
	"max_steps":             {onGraph, countCheck},
	"retry_target":          {scope: onGraph | onNode},
	"fallback_retry_target": {scope: onGraph | onNode},

	// Every node; label and class are Graphviz's too.
	"label":         {scope: anywhere},
	"class":         {scope: anywhere},
	"shape":         {scope: onNode},
	"type":          {scope: onNode},
	"handler":       {scope: onNode},
	"node_type":     {onNode, &attrCheck{nodeTypeAttr, "write type instead of node_type"}}, // kilroy's and fabro's
	"max_retries":   {onNode, countCheck},
	"allow_partial": {onNode, boolCheck},
	"timeout":       {onNode, durationCheck},
	"goal_gate":     {onNode, boolCheck},

	// Agent stages.
	"prompt":           {scope: onNode},
	"llm_model":        {scope: onNode},
	"llm_provider":     {scope: onNode},
	"base_url":         {scope: onNode},
	"reasoning_effort": {onNode, &attrCheck{enumAttr(reasoningEfforts...), "use low, medium or high"}},
	"max_turns":        {onNode, countCheck},
	"system_prompt":    {scope: onNode},
	"fidelity":         {scope: onNode | onEdge},
	"thread_id":        {scope: onGraph | onNode | onEdge},
	"auto_status":      {onNode, boolCheck},
	"workdir":          {scope: onNode},

	// Other handlers.
	"human.default_choice":   {scope: onNode},
	"human.timeout":          {onNode, durationCheck},
	"human.type":             {onNode, &attrCheck{enumAttr(humanTypes...), "use multiple_choice (the default), yes_no, confirmation or freeform"}},
	"mode":                   {onNode, &attrCheck{humanModeAttr, "write human.type instead of mode (multiple_choice, yes_no, confirmation or freeform)"}}, // tracker's
	"tool_hooks.pre":         {scope: onGraph | onNode},
	"tool_hooks.post":        {scope: onGraph | onNode},
	"tool_hooks.timeout":     {onGraph | onNode, &attrCheck{toolHookTimeoutAttr, "write a duration such as 30s or 2m, at most 10m"}},
	"tool":                   {scope: onNode},
	"tool_input":             {scope: onNode},
	"tool_command":           {scope: onNode},
	"join_policy":            {onNode, &attrCheck{enumAttr("wait_all", "first_success"), "use wait_all or first_success"}},
	"max_parallel":           {onNode, countCheck},
	"merge_context":          {onNode, &attrCheck{enumAttr(MergeNone, MergeBest), "use none (the default) or best"}},
	"stack.child_dotfile":    {scope: onGraph | onNode},
	"manager.max_cycles":     {onNode, positiveCountCheck},
	"manager.poll_interval":  {onNode, &attrCheck{positiveDurationAttr, "write a duration longer than 0, such as 30s or 5m"}},
	"manager.max_child_runs": {onNode, positiveCountCheck},
	"manager.actions":        {onNode, &attrCheck{managerActionsAttr, "use a comma-separated list of observe, wait and steer"}},
	"manager.steer_prompt":   {scope: onNode},
	"manager.steer_cooldown": {onNode, countCheck},
	"manager.stop_condition": {scope: onNode},
	"manager.goal":           {scope: onNode},

	// Edges.
	"condition":    {scope: onEdge},
	"weight":       {onEdge, &attrCheck{intAttrCheck, "write a whole number; the higher weight wins"}},
	"loop_restart": {onEdge, boolCheck}, // a fresh loop at the target (restart.go)

	// Graphviz presentation.
	"color": gv, "fillcolor": gv, "style": gv, "fontname": gv, "fontsize": gv, "fontcolor": gv,
	"penwidth": gv, "tooltip": gv, "width": gv, "height": gv, "xlabel": gv, "rankdir": gv, "rank": gv,
	"splines": gv, "nodesep": gv, "ranksep": gv, "bgcolor": gv, "margin": gv, "pad": gv,
	"arrowhead": gv, "arrowtail": gv, "arrowsize": gv, "dir": gv, "constraint": gv, "minlen": gv,
	"headlabel": gv, "taillabel": gv, "labelfontcolor": gv, "labelfontsize": gv, "labelfontname": gv,
	"labelloc": gv, "labeljust": gv, "lhead": gv, "ltail": gv, "id": gv, "comment": gv, "URL": gv,
	"href": gv, "target": gv, "group": gv, "ordering": gv, "concentrate": gv, "compound": gv,
	"newrank": gv, "fixedsize": gv, "peripheries": gv, "sides": gv, "regular": gv, "orientation": gv,
	"size": gv, "ratio": gv, "dpi": gv, "layout": gv, "colorscheme": gv, "gradientangle": gv,
}

// reasoningEfforts are the efforts models take; the stylesheet checks them
// too.
var reasoningEfforts = []string{"low", "medium", "high"}

// typedAttrKeys are the keys of knownAttrs with a value check, in order,
// for a stable report.
var typedAttrKeys = func() []string {
	var keys []string
	for _, k := range sortedKeys(knownAttrs) {
		if knownAttrs[k].value != nil {
			keys = append(keys, k)
		}
	}
	return keys
}()

// knownAttrNames are, per scope (onGraph, onNode, onEdge), the names of
// knownAttrs valid there, sorted: the candidates of a "did you mean".
var knownAttrNames = func() map[attrScope][]string {
	m := map[attrScope][]string{}
	for _, k := range sortedKeys(knownAttrs) {
		for _, s := range []attrScope{onGraph, onNode, onEdge} {
			if knownAttrs[k].scope&s != 0 {
				m[s] = append(m[s], k)
			}
		}
	}
	return m
}()

func checkAttrValues(g *Graph, _ ValidateOptions) []Diagnostic {
	var out []Diagnostic
	check := func(attrs map[string]string, who string, diag func(sev Severity, fix, msg string) Diagnostic) {
		for _, key := range typedAttrKeys {
			if _, ok := attrs[key]; !ok {
				continue
			}
			c := knownAttrs[key].value
			err := c.check(attrs, key, who)
			var w *attrWarning
			switch {
			case errors.As(err, &w):
				out = append(out, diag(SeverityWarning, w.fix, w.msg))
			case err != nil:
				out = append(out, diag(SeverityError, c.fix, err.Error()))
			}
		}
	}
	check(g.Attrs, "graph", func(sev Severity, fix, msg string) Diagnostic {
		return graphDiag(RuleAttrValue, sev, fix, "%s", msg)
	})
	for _, n := range g.Nodes {
		check(n.Attrs, "node "+n.ID, func(sev Severity, fix, msg string) Diagnostic {
			return nodeDiag(RuleAttrValue, sev, n, fix, "%s", msg)
		})
	}
	for _, e := range g.Edges {
		check(e.Attrs, "edge "+e.String(), func(sev Severity, fix, msg string) Diagnostic {
			return edgeDiag(RuleAttrValue, sev, e, fix, "%s", msg)
		})
	}
	return out
}

// attrSuggestion is the known attribute of the scope nearest to a
// mistyped key, or "" when none is plausibly meant (see suggest.MaxTypo).
func attrSuggestion(key string, scope attrScope) string {
	if c := suggest.Closest(key, knownAttrNames[scope], 1, suggest.MaxTypo); len(c) > 0 {
		return c[0]
	}
	return ""
}

// checkUnknownAttributes warns about an attribute that nothing reads: a
// key that is not in knownAttrs (a typo such as promt, max_retires or
// llm_modle would otherwise pass silently and the stage run without it),
// or one known only elsewhere (weight on a node, prompt on an edge). The
// message suggests the nearest known name. The nodes of handlers whose
// attributes are not morph's to know are skipped: a WebAssembly stage
// handler's (wasm:<plugin>, handler=) and a host's own handler types.
func checkUnknownAttributes(g *Graph, _ ValidateOptions) []Diagnostic {
	var out []Diagnostic
	// check reports each unknown key of attrs; who names the owner.
	check := func(attrs map[string]string, scope attrScope, who string, diag func(fix, msg string) Diagnostic) {
		var odd []string
		for key := range attrs {
			if spec, known := knownAttrs[key]; !known || spec.scope&scope == 0 {
				odd = append(odd, key)
			}
		}
		slices.Sort(odd) // a stable report
		for _, key := range odd {
			switch spec, known := knownAttrs[key]; {
			case known:
				out = append(out, diag(
					fmt.Sprintf("set %s on %s, or remove it", key, spec.scope.an()),
					fmt.Sprintf("%s: %s is %s attribute; on %s nothing reads it", who, key, spec.scope.an(), scope.an())))
			default:
				msg := fmt.Sprintf("%s: unknown attribute %q: nothing reads it", who, key)
				fix := "remove it, or correct it to an attribute of the DOT reference (go doc github.com/morphhost/morph/pipeline)"
				if s := attrSuggestion(key, scope); s != "" {
					msg += fmt.Sprintf("; did you mean %s?", s)
					fix = fmt.Sprintf("rename %s to %s", key, s)
				}
				out = append(out, diag(fix, msg))
			}
		}
	}
	check(g.Attrs, onGraph, "graph", func(fix, msg string) Diagnostic {
		return graphDiag(RuleUnknownAttribute, SeverityWarning, fix, "%s", msg)
	})
	for _, n := range g.Nodes {
		if !slices.Contains(builtinTypes, n.Type()) {
			continue // a plugin's or a host's handler: its attributes are its own
		}
		check(n.Attrs, onNode, "node "+n.ID, func(fix, msg string) Diagnostic {
			return nodeDiag(RuleUnknownAttribute, SeverityWarning, n, fix, "%s", msg)
		})
	}
	for _, e := range g.Edges {
		check(e.Attrs, onEdge, "edge "+e.String(), func(fix, msg string) Diagnostic {
			return edgeDiag(RuleUnknownAttribute, SeverityWarning, e, fix, "%s", msg)
		})
	}
	return out
}
