package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/morphhost/morph/internal/suggest"
)

// Severity is how much a diagnostic matters: an error refuses the run, a
// warning and an info do not.
type Severity string

// Severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

// Diagnostic is one finding of validation: which rule, how bad, where
// (node, edge, source line) and a concrete fix, so that an editor or the
// CLI can show it next to the line.
type Diagnostic struct {
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
	NodeID   string   `json:"node,omitempty"`
	Edge     string   `json:"edge,omitempty"` // "A -> B"
	Line     int      `json:"line,omitempty"`
	Fix      string   `json:"fix,omitempty"`
}

// ValidateOptions tell validation what the runner that will run the graph
// has, so that a missing handler, plugin or tool is found before the run
// rather than at the stage that needs it.
type ValidateOptions struct {
	// KnownTypes are the handler types the runner has (nil: the built-in
	// ones). wasm:<plugin> types are checked by Plugins instead.
	KnownTypes []string
	// Plugins reports whether a WebAssembly plugin of that name provides a
	// stage handler (nil: not checked).
	Plugins func(name string) bool
	// Tools reports whether a tool of that name exists (nil: not checked).
	Tools func(name string) bool
	// AllowShell is the operator's [pipeline] allow_shell: whether tool
	// nodes may run tool_command in a shell.
	AllowShell bool
}

// Rule is one validation check. Hosts add their own to Validate.
type Rule interface {
	Name() string
	Check(g *Graph, opts ValidateOptions) []Diagnostic
}

// NewRule returns a Rule named name whose Check calls check. Diagnostics
// check returns without a Rule get name from Validate. (A Rule has a name
// besides its function, so there is no func type to convert a function
// to, as net/http's HandlerFunc.)
func NewRule(name string, check func(g *Graph, opts ValidateOptions) []Diagnostic) Rule {
	return funcRule{name, check}
}

// funcRule is NewRule's Rule.
type funcRule struct {
	name  string
	check func(g *Graph, opts ValidateOptions) []Diagnostic
}

func (r funcRule) Name() string { return r.name }

func (r funcRule) Check(g *Graph, opts ValidateOptions) []Diagnostic { return r.check(g, opts) }

// Names of the built-in rules.
const (
	RuleStartNode        = "start_node"
	RuleTerminalNode     = "terminal_node"
	RuleReachability     = "reachability"
	RuleEdgeTargetExists = "edge_target_exists"
	RuleStartNoIncoming  = "start_no_incoming"
	RuleExitNoOutgoing   = "exit_no_outgoing"
	RuleConditionSyntax  = "condition_syntax"
	RuleStylesheetSyntax = "stylesheet_syntax"
	RuleTypeKnown        = "type_known"
	RuleFidelityValid    = "fidelity_valid"
	RuleRetryTarget      = "retry_target_exists"
	RuleGoalGateRetry    = "goal_gate_has_retry"
	RulePromptOnLLM      = "prompt_on_llm_nodes"
	RuleAttrValue        = "attr_value"
	RuleShellDisabled    = "shell_disabled"
	RuleToolNodeConfig   = "tool_node_config"
	RuleToolKnown        = "tool_known"
	RuleHandlerPlugin    = "handler_plugin"
	RuleParallelFanIn    = "parallel_fan_in"
	RuleUnknownAttribute = "unknown_attribute"
	RuleUnknownShape     = "unknown_shape"
	RuleHumanDefault     = "human_default_choice"
)

// DefaultRules returns the built-in rules: the attractor specification's
// and morph's own (attr_value, shell_disabled, tool_node_config,
// tool_known, handler_plugin, parallel_fan_in, unknown_attribute,
// unknown_shape, human_default_choice). Each is linear in the
// graph's size (parallel_fan_in once per 64 fan-in nodes), so validating
// a large generated graph stays fast.
func DefaultRules() []Rule {
	return []Rule{
		NewRule(RuleStartNode, checkStartNode),
		NewRule(RuleTerminalNode, checkTerminalNode),
		NewRule(RuleReachability, checkReachability),
		NewRule(RuleEdgeTargetExists, checkEdgeTargets),
		NewRule(RuleStartNoIncoming, checkStartNoIncoming),
		NewRule(RuleExitNoOutgoing, checkExitNoOutgoing),
		NewRule(RuleConditionSyntax, checkConditionSyntax),
		NewRule(RuleStylesheetSyntax, checkStylesheetSyntax),
		NewRule(RuleTypeKnown, checkTypeKnown),
		NewRule(RuleFidelityValid, checkFidelity),
		NewRule(RuleRetryTarget, checkRetryTargets),
		NewRule(RuleGoalGateRetry, checkGoalGateRetry),
		NewRule(RulePromptOnLLM, checkPromptOnLLM),
		NewRule(RuleAttrValue, checkAttrValues),
		NewRule(RuleShellDisabled, checkShellDisabled),
		NewRule(RuleToolNodeConfig, checkToolNodeConfig),
		NewRule(RuleToolKnown, checkToolKnown),
		NewRule(RuleHandlerPlugin, checkHandlerPlugin),
		NewRule(RuleParallelFanIn, checkParallelFanIn),
		NewRule(RuleUnknownAttribute, checkUnknownAttributes),
		NewRule(RuleUnknownShape, checkUnknownShapes),
		NewRule(RuleHumanDefault, checkHumanDefaultChoice),
	}
}

// Validate checks g with the built-in rules and extra, and returns the
// diagnostics: errors first, then warnings, then infos, each by line. A
// diagnostic without a rule name gets its rule's, and one without a
// severity is an error (a host rule that forgets to say is not ignored).
// Run it after ApplyTransforms; any error should refuse the run (see
// HasErrors and ValidationError).
func Validate(g *Graph, opts ValidateOptions, extra ...Rule) []Diagnostic {
	var out []Diagnostic
	for _, r := range append(DefaultRules(), extra...) {
		for _, d := range r.Check(g, opts) {
			if d.Rule == "" {
				d.Rule = r.Name()
			}
			if d.Severity == "" {
				d.Severity = SeverityError
			}
			out = append(out, d)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if a, b := severityRank(out[i].Severity), severityRank(out[j].Severity); a != b {
			return a < b
		}
		return out[i].Line < out[j].Line
	})
	return out
}

func severityRank(s Severity) int {
	switch s {
	case SeverityError:
		return 0
	case SeverityWarning:
		return 1
	}
	return 2
}

// HasErrors reports whether any diagnostic is an error.
func HasErrors(diags []Diagnostic) bool {
	return slices.ContainsFunc(diags, func(d Diagnostic) bool { return d.Severity == SeverityError })
}

// ValidationError is a graph that failed validation: the file and every
// diagnostic (warnings too, for whoever wants them).
type ValidationError struct {
	File        string
	Diagnostics []Diagnostic
}

// Error lists the errors, one a line, as "file:line: rule: message (fix)".
func (e *ValidationError) Error() string {
	file := e.File
	if file == "" {
		file = "<dot>"
	}
	var lines []string
	for _, d := range e.Diagnostics {
		if d.Severity != SeverityError {
			continue
		}
		where := file
		if d.Line > 0 {
			where = fmt.Sprintf("%s:%d", file, d.Line)
		}
		line := fmt.Sprintf("%s: %s: %s", where, d.Rule, d.Message)
		if d.Fix != "" {
			line += " (" + d.Fix + ")"
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return file + ": pipeline is not valid"
	}
	return strings.Join(lines, "\n")
}

// nodeDiag and edgeDiag make a diagnostic about a node or an edge.
func nodeDiag(rule string, sev Severity, n *Node, fix, format string, args ...any) Diagnostic {
	return Diagnostic{Rule: rule, Severity: sev, Message: fmt.Sprintf(format, args...), NodeID: n.ID, Line: n.Line, Fix: fix}
}

func edgeDiag(rule string, sev Severity, e *Edge, fix, format string, args ...any) Diagnostic {
	return Diagnostic{Rule: rule, Severity: sev, Message: fmt.Sprintf(format, args...), Edge: e.String(), Line: e.Line, Fix: fix}
}

func graphDiag(rule string, sev Severity, fix, format string, args ...any) Diagnostic {
	return Diagnostic{Rule: rule, Severity: sev, Message: fmt.Sprintf(format, args...), Fix: fix}
}

// topology is the graph as numbers: node indices by id and the successors
// of each node in compressed rows, built once per rule that walks edges so
// that walks are linear. Edges to or from unknown ids are left out
// (edge_target_exists reports them); a repeated node id keeps its first
// index.
type topology struct {
	index map[string]int32
	off   []int32 // successors of v are succ[off[v]:off[v+1]]
	succ  []int32
}

func newTopology(g *Graph) *topology {
	t := &topology{index: make(map[string]int32, len(g.Nodes)), off: make([]int32, len(g.Nodes)+1)}
	for i, n := range g.Nodes {
		if _, dup := t.index[n.ID]; !dup {
			t.index[n.ID] = int32(i)
		}
	}
	type pair struct{ from, to int32 }
	pairs := make([]pair, 0, len(g.Edges))
	for _, e := range g.Edges {
		from, ok1 := t.index[e.From]
		to, ok2 := t.index[e.To]
		if ok1 && ok2 {
			pairs = append(pairs, pair{from, to})
			t.off[from+1]++
		}
	}
	for v := range len(g.Nodes) {
		t.off[v+1] += t.off[v]
	}
	t.succ = make([]int32, len(pairs))
	next := slices.Clone(t.off[:len(g.Nodes)])
	for _, p := range pairs {
		t.succ[next[p.from]] = p.to
		next[p.from]++
	}
	return t
}

func (t *topology) successors(v int32) []int32 { return t.succ[t.off[v]:t.off[v+1]] }

// reachable marks the nodes reachable from the start nodes given.
func (t *topology) reachable(from ...int32) []bool {
	seen := make([]bool, len(t.off)-1)
	stack := slices.Clone(from)
	for _, v := range from {
		seen[v] = true
	}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, w := range t.successors(v) {
			if !seen[w] {
				seen[w] = true
				stack = append(stack, w)
			}
		}
	}
	return seen
}

func checkStartNode(g *Graph, _ ValidateOptions) []Diagnostic {
	var starts []*Node
	for _, n := range g.Nodes {
		if n.Type() == TypeStart {
			starts = append(starts, n)
		}
	}
	switch {
	case len(starts) > 1:
		ids := make([]string, len(starts))
		for i, n := range starts {
			ids[i] = n.ID
		}
		var out []Diagnostic
		for _, n := range starts[1:] {
			out = append(out, nodeDiag(RuleStartNode, SeverityError, n,
				fmt.Sprintf("keep one start node: give %s another shape, or remove it", n.ID),
				"the graph has %d start nodes (%s); a run needs exactly one", len(starts), strings.Join(ids, ", ")))
		}
		return out
	case len(starts) == 0 && g.StartNode() == nil:
		return []Diagnostic{graphDiag(RuleStartNode, SeverityError,
			"add a start node: start [shape=Mdiamond] with an edge to the first stage",
			"the graph has no start node (shape=Mdiamond, type=start, or a node named start)")}
	}
	return nil
}

func checkTerminalNode(g *Graph, _ ValidateOptions) []Diagnostic {
	if len(g.ExitNodes()) > 0 {
		return nil
	}
	return []Diagnostic{graphDiag(RuleTerminalNode, SeverityError,
		"add an exit node: exit [shape=Msquare] with an edge from the last stage",
		"the graph has no exit node (shape=Msquare or type=exit)")}
}

func checkReachability(g *Graph, _ ValidateOptions) []Diagnostic {
	start := g.StartNode()
	if start == nil {
		return nil // start_node reports it
	}
	// A retry target is reached by a jump, not an edge: it counts when the
	// node naming it is reached (the graph's, from the start).
	t := newTopology(g)
	roots := []int32{t.index[start.ID]}
	addTargets := func(attrs map[string]string, seen []bool) bool {
		added := false
		for _, k := range retryAttrs {
			if i, ok := t.index[strings.TrimSpace(attrs[k])]; ok && (seen == nil || !seen[i]) {
				roots, added = append(roots, i), true
			}
		}
		return added
	}
	addTargets(g.Attrs, nil)
	seen := t.reachable(roots...)
	for more := true; more; {
		more = false
		for i, n := range g.Nodes {
			if seen[i] && addTargets(n.Attrs, seen) {
				more = true
			}
		}
		if more {
			seen = t.reachable(roots...)
		}
	}
	var out []Diagnostic
	for i, n := range g.Nodes {
		if !seen[i] {
			out = append(out, nodeDiag(RuleReachability, SeverityError, n,
				fmt.Sprintf("add an edge to %s from a stage the run reaches, or remove it", n.ID),
				"node %s cannot be reached from the start node %s", n.ID, start.ID))
		}
	}
	return out
}

func checkEdgeTargets(g *Graph, _ ValidateOptions) []Diagnostic {
	ids := nodeIDs(g)
	var out []Diagnostic
	for _, e := range g.Edges {
		for _, end := range []string{e.From, e.To} {
			if !ids[end] {
				out = append(out, edgeDiag(RuleEdgeTargetExists, SeverityError, e,
					fmt.Sprintf("declare node %s, or point the edge at an existing node", end),
					"edge %s names node %s, which does not exist", e, end))
			}
		}
	}
	return out
}

func nodeIDs(g *Graph) map[string]bool {
	ids := make(map[string]bool, len(g.Nodes))
	for _, n := range g.Nodes {
		ids[n.ID] = true
	}
	return ids
}

func checkStartNoIncoming(g *Graph, _ ValidateOptions) []Diagnostic {
	start := g.StartNode()
	if start == nil {
		return nil
	}
	var out []Diagnostic
	for _, e := range g.Edges {
		if e.To == start.ID {
			out = append(out, edgeDiag(RuleStartNoIncoming, SeverityError, e,
				fmt.Sprintf("point the edge at the first stage after %s instead", start.ID),
				"edge %s enters the start node; the start runs once, at the beginning", e))
		}
	}
	return out
}

func checkExitNoOutgoing(g *Graph, _ ValidateOptions) []Diagnostic {
	exits := map[string]bool{}
	for _, n := range g.ExitNodes() {
		exits[n.ID] = true
	}
	var out []Diagnostic
	for _, e := range g.Edges {
		if exits[e.From] {
			out = append(out, edgeDiag(RuleExitNoOutgoing, SeverityError, e,
				fmt.Sprintf("remove the edge, or make %s a stage and add an exit after it", e.From),
				"edge %s leaves the exit node %s; the run ends there", e, e.From))
		}
	}
	return out
}

func checkConditionSyntax(g *Graph, _ ValidateOptions) []Diagnostic {
	var out []Diagnostic
	for _, e := range g.Edges {
		c := e.Condition()
		if c == "" {
			continue
		}
		if _, err := ParseCondition(c); err != nil {
			out = append(out, edgeDiag(RuleConditionSyntax, SeverityError, e,
				`write clauses key=value or key!=value joined by &&, e.g. condition="outcome=success && context.tests=passed"`,
				"edge %s: %v", e, err))
		}
	}
	return out
}

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
	if _, err := ParseStylesheet(src); err != nil {
		return []Diagnostic{graphDiag(RuleStylesheetSyntax, SeverityError,
			`write rules selector { llm_model: NAME; llm_provider: NAME; reasoning_effort: low|medium|high } with selector *, a shape, .class or #id`,
			"graph attribute model_stylesheet: %v (none of the stylesheet was applied)", err)}
	}
	return nil
}

// builtinTypes are the handler types DefaultHandlerRegistry has.
var builtinTypes = []string{TypeStart, TypeExit, TypeCodergen, TypeConditional, TypeHuman, TypeTool,
	TypeParallel, TypeFanIn, TypeManagerLoop}

func checkTypeKnown(g *Graph, opts ValidateOptions) []Diagnostic {
	known := opts.KnownTypes
	if known == nil {
		known = builtinTypes
	}
	set := make(map[string]bool, len(known))
	for _, t := range known {
		set[t] = true
	}
	// The fix lists the types to write; wasm:<plugin> types of a runner's
	// registry are summed up by the last clause.
	names := slices.DeleteFunc(slices.Clone(known), func(t string) bool { return strings.HasPrefix(t, TypeWasmPrefix) })
	var out []Diagnostic
	for _, n := range g.Nodes {
		t := n.Type()
		if set[t] || strings.HasPrefix(t, TypeWasmPrefix) {
			continue
		}
		out = append(out, nodeDiag(RuleTypeKnown, SeverityWarning, n,
			fmt.Sprintf("use one of the handler types %s, or wasm:<plugin> for a WebAssembly stage handler", strings.Join(names, ", ")),
			"node %s has type %q, which no handler runs", n.ID, t))
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

// retryAttrs are the attributes that name a node to go back to.
var retryAttrs = []string{"retry_target", "fallback_retry_target"}

func checkRetryTargets(g *Graph, _ ValidateOptions) []Diagnostic {
	ids := nodeIDs(g)
	fix := func(target string) string {
		return fmt.Sprintf("name an existing node, or declare %s", target)
	}
	var out []Diagnostic
	for _, key := range retryAttrs {
		if v := strings.TrimSpace(g.Attrs[key]); v != "" && !ids[v] {
			out = append(out, graphDiag(RuleRetryTarget, SeverityWarning, fix(v), "graph %s=%q names no node", key, v))
		}
	}
	for _, n := range g.Nodes {
		for _, key := range retryAttrs {
			if v := strings.TrimSpace(n.Attrs[key]); v != "" && !ids[v] {
				out = append(out, nodeDiag(RuleRetryTarget, SeverityWarning, n, fix(v), "node %s: %s=%q names no node", n.ID, key, v))
			}
		}
	}
	return out
}

// hasRetryTarget reports whether any of the attribute maps sets a retry
// target.
func hasRetryTarget(attrs ...map[string]string) bool {
	for _, a := range attrs {
		for _, key := range retryAttrs {
			if strings.TrimSpace(a[key]) != "" {
				return true
			}
		}
	}
	return false
}

func checkGoalGateRetry(g *Graph, _ ValidateOptions) []Diagnostic {
	var out []Diagnostic
	for _, n := range g.Nodes {
		if gate, err := n.Bool("goal_gate", false); err != nil || !gate || hasRetryTarget(n.Attrs, g.Attrs) {
			continue
		}
		out = append(out, nodeDiag(RuleGoalGateRetry, SeverityWarning, n,
			fmt.Sprintf("set retry_target on %s (or on the graph) to the stage that should run again", n.ID),
			"goal gate %s has no retry_target or fallback_retry_target: if it is unsatisfied at the exit, the run fails", n.ID))
	}
	return out
}

func checkPromptOnLLM(g *Graph, _ ValidateOptions) []Diagnostic {
	var out []Diagnostic
	for _, n := range g.Nodes {
		if n.Type() != TypeCodergen || strings.TrimSpace(n.Attrs["prompt"]) != "" || strings.TrimSpace(n.Attrs["label"]) != "" {
			continue
		}
		out = append(out, nodeDiag(RulePromptOnLLM, SeverityWarning, n,
			fmt.Sprintf(`add prompt="..." to %s saying what the agent should do`, n.ID),
			"agent stage %s has no prompt or label: its agent would be asked %q", n.ID, n.ID))
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

func durationAttr(attrs map[string]string, key, who string) error {
	if v := attrs[key]; strings.TrimSpace(v) != "" {
		if _, err := ParseDuration(v); err != nil {
			return fmt.Errorf("%s: %s: %w", who, key, err)
		}
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
	"retry_target":          {scope: onGraph | onNode},
	"fallback_retry_target": {scope: onGraph | onNode},

	// Every node; label and class are Graphviz's too.
	"label":         {scope: anywhere},
	"class":         {scope: anywhere},
	"shape":         {scope: onNode},
	"type":          {scope: onNode},
	"handler":       {scope: onNode},
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
	"thread_id":        {scope: onNode | onEdge},
	"auto_status":      {onNode, boolCheck},
	"workdir":          {scope: onNode},

	// Other handlers.
	"human.default_choice":   {scope: onNode},
	"human.timeout":          {onNode, durationCheck},
	"tool":                   {scope: onNode},
	"tool_input":             {scope: onNode},
	"tool_command":           {scope: onNode},
	"join_policy":            {onNode, &attrCheck{enumAttr("wait_all", "first_success"), "use wait_all or first_success"}},
	"max_parallel":           {onNode, countCheck},
	"stack.child_dotfile":    {scope: onNode},
	"manager.max_cycles":     {onNode, countCheck},
	"manager.stop_condition": {scope: onNode},
	"manager.goal":           {scope: onNode},

	// Edges.
	"condition":    {scope: onEdge},
	"weight":       {onEdge, &attrCheck{intAttrCheck, "write a whole number; the higher weight wins"}},
	"loop_restart": {onEdge, boolCheck}, // attractor's; not supported: a warning when true (checkUnknownAttributes)

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
	check := func(attrs map[string]string, who string, diag func(fix, msg string) Diagnostic) {
		for _, key := range typedAttrKeys {
			if _, ok := attrs[key]; !ok {
				continue
			}
			c := knownAttrs[key].value
			if err := c.check(attrs, key, who); err != nil {
				out = append(out, diag(c.fix, err.Error()))
			}
		}
	}
	check(g.Attrs, "graph", func(fix, msg string) Diagnostic {
		return graphDiag(RuleAttrValue, SeverityError, fix, "%s", msg)
	})
	for _, n := range g.Nodes {
		check(n.Attrs, "node "+n.ID, func(fix, msg string) Diagnostic {
			return nodeDiag(RuleAttrValue, SeverityError, n, fix, "%s", msg)
		})
	}
	for _, e := range g.Edges {
		check(e.Attrs, "edge "+e.String(), func(fix, msg string) Diagnostic {
			return edgeDiag(RuleAttrValue, SeverityError, e, fix, "%s", msg)
		})
	}
	return out
}

func checkShellDisabled(g *Graph, opts ValidateOptions) []Diagnostic {
	if opts.AllowShell {
		return nil
	}
	var out []Diagnostic
	for _, n := range g.Nodes {
		if strings.TrimSpace(n.Attrs["tool_command"]) == "" {
			continue
		}
		out = append(out, nodeDiag(RuleShellDisabled, SeverityError, n,
			"run a WebAssembly tool instead (tool=\"<name>\", sandboxed), or let the operator set allow_shell = true under [pipeline] in morph.toml",
			"node %s runs a shell command (tool_command), and shell commands are off: they run outside any sandbox", n.ID))
	}
	return out
}

func checkToolNodeConfig(g *Graph, _ ValidateOptions) []Diagnostic {
	var out []Diagnostic
	for _, n := range g.Nodes {
		if n.Type() != TypeTool {
			continue
		}
		tool, cmd := strings.TrimSpace(n.Attrs["tool"]), strings.TrimSpace(n.Attrs["tool_command"])
		switch {
		case tool == "" && cmd == "":
			out = append(out, nodeDiag(RuleToolNodeConfig, SeverityError, n,
				fmt.Sprintf(`set tool="<name>" on %s (a WebAssembly tool, with tool_input='{"arg": "..."}')`, n.ID),
				"tool node %s names no tool: it has neither tool nor tool_command", n.ID))
		case tool != "" && cmd != "":
			out = append(out, nodeDiag(RuleToolNodeConfig, SeverityError, n,
				fmt.Sprintf("remove tool_command or tool from %s", n.ID),
				"tool node %s sets both tool and tool_command; it runs one thing", n.ID))
		}
		if in := strings.TrimSpace(n.Attrs["tool_input"]); in != "" {
			if err := checkToolInput(in); err != nil {
				out = append(out, nodeDiag(RuleToolNodeConfig, SeverityError, n,
					`write a JSON object, with placeholders inside strings: tool_input="{\"query\": \"$goal\", \"path\": \"${context.file}\"}"`,
					"node %s: tool_input %v", n.ID, err))
			}
		}
	}
	return out
}

// checkToolInput accepts a JSON object. Placeholders ($goal,
// ${context.x}) are filled at run time inside its strings, so the text as
// written must already be JSON.
func checkToolInput(in string) error {
	var v any
	if err := json.Unmarshal([]byte(in), &v); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return fmt.Errorf("is not valid JSON at byte %d: %w", syn.Offset, err)
		}
		return fmt.Errorf("is not valid JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("is JSON but not an object")
	}
	return nil
}

func checkToolKnown(g *Graph, opts ValidateOptions) []Diagnostic {
	if opts.Tools == nil {
		return nil
	}
	var out []Diagnostic
	for _, n := range g.Nodes {
		if tool := strings.TrimSpace(n.Attrs["tool"]); n.Type() == TypeTool && tool != "" && !opts.Tools(tool) {
			out = append(out, nodeDiag(RuleToolKnown, SeverityError, n,
				fmt.Sprintf("install a plugin that provides the tool %q, or name one that exists (morph tools lists them)", tool),
				"node %s uses the tool %q, which does not exist", n.ID, tool))
		}
	}
	return out
}

// checkHandlerPlugin checks the nodes run by a WebAssembly stage handler
// (type wasm:<plugin>, or handler=<plugin>): that they name a plugin and,
// when opts.Plugins is given, that it is installed. The runner looks its
// handler up by the node's type exactly, so a name with spaces in it
// ("wasm: verify") is an error of its own rather than trimmed here and
// missed there.
func checkHandlerPlugin(g *Graph, opts ValidateOptions) []Diagnostic {
	var out []Diagnostic
	for _, n := range g.Nodes {
		plugin, ok := strings.CutPrefix(n.Type(), TypeWasmPrefix)
		if !ok {
			continue
		}
		switch trimmed := strings.TrimSpace(plugin); {
		case trimmed == "":
			out = append(out, nodeDiag(RuleHandlerPlugin, SeverityError, n,
				fmt.Sprintf(`name the plugin: type="wasm:<plugin>" or handler="<plugin>" on %s`, n.ID),
				"node %s asks for a WebAssembly stage handler but names no plugin", n.ID))
		case trimmed != plugin:
			out = append(out, nodeDiag(RuleHandlerPlugin, SeverityError, n,
				fmt.Sprintf(`write type="wasm:%s" (or handler="%s") without spaces`, trimmed, trimmed),
				"node %s: the plugin name %q has spaces around it, and no handler is registered under that name", n.ID, plugin))
		case opts.Plugins != nil && !opts.Plugins(plugin):
			out = append(out, nodeDiag(RuleHandlerPlugin, SeverityError, n,
				fmt.Sprintf("install the plugin %q (one that provides a stage handler), or fix the name", plugin),
				"node %s is run by the WebAssembly plugin %q, which is not installed", n.ID, plugin))
		}
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
		if on, err := boolAttr(e.Attrs, "loop_restart", false, ""); err == nil && on {
			out = append(out, edgeDiag(RuleUnknownAttribute, SeverityWarning, e,
				"remove loop_restart; bound the loop with max_node_visits, or run the pipeline again",
				"edge %s: loop_restart is attractor's and morph does not restart runs: the edge is taken as any other, the run keeping its context, visit counts and stage files", e))
		}
	}
	return out
}

// graphvizShapes are the node shapes Graphviz draws (its polygon shapes
// and records); with shapeTypes' keys they are the shapes unknown_shape
// accepts.
var graphvizShapes = []string{
	"box", "polygon", "ellipse", "oval", "circle", "point", "egg", "triangle", "plaintext", "plain",
	"diamond", "trapezium", "parallelogram", "house", "pentagon", "hexagon", "septagon", "octagon",
	"doublecircle", "doubleoctagon", "tripleoctagon", "invtriangle", "invtrapezium", "invhouse",
	"Mdiamond", "Msquare", "Mcircle", "rect", "rectangle", "square", "star", "none", "underline",
	"cylinder", "note", "tab", "folder", "box3d", "component", "promoter", "cds", "terminator", "utr",
	"primersite", "restrictionsite", "fivepoverhang", "threepoverhang", "noverhang", "assembly",
	"signature", "insulator", "ribosite", "rnastab", "proteasesite", "proteinstab", "rpromoter",
	"rarrow", "larrow", "lpromoter", "record", "Mrecord",
}

// knownShapes is graphvizShapes and shapeTypes' keys, sorted, and
// handlerShapes names the shapes that pick a handler, for the fix.
var (
	knownShapes = func() []string {
		s := slices.Concat(graphvizShapes, sortedKeys(shapeTypes))
		slices.Sort(s)
		return slices.Compact(s)
	}()
	handlerShapes = func() string {
		var parts []string
		for _, shape := range sortedKeys(shapeTypes) {
			parts = append(parts, fmt.Sprintf("%s (%s)", shape, shapeTypes[shape]))
		}
		return strings.Join(parts, ", ")
	}()
)

// checkUnknownShapes warns about a shape that is neither a handler's nor
// Graphviz's: shape=diamnd would otherwise run as an agent stage without
// a word (any shape without a handler is codergen) and fail to render.
// Shapes compare exactly, as both the runner and Graphviz do, so
// mdiamond is reported too (did you mean Mdiamond?).
func checkUnknownShapes(g *Graph, _ ValidateOptions) []Diagnostic {
	var out []Diagnostic
	for _, n := range g.Nodes {
		shape := n.Shape()
		if _, ok := slices.BinarySearch(knownShapes, shape); ok {
			continue
		}
		explicit := strings.TrimSpace(n.Attrs["type"]) != "" || strings.TrimSpace(n.Attrs["handler"]) != ""
		msg := fmt.Sprintf("node %s: shape %q is not a Graphviz shape", n.ID, shape)
		if !explicit {
			msg += ", so the node runs as a codergen (agent) stage"
		}
		fix := "use a handler's shape: " + handlerShapes
		if explicit {
			fix = "use a Graphviz shape such as box, ellipse or note (the node's type picks its handler)"
		}
		if c := suggest.Closest(shape, knownShapes, 1, suggest.MaxTypo); len(c) > 0 {
			msg += fmt.Sprintf("; did you mean %s?", c[0])
			fix = "write shape=" + c[0]
			if t, ok := shapeTypes[c[0]]; ok {
				fix += fmt.Sprintf(" (a %s node)", t)
			}
		}
		out = append(out, nodeDiag(RuleUnknownShape, SeverityWarning, n, fix, "%s", msg))
	}
	return out
}

// humanChoices are the choices a human gate offers, as HumanHandler builds
// them: one per outgoing edge in source order, its label (else the
// target's id), the label's accelerator key, and the target.
func humanChoices(out []*Edge) []Choice {
	choices := make([]Choice, 0, len(out))
	for _, e := range out {
		label := e.Label()
		if label == "" {
			label = e.To
		}
		key, _ := Accelerator(label)
		choices = append(choices, Choice{Key: key, Label: label, To: e.To})
	}
	return choices
}

// checkHumanDefaultChoice checks that a human gate's human.default_choice
// names one of its choices, matched as the gate matches an answer
// (matchChoice: the accelerator key, the normalised label, or the target
// id). A default that names none would pass validation and fail the gate
// at the first timeout, so it is an error.
func checkHumanDefaultChoice(g *Graph, _ ValidateOptions) []Diagnostic {
	var gates []*Node
	for _, n := range g.Nodes {
		if n.Attrs["human.default_choice"] != "" && n.Type() == TypeHuman {
			gates = append(gates, n)
		}
	}
	if len(gates) == 0 {
		return nil
	}
	outgoing := make(map[string][]*Edge, len(gates))
	for _, n := range gates {
		outgoing[n.ID] = nil
	}
	for _, e := range g.Edges {
		if _, ok := outgoing[e.From]; ok {
			outgoing[e.From] = append(outgoing[e.From], e)
		}
	}
	var out []Diagnostic
	for _, n := range gates {
		def := n.Attrs["human.default_choice"]
		choices := humanChoices(outgoing[n.ID])
		if _, ok := matchChoice(choices, def); ok {
			continue
		}
		if len(choices) == 0 {
			out = append(out, nodeDiag(RuleHumanDefault, SeverityError, n,
				fmt.Sprintf("add an edge from %s for each choice, with the choice as its label", n.ID),
				"human gate %s: human.default_choice=%q names no choice: the gate has no outgoing edges", n.ID, def))
			continue
		}
		var names []string
		for _, c := range choices {
			names = append(names, fmt.Sprintf("%q (key %s, to %s)", c.Label, c.Key, c.To))
		}
		c := choices[0]
		out = append(out, nodeDiag(RuleHumanDefault, SeverityError, n,
			fmt.Sprintf("set human.default_choice to a choice's key, label or target: e.g. %q, %q or %q", c.Key, c.Label, c.To),
			"human gate %s: human.default_choice=%q names none of its choices %s; on a timeout the gate would fail",
			n.ID, def, strings.Join(names, ", ")))
	}
	return out
}

// checkParallelFanIn warns about a parallel node whose branches (its
// outgoing edges) do not all reach one fan-in node: the parallel handler
// sends the run on to the fan-in they share, and without one the
// branches' results are never joined. Which fan-ins each node reaches is
// computed once for the whole graph (strongly connected components, then
// one pass in reverse topological order per 64 fan-ins), so the work is
// nodes plus edges times fan-ins/64, however many parallel nodes there
// are, rather than a search from every branch.
func checkParallelFanIn(g *Graph, _ ValidateOptions) []Diagnostic {
	if !slices.ContainsFunc(g.Nodes, func(n *Node) bool { return n.Type() == TypeParallel }) {
		return nil
	}
	t := newTopology(g)
	var parallels, fanIns []int32
	for i, n := range g.Nodes {
		if t.index[n.ID] != int32(i) {
			continue // a repeated id
		}
		switch n.Type() {
		case TypeParallel:
			parallels = append(parallels, int32(i))
		case TypeFanIn:
			fanIns = append(fanIns, int32(i))
		}
	}
	joined := make([]bool, len(parallels))
	if len(fanIns) > 0 {
		comp, order := t.components()
		reach := make([]uint64, len(order)) // per component, this chunk's fan-ins it reaches
		for base := 0; base < len(fanIns); base += 64 {
			clear(reach)
			for bit, f := range fanIns[base:min(base+64, len(fanIns))] {
				reach[comp[f]] |= 1 << bit
			}
			for c, members := range order { // sinks first
				for _, v := range members {
					for _, w := range t.successors(v) {
						reach[c] |= reach[comp[w]]
					}
				}
			}
			for i, p := range parallels {
				if joined[i] || len(t.successors(p)) == 0 {
					continue
				}
				common := ^uint64(0)
				for _, b := range t.successors(p) {
					common &= reach[comp[b]]
				}
				joined[i] = common != 0
			}
		}
	}
	var out []Diagnostic
	for i, p := range parallels {
		if joined[i] {
			continue
		}
		n := g.Nodes[p]
		if len(t.successors(p)) == 0 {
			out = append(out, nodeDiag(RuleParallelFanIn, SeverityWarning, n,
				fmt.Sprintf("add an edge from %s to the first stage of each branch, and from each branch's end to a fan-in node (shape=tripleoctagon)", n.ID),
				"parallel node %s has no branches", n.ID))
			continue
		}
		out = append(out, nodeDiag(RuleParallelFanIn, SeverityWarning, n,
			fmt.Sprintf("add a fan-in node (shape=tripleoctagon) and an edge to it from the end of every branch of %s", n.ID),
			"the branches of parallel node %s do not reach a common fan-in node, so their results are never joined", n.ID))
	}
	return out
}

// components returns each node's strongly connected component and the
// components' members, in reverse topological order (a component comes
// after every component it reaches). Tarjan's algorithm, without
// recursion so that a long chain cannot exhaust the stack.
func (t *topology) components() (comp []int32, order [][]int32) {
	n := len(t.off) - 1
	index := make([]int32, n) // 1 + visit order; 0 for unvisited
	low := make([]int32, n)
	onStack := make([]bool, n)
	comp = make([]int32, n)
	var stack []int32
	type frame struct{ v, next int32 }
	var calls []frame
	visited := int32(0)
	visit := func(v int32) {
		visited++
		index[v], low[v] = visited, visited
		stack = append(stack, v)
		onStack[v] = true
		calls = append(calls, frame{v: v})
	}
	for root := range int32(n) {
		if index[root] != 0 {
			continue
		}
		visit(root)
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			if succ := t.successors(v); int(f.next) < len(succ) {
				w := succ[f.next]
				f.next++
				if index[w] == 0 {
					visit(w)
				} else if onStack[w] {
					low[v] = min(low[v], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			var members []int32
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = int32(len(order))
				members = append(members, w)
				if w == v {
					break
				}
			}
			order = append(order, members)
		}
	}
	return comp, order
}
