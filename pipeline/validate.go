package pipeline

import (
	"fmt"
	"slices"
	"sort"
	"strings"
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
	// ToolNames lists the tools, for a suggestion when Tools says a name
	// does not exist (nil: none suggested).
	ToolNames func() []string
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
// unknown_shape, human_default_choice, manager_loop). Each is linear in the
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
		NewRule(RuleManagerLoop, checkManagerLoop),
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
