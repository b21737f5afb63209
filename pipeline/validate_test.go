package pipeline

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// okGraph is start -> work -> exit, valid without a warning, plus extra
// items.
func okGraph(extra ...any) *Graph { return okGraphWith(map[string]string{"goal": "ship"}, extra...) }

// okGraphWith is okGraph with these graph attributes.
func okGraphWith(attrs map[string]string, extra ...any) *Graph {
	items := []any{
		vNode("start", "shape", "Mdiamond"),
		vNode("work", "prompt", "do it"),
		vNode("exit", "shape", "Msquare"),
		vEdge("start", "work"),
		vEdge("work", "exit"),
	}
	return vGraph(attrs, append(items, extra...)...)
}

func withRule(ds []Diagnostic, rule string) []Diagnostic {
	var out []Diagnostic
	for _, d := range ds {
		if d.Rule == rule {
			out = append(out, d)
		}
	}
	return out
}

func knows(names ...string) func(string) bool {
	return func(n string) bool { return slices.Contains(names, n) }
}

func TestValidateOKGraphIsClean(t *testing.T) {
	if ds := Validate(okGraph(), ValidateOptions{}); len(ds) != 0 {
		t.Fatalf("the base graph has diagnostics: %+v", ds)
	}
}

// Each rule fires on a graph that breaks it (count times, the first with
// the node or edge and message given), and the graph next to it that
// keeps it has no diagnostics at all, from any rule.
func TestValidateRules(t *testing.T) {
	type fires struct {
		count int
		node  string
		edge  string
		msg   string
	}
	cases := []struct {
		name string
		rule string
		sev  Severity
		bad  *Graph
		opts ValidateOptions
		want fires
		good *Graph // nil: no counterpart beyond the base graph
		gopt ValidateOptions
	}{
		{
			name: "no start", rule: RuleStartNode, sev: SeverityError,
			bad:  vGraph(nil, vNode("a", "prompt", "x"), vNode("exit", "shape", "Msquare"), vEdge("a", "exit")),
			want: fires{count: 1, msg: "no start node"},
			good: vGraph(nil, vNode("start", "type", "start"), vNode("exit", "shape", "Msquare"), vEdge("start", "exit")),
		},
		{
			name: "two starts", rule: RuleStartNode, sev: SeverityError,
			bad:  okGraph(vNode("again", "shape", "Mdiamond"), vEdge("again", "work")),
			want: fires{count: 1, node: "again", msg: "2 start nodes (start, again)"},
		},
		{
			name: "start by name", rule: RuleStartNode, sev: SeverityError,
			bad:  vGraph(nil, vNode("exit", "shape", "Msquare")),
			want: fires{count: 1},
			good: vGraph(nil, vNode("Start", "label", "begin"), vNode("exit", "shape", "Msquare"), vEdge("Start", "exit")),
		},
		{
			name: "no exit", rule: RuleTerminalNode, sev: SeverityError,
			bad:  vGraph(nil, vNode("start", "shape", "Mdiamond"), vNode("a", "prompt", "x"), vEdge("start", "a")),
			want: fires{count: 1, msg: "no exit node"},
			good: vGraph(nil, vNode("start", "shape", "Mdiamond"), vNode("end", "type", "exit"), vEdge("start", "end")),
		},
		{
			name: "unreachable", rule: RuleReachability, sev: SeverityError,
			bad:  okGraph(vNode("island", "prompt", "x"), vNode("island2", "prompt", "y"), vEdge("island", "island2"), vEdge("island2", "exit")),
			want: fires{count: 2, node: "island", msg: "cannot be reached from the start node start"},
			good: okGraph(vNode("side", "prompt", "x"), vEdge("work", "side", "condition", "outcome=fail"), vEdge("side", "work")),
		},
		{
			name: "missing target", rule: RuleEdgeTargetExists, sev: SeverityError,
			bad:  okGraph(vEdge("work", "ghost", "condition", "outcome=fail"), vEdge("phantom", "exit")),
			want: fires{count: 2, edge: "work -> ghost", msg: "names node ghost, which does not exist"},
		},
		{
			name: "edge into start", rule: RuleStartNoIncoming, sev: SeverityError,
			bad:  okGraph(vEdge("work", "start", "condition", "outcome=fail")),
			want: fires{count: 1, edge: "work -> start", msg: "enters the start node"},
		},
		{
			name: "edge out of exit", rule: RuleExitNoOutgoing, sev: SeverityError,
			bad:  okGraph(vEdge("exit", "work")),
			want: fires{count: 1, edge: "exit -> work", msg: "leaves the exit node exit"},
		},
		{
			name: "bad condition", rule: RuleConditionSyntax, sev: SeverityError,
			bad:  okGraph(vEdge("work", "work", "condition", "outcome=9lives")),
			want: fires{count: 1, edge: "work -> work", msg: "condition column 9: bad stage status"},
			good: okGraph(vEdge("work", "work", "condition", `outcome=retry && context.x!="a b"`)),
		},
		{
			// Spec 10.2: "Literal ::= String | Integer | Boolean | BareLiteral":
			// a custom outcome is valid, with a warning since a typo looks alike.
			name: "custom outcome", rule: RuleConditionSyntax, sev: SeverityWarning,
			bad:  okGraph(vEdge("work", "work", "condition", "outcome=succes")),
			want: fires{count: 1, edge: "work -> work", msg: "outcome=succes is not a standard status"},
			good: okGraph(vEdge("work", "work", "condition", `outcome=retry && context.x!="a b"`)),
		},
		{
			name: "bad stylesheet", rule: RuleStylesheetSyntax, sev: SeverityError,
			bad:  okGraphWith(map[string]string{"model_stylesheet": "* { modle: x }"}),
			want: fires{count: 1, msg: `model_stylesheet: line 1, column 5: unknown property "modle"`},
			good: okGraphWith(map[string]string{"model_stylesheet": "* { llm_model: x }"}),
		},
		{
			// Spec 8.4 names llm_model; fabro's model is read as it, with a warning.
			name: "stylesheet alias", rule: RuleStylesheetSyntax, sev: SeverityWarning,
			bad:  okGraphWith(map[string]string{"model_stylesheet": "* { model: x }"}),
			want: fires{count: 1, msg: `model_stylesheet: line 1, column 5: property "model" is read as llm_model`},
			good: okGraphWith(map[string]string{"model_stylesheet": "* { llm_model: x }"}),
		},
		{
			name: "unknown type", rule: RuleTypeKnown, sev: SeverityWarning,
			bad:  okGraph(vNode("odd", "type", "frobnicate"), vEdge("work", "odd"), vEdge("odd", "exit")),
			want: fires{count: 1, node: "odd", msg: `type "frobnicate", which no handler runs`},
			good: okGraph(vNode("odd", "type", "frobnicate", "prompt", "x"), vEdge("work", "odd"), vEdge("odd", "exit")),
			gopt: ValidateOptions{KnownTypes: append(slices.Clone(builtinTypes), "frobnicate")},
		},
		{
			name: "type unknown to this runner", rule: RuleTypeKnown, sev: SeverityWarning,
			bad:  okGraph(vNode("h", "shape", "hexagon"), vEdge("work", "h"), vEdge("h", "exit")),
			opts: ValidateOptions{KnownTypes: []string{TypeStart, TypeExit, TypeCodergen}},
			want: fires{count: 1, node: "h", msg: `"wait.human"`},
		},
		{
			name: "bad fidelity", rule: RuleFidelityValid, sev: SeverityWarning,
			bad: vGraph(map[string]string{"default_fidelity": "most"},
				vNode("start", "shape", "Mdiamond"), vNode("exit", "shape", "Msquare"),
				vNode("work", "prompt", "x", "fidelity", "summary:huge"), vEdge("start", "work", "fidelity", "all"), vEdge("work", "exit")),
			want: fires{count: 3, msg: `default_fidelity="most"`},
			good: vGraph(map[string]string{"default_fidelity": "compact"},
				vNode("start", "shape", "Mdiamond"), vNode("exit", "shape", "Msquare"),
				vNode("work", "prompt", "x", "fidelity", "summary:high"), vEdge("start", "work", "fidelity", "full"), vEdge("work", "exit", "fidelity", "truncate")),
		},
		{
			name: "missing retry target", rule: RuleRetryTarget, sev: SeverityWarning,
			bad: vGraph(map[string]string{"fallback_retry_target": "nowhere"},
				vNode("start", "shape", "Mdiamond"), vNode("exit", "shape", "Msquare"),
				vNode("work", "prompt", "x", "retry_target", "ghost"), vEdge("start", "work"), vEdge("work", "exit")),
			want: fires{count: 2, msg: `graph fallback_retry_target="nowhere" names no node`},
			good: vGraph(map[string]string{"fallback_retry_target": "work"},
				vNode("start", "shape", "Mdiamond"), vNode("exit", "shape", "Msquare"),
				vNode("work", "prompt", "x", "retry_target", "work"), vEdge("start", "work"), vEdge("work", "exit")),
		},
		{
			name: "goal gate without retry", rule: RuleGoalGateRetry, sev: SeverityWarning,
			bad:  okGraph(vNode("gate", "prompt", "check", "goal_gate", "true"), vEdge("work", "gate"), vEdge("gate", "exit")),
			want: fires{count: 1, node: "gate", msg: "goal gate gate has no retry_target"},
			good: okGraph(vNode("gate", "prompt", "check", "goal_gate", "true", "fallback_retry_target", "work"), vEdge("work", "gate"), vEdge("gate", "exit")),
		},
		{
			name: "goal gate with the graph's retry target", rule: RuleGoalGateRetry, sev: SeverityWarning,
			bad:  okGraph(vNode("gate", "prompt", "check", "goal_gate", "yes"), vEdge("work", "gate"), vEdge("gate", "exit")),
			want: fires{count: 1, node: "gate"},
			good: vGraph(map[string]string{"retry_target": "work"}, vNode("start", "shape", "Mdiamond"), vNode("exit", "shape", "Msquare"),
				vNode("work", "prompt", "x", "goal_gate", "true"), vEdge("start", "work"), vEdge("work", "exit")),
		},
		{
			name: "agent without prompt", rule: RulePromptOnLLM, sev: SeverityWarning,
			bad:  okGraph(vNode("mute"), vEdge("work", "mute"), vEdge("mute", "exit")),
			want: fires{count: 1, node: "mute", msg: "no prompt or label"},
			good: okGraph(vNode("mute", "label", "Review the diff"), vNode("route", "shape", "diamond"),
				vEdge("work", "mute"), vEdge("mute", "route"), vEdge("route", "exit")),
		},
		{
			// Spec 2.4: a Duration is "Integer + unit suffix"; a bare integer
			// is read as seconds, with a warning that suggests the unit.
			name: "unitless duration", rule: RuleAttrValue, sev: SeverityWarning,
			bad:  okGraph(vNode("slow", "prompt", "x", "timeout", "300"), vEdge("work", "slow"), vEdge("slow", "exit")),
			want: fires{count: 1, node: "slow", msg: `node slow: timeout="300" has no unit: read as 300s`},
			good: okGraph(vNode("slow", "prompt", "x", "timeout", "300s"), vEdge("work", "slow"), vEdge("slow", "exit")),
		},
		{
			name: "bad typed values", rule: RuleAttrValue, sev: SeverityError,
			bad: vGraph(map[string]string{"default_max_retries": "many"},
				vNode("start", "shape", "Mdiamond"), vNode("exit", "shape", "Msquare"),
				vNode("work", "prompt", "x", "max_retries", "-1", "goal_gate", "maybe", "timeout", "5 parsecs",
					"human.timeout", "soon", "join_policy", "any", "reasoning_effort", "extreme", "max_parallel", "1.5",
					"manager.max_cycles", "x", "auto_status", "2", "allow_partial", "si", "max_turns", "ten",
					"max_node_visits", "-3", "retry_target", "work", "merge_context", "all"),
				vEdge("start", "work", "weight", "heavy", "loop_restart", "perhaps"), vEdge("work", "exit")),
			want: fires{count: 16, msg: `graph: default_max_retries="many" is not an integer`},
			good: vGraph(map[string]string{"default_max_retries": "2", "default_max_retry": "1", "max_node_visits": "10"},
				vNode("start", "shape", "Mdiamond"), vNode("exit", "shape", "Msquare"),
				vNode("work", "prompt", "x", "max_retries", "0", "goal_gate", "true", "timeout", "1d",
					"human.timeout", "250ms", "join_policy", "first_success", "reasoning_effort", "low", "max_parallel", "2",
					"manager.max_cycles", "5", "auto_status", "no", "allow_partial", "off", "max_turns", " 30 ",
					"max_node_visits", "3", "retry_target", "work", "merge_context", "best"),
				vEdge("start", "work", "weight", "-2", "loop_restart", "false"), vEdge("work", "exit", "weight", "")),
		},
		{
			name: "shell off", rule: RuleShellDisabled, sev: SeverityError,
			bad:  okGraph(vNode("sh", "shape", "parallelogram", "tool_command", "make test"), vEdge("work", "sh"), vEdge("sh", "exit")),
			want: fires{count: 1, node: "sh", msg: "shell commands are off"},
			good: okGraph(vNode("sh", "shape", "parallelogram", "tool_command", "make test"), vEdge("work", "sh"), vEdge("sh", "exit")),
			gopt: ValidateOptions{AllowShell: true},
		},
		{
			name: "tool node misconfigured", rule: RuleToolNodeConfig, sev: SeverityError,
			bad: okGraph(
				vNode("t2", "type", "tool", "tool", "grep", "tool_command", "grep"),
				vNode("t3", "shape", "parallelogram", "tool", "grep", "tool_input", `{"q": $goal}`),
				vNode("t4", "shape", "parallelogram", "tool", "grep", "tool_input", `["$goal"]`),
				vEdge("work", "t2"), vEdge("t2", "t3"), vEdge("t3", "t4"), vEdge("t4", "exit")),
			opts: ValidateOptions{AllowShell: true},
			want: fires{count: 3, node: "t2", msg: "sets both tool and tool_command"},
			good: okGraph(
				vNode("t1", "shape", "parallelogram", "tool", "grep", "tool_input", `{"q": "$goal", "in": "${context.file}", "n": 3}`),
				vNode("t2", "shape", "parallelogram", "tool_command", "ls"),
				vEdge("work", "t1"), vEdge("t1", "t2"), vEdge("t2", "exit")),
			gopt: ValidateOptions{AllowShell: true, Tools: knows("grep")},
		},
		{
			// Spec 4.10: the tool handler returns "Outcome(status=FAIL,
			// failure_reason="No tool_command specified")" at run time, so a
			// tool node without a tool is a warning, not a refusal.
			name: "tool node without a tool", rule: RuleToolNodeConfig, sev: SeverityWarning,
			bad:  okGraph(vNode("t1", "shape", "parallelogram"), vEdge("work", "t1"), vEdge("t1", "exit")),
			want: fires{count: 1, node: "t1", msg: "names no tool: it has neither tool nor tool_command, and fails if it runs"},
			good: okGraph(
				vNode("t1", "shape", "parallelogram", "tool", "grep", "tool_input", `{"q": "$goal", "in": "${context.file}", "n": 3}`),
				vNode("t2", "shape", "parallelogram", "tool_command", "ls"),
				vEdge("work", "t1"), vEdge("t1", "t2"), vEdge("t2", "exit")),
			gopt: ValidateOptions{AllowShell: true, Tools: knows("grep")},
		},
		{
			name: "unknown tool", rule: RuleToolKnown, sev: SeverityError,
			bad:  okGraph(vNode("t", "shape", "parallelogram", "tool", "grpe"), vEdge("work", "t"), vEdge("t", "exit")),
			opts: ValidateOptions{Tools: knows("grep")},
			want: fires{count: 1, node: "t", msg: `the tool "grpe", which does not exist`},
			good: okGraph(vNode("t", "shape", "parallelogram", "tool", "grpe"), vEdge("work", "t"), vEdge("t", "exit")),
			gopt: ValidateOptions{}, // no tool list: not checked
		},
		{
			name: "unknown plugin", rule: RuleHandlerPlugin, sev: SeverityError,
			bad: okGraph(vNode("w1", "type", "wasm:lint"), vNode("w2", "handler", "fmtr"),
				vEdge("work", "w1"), vEdge("w1", "w2"), vEdge("w2", "exit")),
			opts: ValidateOptions{Plugins: knows("other")},
			want: fires{count: 2, node: "w1", msg: `the WebAssembly plugin "lint", which is not installed`},
			good: okGraph(vNode("w1", "type", "wasm:lint"), vNode("w2", "handler", "fmtr"),
				vEdge("work", "w1"), vEdge("w1", "w2"), vEdge("w2", "exit")),
			gopt: ValidateOptions{Plugins: knows("lint", "fmtr")},
		},
		{
			name: "plugin without a name", rule: RuleHandlerPlugin, sev: SeverityError,
			bad:  okGraph(vNode("w", "type", "wasm: "), vEdge("work", "w"), vEdge("w", "exit")),
			want: fires{count: 1, node: "w", msg: "names no plugin"},
		},
		{
			name: "parallel without a common fan-in", rule: RuleParallelFanIn, sev: SeverityWarning,
			bad: okGraph(
				vNode("par", "shape", "component"), vNode("a", "prompt", "x"), vNode("b", "prompt", "y"),
				vNode("join", "shape", "tripleoctagon"), vNode("lonely", "shape", "component"),
				vEdge("work", "par"), vEdge("par", "a"), vEdge("par", "b"),
				vEdge("a", "join"), vEdge("b", "exit"), vEdge("join", "exit"), vEdge("work", "lonely")),
			want: fires{count: 2, node: "par", msg: "do not reach a common fan-in node"},
			good: okGraph(
				vNode("par", "shape", "component"), vNode("a", "prompt", "x"), vNode("b", "prompt", "y"),
				vNode("c", "prompt", "z"), vNode("join", "shape", "tripleoctagon"),
				vEdge("work", "par"), vEdge("par", "a"), vEdge("par", "b"), vEdge("par", "join"),
				vEdge("a", "c"), vEdge("c", "a", "condition", "outcome=retry"), vEdge("c", "join"),
				vEdge("b", "join"), vEdge("join", "exit")),
		},
		{
			name: "plugin name with spaces", rule: RuleHandlerPlugin, sev: SeverityError,
			bad:  okGraph(vNode("w", "type", "wasm: verify"), vEdge("work", "w"), vEdge("w", "exit")),
			opts: ValidateOptions{Plugins: knows("verify")},
			want: fires{count: 1, node: "w", msg: `the plugin name " verify" has spaces around it`},
			good: okGraph(vNode("w", "type", " wasm:verify "), vEdge("work", "w"), vEdge("w", "exit")),
			gopt: ValidateOptions{Plugins: knows("verify")},
		},
		{
			name: "unknown attributes", rule: RuleUnknownAttribute, sev: SeverityWarning,
			bad: okGraphWith(map[string]string{"goal": "ship", "defualt_fidelity": "compact"},
				vNode("w2", "promt", "x", "max_retires", "2", "llm_modle", "m", "label", "W"),
				vEdge("work", "w2", "prompt", "p"), vEdge("w2", "exit", "weigth", "1", "loop_restart", "true")),
			want: fires{count: 6, msg: `graph: unknown attribute "defualt_fidelity": nothing reads it; did you mean default_fidelity?`},
			good: okGraphWith(map[string]string{"goal": "ship", "rankdir": "LR", "bgcolor": "white", "label": "P", "max_node_visits": "3"},
				vNode("w2", "label", "W", "color", "red", "style", "filled", "fillcolor", "grey", "class", "a b", "fontname", "Inter"),
				vNode("v", "type", "wasm:verify", "check", "implement.output", "marker", "tests pass", "fail_label", "fix", "pass_label", "ok"),
				vNode("h", "handler", "lint", "strictness", "high"),
				vNode("host", "type", "deploy", "env", "prod"),
				vEdge("work", "w2", "label", "go", "weight", "2", "color", "blue", "penwidth", "2"), vEdge("w2", "v"),
				vEdge("v", "h", "condition", "outcome=success", "fidelity", "full", "thread_id", "t"), vEdge("h", "host"), vEdge("host", "exit", "loop_restart", "false")),
			gopt: ValidateOptions{KnownTypes: append(slices.Clone(builtinTypes), "deploy")},
		},
		{
			name: "unknown shapes", rule: RuleUnknownShape, sev: SeverityWarning,
			bad: okGraph(vNode("d", "shape", "diamnd", "prompt", "x"), vNode("m", "shape", "mdiamond", "prompt", "y"),
				vNode("t", "shape", "blob", "type", "tool", "tool", "grep"),
				vEdge("work", "d"), vEdge("d", "m"), vEdge("m", "t"), vEdge("t", "exit")),
			want: fires{count: 3, node: "d", msg: `node d: shape "diamnd" is not a Graphviz shape, so the node runs as a codergen (agent) stage; did you mean diamond?`},
			good: okGraph(vNode("o", "shape", "ellipse", "prompt", "x"), vNode("r", "shape", "Mrecord", "prompt", "y"),
				vNode("c", "shape", "cylinder", "type", "tool", "tool", "grep"), vNode("g", "shape", "hexagon"),
				vEdge("work", "o"), vEdge("o", "r"), vEdge("r", "c"), vEdge("c", "g"), vEdge("g", "exit")),
		},
		{
			name: "human default choice", rule: RuleHumanDefault, sev: SeverityError,
			bad: okGraph(
				vNode("gate", "shape", "hexagon", "human.default_choice", "[A] Aprove"),
				vNode("lonely", "type", "wait.human", "human.default_choice", "yes"),
				vNode("fix", "prompt", "fix"),
				vEdge("work", "gate"), vEdge("gate", "exit", "label", "[A] Approve"), vEdge("gate", "fix", "label", "[R] Revise"),
				vEdge("fix", "lonely")),
			want: fires{count: 2, node: "gate", msg: `human gate gate: human.default_choice="[A] Aprove" names none of its choices "[A] Approve" (key A, to exit), "[R] Revise" (key R, to fix)`},
			good: okGraph(
				vNode("byKey", "shape", "hexagon", "human.default_choice", "a"),
				vNode("byLabel", "shape", "hexagon", "human.default_choice", " APPROVE "),
				vNode("byFull", "shape", "hexagon", "human.default_choice", "[A] Approve"),
				vNode("byTarget", "shape", "hexagon", "human.default_choice", "fix"),
				vNode("byBare", "shape", "hexagon", "human.default_choice", "exit"),
				vNode("notAGate", "prompt", "p", "human.default_choice", "nothing"),
				vNode("fix", "prompt", "fix"),
				vEdge("work", "byKey"), vEdge("byKey", "byLabel", "label", "[A] Approve"), vEdge("byKey", "fix", "label", "[R] Revise"),
				vEdge("byLabel", "byFull", "label", "A) Approve"), vEdge("byFull", "byTarget", "label", "[A] Approve"),
				vEdge("byTarget", "fix", "label", "Y - Yes"), vEdge("byTarget", "notAGate", "label", "No"),
				vEdge("fix", "byBare"), vEdge("notAGate", "byBare"), vEdge("byBare", "exit")),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := withRule(Validate(c.bad, c.opts), c.rule)
			if len(got) != c.want.count {
				t.Fatalf("%s fired %d times, want %d: %+v", c.rule, len(got), c.want.count, got)
			}
			d := got[0]
			if d.Severity != c.sev {
				t.Errorf("severity %s, want %s", d.Severity, c.sev)
			}
			if d.NodeID != c.want.node || d.Edge != c.want.edge {
				t.Errorf("at node %q edge %q, want %q %q", d.NodeID, d.Edge, c.want.node, c.want.edge)
			}
			if !strings.Contains(d.Message, c.want.msg) {
				t.Errorf("message %q, want it to contain %q", d.Message, c.want.msg)
			}
			if d.Fix == "" {
				t.Error("no fix")
			}
			if (d.NodeID != "" || d.Edge != "") && d.Line == 0 {
				t.Error("a node or edge diagnostic without a line")
			}
			if c.good != nil {
				if ds := Validate(c.good, c.gopt); len(ds) != 0 {
					t.Errorf("the good graph has diagnostics: %+v", ds)
				}
			}
		})
	}
}

// The attr_value messages name the owner and the value.
func TestValidateAttrValueMessages(t *testing.T) {
	g := okGraph(vEdge("work", "work", "weight", "heavy", "condition", "outcome=retry"), vNode("x", "max_retries", "-1", "prompt", "p"), vEdge("work", "x"), vEdge("x", "exit"))
	var msgs []string
	for _, d := range withRule(Validate(g, ValidateOptions{}), RuleAttrValue) {
		msgs = append(msgs, d.Message)
	}
	want := []string{`edge work -> work: weight="heavy" is not an integer`, `node x: max_retries=-1 is negative`}
	if !slices.Equal(msgs, want) {
		t.Errorf("messages %q, want %q", msgs, want)
	}
}

// Many fan-ins: the reach sets are computed 64 at a time, so a common
// fan-in past the first 64 must still be found, and two branches that
// reach different fan-ins in different chunks must not be joined.
func TestValidateParallelFanInManyFanIns(t *testing.T) {
	build := func(aTo, bTo int) *Graph {
		items := []any{vNode("par", "shape", "component"), vNode("a", "prompt", "x"), vNode("b", "prompt", "y"),
			vEdge("work", "par"), vEdge("par", "a"), vEdge("par", "b")}
		for i := range 150 {
			id := fmt.Sprintf("f%d", i)
			items = append(items, vNode(id, "shape", "tripleoctagon"), vEdge(id, "exit"))
			if i > 0 {
				items = append(items, vEdge(fmt.Sprintf("f%d", i-1), id, "condition", "outcome=fail"))
			}
		}
		items = append(items, vEdge("a", fmt.Sprintf("f%d", aTo)), vEdge("b", fmt.Sprintf("f%d", bTo)))
		return okGraph(items...)
	}
	for _, c := range []struct {
		a, b int
		fire bool
	}{
		{100, 130, false}, // a's fan-in f100 reaches f130 through the chain
		{149, 149, false},
		{149, 3, false},
		{70, 0, false},
	} {
		got := withRule(Validate(build(c.a, c.b), ValidateOptions{}), RuleParallelFanIn)
		if (len(got) > 0) != c.fire {
			t.Errorf("branches to f%d and f%d: fired %v, want %v", c.a, c.b, got, c.fire)
		}
	}
	// Without the chain, only a fan-in both branches name joins them,
	// whichever 64 it falls in.
	unchained := func(edges ...*Edge) *Graph {
		items := []any{vNode("par", "shape", "component"), vNode("a", "prompt", "x"), vNode("b", "prompt", "y"),
			vEdge("work", "par"), vEdge("par", "a"), vEdge("par", "b")}
		for i := range 150 {
			id := fmt.Sprintf("f%d", i)
			items = append(items, vNode(id, "shape", "tripleoctagon"), vEdge(id, "exit"))
		}
		for _, e := range edges {
			items = append(items, e)
		}
		return okGraph(items...)
	}
	for _, c := range []struct {
		name  string
		g     *Graph
		fires bool
	}{
		{"disjoint", unchained(vEdge("a", "f10"), vEdge("b", "f100"), vEdge("a", "f140"), vEdge("b", "f141")), true},
		{"common in the first 64 only", unchained(vEdge("a", "f10"), vEdge("b", "f10"), vEdge("a", "f100")), false},
		{"common in the last 64 only", unchained(vEdge("a", "f10"), vEdge("b", "f140"), vEdge("a", "f140")), false},
	} {
		if got := withRule(Validate(c.g, ValidateOptions{}), RuleParallelFanIn); (len(got) == 1) != c.fires {
			t.Errorf("%s: got %+v, want a warning: %v", c.name, got, c.fires)
		}
	}
}

func TestValidateOrderAndHostRules(t *testing.T) {
	g := okGraph(
		vNode("odd", "type", "frobnicate", "prompt", "p"), // line 6: a warning
		vEdge("work", "odd"),
		vEdge("odd", "exit", "condition", "outcome=="), // line 8: an error
		vEdge("exit", "work"),                          // line 9: an error
	)
	host := NewRule("house_style", func(g *Graph, _ ValidateOptions) []Diagnostic {
		return []Diagnostic{
			{Severity: SeverityInfo, Message: "info first in the list", Line: 1},
			{Message: "no severity: an error", Line: 7, Fix: "f"},
		}
	})
	ds := Validate(g, ValidateOptions{}, host)
	var got []string
	for _, d := range ds {
		got = append(got, fmt.Sprintf("%s:%s:%d", d.Severity, d.Rule, d.Line))
	}
	want := []string{
		"error:house_style:7", "error:condition_syntax:8", "error:exit_no_outgoing:9",
		"warning:type_known:6", "info:house_style:1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("order\n got %q\nwant %q", got, want)
	}
	if !HasErrors(ds) || HasErrors(ds[3:]) {
		t.Error("HasErrors is wrong")
	}
	if HasErrors(nil) {
		t.Error("HasErrors(nil)")
	}
}

func TestValidationError(t *testing.T) {
	e := &ValidationError{File: "p.dot", Diagnostics: []Diagnostic{
		{Rule: "start_node", Severity: SeverityError, Message: "no start", Fix: "add one"},
		{Rule: "type_known", Severity: SeverityWarning, Message: "odd", Line: 2},
		{Rule: "condition_syntax", Severity: SeverityError, Message: "bad", Line: 7},
	}}
	want := "p.dot: start_node: no start (add one)\np.dot:7: condition_syntax: bad"
	if e.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", e.Error(), want)
	}
	if got := (&ValidationError{}).Error(); got != "<dot>: pipeline is not valid" {
		t.Errorf("empty: %q", got)
	}
}

func TestDiagnosticJSON(t *testing.T) {
	b, err := json.Marshal(Diagnostic{Rule: "r", Severity: SeverityWarning, Message: "m", NodeID: "n", Edge: "a -> b", Line: 3, Fix: "f"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"rule":"r","severity":"warning","message":"m","node":"n","edge":"a -\u003e b","line":3,"fix":"f"}`
	if string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestDefaultRulesNames(t *testing.T) {
	var names []string
	for _, r := range DefaultRules() {
		names = append(names, r.Name())
	}
	want := []string{"start_node", "terminal_node", "reachability", "edge_target_exists", "start_no_incoming",
		"exit_no_outgoing", "condition_syntax", "stylesheet_syntax", "type_known", "fidelity_valid",
		"retry_target_exists", "goal_gate_has_retry", "prompt_on_llm_nodes", "attr_value", "shell_disabled",
		"tool_node_config", "tool_known", "handler_plugin", "parallel_fan_in", "unknown_attribute", "unknown_shape",
		"human_default_choice", "manager_loop"}
	if !slices.Equal(names, want) {
		t.Errorf("got %q", names)
	}
}

// A long pipeline whose retry edges make it one strongly connected
// component, 20,000 nodes deep, validates: the component search is
// iterative, and every rule linear.
func TestValidateLongChain(t *testing.T) {
	g := genGraph(20_000, 15_000)
	if ds := Validate(g, ValidateOptions{AllowShell: true}); HasErrors(ds) {
		t.Fatalf("errors: %+v", ds[:min(len(ds), 5)])
	}
}

// genGraph is a valid pipeline of about n nodes: a chain of stages, with
// a parallel block (3 branches and a fan-in) every `every` stages (none
// when every is 0), conditions, retries, a tool node and a stylesheet.
func genGraph(n, every int) *Graph {
	g := &Graph{Attrs: map[string]string{
		"goal": "build it", "default_max_retries": "2", "default_fidelity": "compact",
		"model_stylesheet": "* { llm_model: m } .hot { reasoning_effort: high } #s1 { llm_provider: p }",
	}}
	node := func(id string, kv ...string) {
		g.Nodes = append(g.Nodes, &Node{ID: id, Attrs: vAttrs(kv), Line: len(g.Nodes) + len(g.Edges) + 1})
	}
	edge := func(from, to string, kv ...string) {
		g.Edges = append(g.Edges, &Edge{From: from, To: to, Attrs: vAttrs(kv), Line: len(g.Nodes) + len(g.Edges) + 1})
	}
	node("start", "shape", "Mdiamond")
	prev := "start"
	for i := 0; len(g.Nodes) < n-1; i++ {
		id := fmt.Sprintf("s%d", i)
		switch {
		case every > 0 && i%every == every-1:
			node(id, "shape", "component", "max_parallel", "3")
			join := id + "_join"
			node(join, "shape", "tripleoctagon")
			for b := range 3 {
				br := fmt.Sprintf("%s_b%d", id, b)
				node(br, "prompt", "branch $goal", "class", "hot")
				edge(id, br)
				edge(br, join)
			}
			edge(prev, id)
			prev = join
		case i%7 == 3:
			node(id, "shape", "parallelogram", "tool", "grep", "tool_input", `{"q": "$goal"}`, "timeout", "30s")
			edge(prev, id)
			prev = id
		default:
			node(id, "prompt", "step $goal", "max_retries", "1", "goal_gate", fmt.Sprint(i%10 == 0), "retry_target", "s0")
			edge(prev, id, "condition", "outcome=success && context.ok!=no", "weight", "1")
			if i > 0 {
				edge(id, prev, "condition", "outcome=fail", "label", "[R] Retry")
			}
			prev = id
		}
	}
	node("exit", "shape", "Msquare")
	edge(prev, "exit")
	g.reindex()
	return g
}

func TestGenGraphIsValid(t *testing.T) {
	g := genGraph(1000, 10)
	if err := ApplyTransforms(g); err != nil {
		t.Fatal(err)
	}
	ds := Validate(g, ValidateOptions{Tools: knows("grep")})
	if len(ds) != 0 {
		t.Fatalf("diagnostics: %+v", ds[:min(len(ds), 5)])
	}
	if len(g.Nodes) < 1000 {
		t.Fatalf("%d nodes", len(g.Nodes))
	}
}

func BenchmarkValidate1000(b *testing.B) {
	g := genGraph(1000, 10)
	if err := ApplyTransforms(g); err != nil {
		b.Fatal(err)
	}
	opts := ValidateOptions{Tools: knows("grep"), Plugins: knows()}
	b.ReportAllocs()
	for b.Loop() {
		if ds := Validate(g, opts); len(ds) != 0 {
			b.Fatal(ds[0])
		}
	}
}

func TestValidateToolInputMessage(t *testing.T) {
	g := okGraph(vNode("t", "shape", "parallelogram", "tool", "grep", "tool_input", `{"q": $goal}`), vEdge("work", "t"), vEdge("t", "exit"))
	ds := withRule(Validate(g, ValidateOptions{}), RuleToolNodeConfig)
	if len(ds) != 1 || !strings.HasPrefix(ds[0].Message, "node t: tool_input is not valid JSON at byte 7: invalid character '$'") {
		t.Errorf("got %+v", ds)
	}
}

// unknown_attribute names the owner and the key, suggests the nearest
// known attribute of that scope, and says so when a key belongs elsewhere.
func TestValidateUnknownAttributeMessages(t *testing.T) {
	g := okGraphWith(map[string]string{"goal": "ship", "timeout": "5m"},
		vNode("w2", "promt", "x", "max_retires", "2", "llm_modle", "m", "zzz_custom", "1", "condition", "outcome=success"),
		vEdge("work", "w2", "prompt", "p"), vEdge("w2", "exit"))
	type got struct{ msg, fix string }
	var msgs []got
	for _, d := range withRule(Validate(g, ValidateOptions{}), RuleUnknownAttribute) {
		msgs = append(msgs, got{d.Message, d.Fix})
	}
	want := []got{
		{"graph: timeout is a node attribute; on a graph nothing reads it", "set timeout on a node, or remove it"},
		{"node w2: condition is an edge attribute; on a node nothing reads it", "set condition on an edge, or remove it"},
		{`node w2: unknown attribute "llm_modle": nothing reads it; did you mean llm_model?`, "rename llm_modle to llm_model"},
		{`node w2: unknown attribute "max_retires": nothing reads it; did you mean max_retries?`, "rename max_retires to max_retries"},
		{`node w2: unknown attribute "promt": nothing reads it; did you mean prompt?`, "rename promt to prompt"},
		{`node w2: unknown attribute "zzz_custom": nothing reads it`, "remove it, or correct it to an attribute of the DOT reference (go doc github.com/morphhost/morph/pipeline)"},
		{"edge work -> w2: prompt is a node attribute; on an edge nothing reads it", "set prompt on a node, or remove it"},
	}
	if !slices.Equal(msgs, want) {
		t.Errorf("got\n%q\nwant\n%q", msgs, want)
	}
}

// unknown_shape suggests the nearest shape and the handler it picks, says
// that a node without a type runs as codergen, and not when it has one.
func TestValidateUnknownShapeMessages(t *testing.T) {
	g := okGraph(vNode("m", "shape", "mdiamond", "prompt", "y"), vNode("t", "shape", "zigzag", "type", "tool", "tool", "grep"),
		vEdge("work", "m"), vEdge("m", "t"), vEdge("t", "exit"))
	ds := withRule(Validate(g, ValidateOptions{}), RuleUnknownShape)
	if len(ds) != 2 {
		t.Fatalf("got %+v", ds)
	}
	if want := `node m: shape "mdiamond" is not a Graphviz shape, so the node runs as a codergen (agent) stage; did you mean Mdiamond?`; ds[0].Message != want {
		t.Errorf("message %q, want %q", ds[0].Message, want)
	}
	if want := "write shape=Mdiamond (a start node)"; ds[0].Fix != want {
		t.Errorf("fix %q, want %q", ds[0].Fix, want)
	}
	if want := `node t: shape "zigzag" is not a Graphviz shape`; ds[1].Message != want {
		t.Errorf("message %q, want %q", ds[1].Message, want)
	}
	if want := "use a Graphviz shape such as box, ellipse or note (the node's type picks its handler)"; ds[1].Fix != want {
		t.Errorf("fix %q, want %q", ds[1].Fix, want)
	}
	g = okGraph(vNode("z", "shape", "zigzag", "prompt", "p"), vEdge("work", "z"), vEdge("z", "exit"))
	if ds := withRule(Validate(g, ValidateOptions{}), RuleUnknownShape); len(ds) != 1 || !strings.Contains(ds[0].Fix, "hexagon (wait.human)") {
		t.Errorf("without a type or a near shape, the fix lists the handler shapes: %+v", ds)
	}
}

// Parsed from DOT, the new rules point at the lines of the nodes and
// edges, and a typo'd attribute on a node default is reported on every
// node it reaches.
func TestValidateNewRulesFromDOT(t *testing.T) {
	src := `digraph p {
  start [shape=Mdiamond]
  plan  [promt="Plan it"]
  check [shape=diamnd, prompt="Check"]
  gate  [shape=hexagon, human.default_choice="[A] Aprove"]
  done  [shape=Msquare]
  start -> plan -> check -> gate
  gate -> done [label="[A] Approve", wieght=2]
  gate -> plan [label="[R] Revise"]
}`
	g, err := ParseDOTNamed("p.dot", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyTransforms(g); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range Validate(g, ValidateOptions{}) {
		if d.Rule == RuleUnknownAttribute || d.Rule == RuleUnknownShape || d.Rule == RuleHumanDefault {
			got = append(got, fmt.Sprintf("%s:%s:%d", d.Severity, d.Rule, d.Line))
		}
	}
	want := []string{"error:human_default_choice:5", "warning:unknown_attribute:3", "warning:unknown_shape:4", "warning:unknown_attribute:8"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Plugins and Tools as a runner passes them: Plugins is asked the plugin
// name of type wasm:<name> and handler=<name> alike, Tools the tool's, and
// type_known does not list a registry's wasm types as types to write.
func TestValidatePluginsAndToolsGiven(t *testing.T) {
	reg := DefaultHandlerRegistry()
	reg.Register(NewHandler(TypeWasmPrefix+"verify", nil))
	var asked []string
	opts := ValidateOptions{
		KnownTypes: reg.Types(),
		Plugins: func(name string) bool {
			asked = append(asked, name)
			return reg.Get(TypeWasmPrefix+name) != nil
		},
		Tools: knows("grep"),
	}
	g := okGraph(vNode("v1", "type", "wasm:verify"), vNode("v2", "handler", "verify"), vNode("v3", "handler", "lint"),
		vNode("t", "shape", "parallelogram", "tool", " grep "), vNode("odd", "type", "frobnicate", "prompt", "p"),
		vEdge("work", "v1"), vEdge("v1", "v2"), vEdge("v2", "v3"), vEdge("v3", "t"), vEdge("t", "odd"), vEdge("odd", "exit"))
	ds := Validate(g, opts)
	if !slices.Equal(asked, []string{"verify", "verify", "lint"}) {
		t.Errorf("Plugins asked %q", asked)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.Rule+":"+d.NodeID)
	}
	if want := []string{"handler_plugin:v3", "type_known:odd"}; !slices.Equal(got, want) {
		t.Errorf("diagnostics %q, want %q: %+v", got, want, ds)
	}
	if fix := withRule(ds, RuleTypeKnown)[0].Fix; strings.Contains(fix, "wasm:verify") || !strings.Contains(fix, "wait.human") {
		t.Errorf("type_known fix %q", fix)
	}
}

// The example pipelines use only known attributes and shapes, and their
// gates' defaults name choices.
func TestValidateExamplesHaveNoTypos(t *testing.T) {
	files, err := filepath.Glob("../examples/pipelines/*.dot")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		g, err := ParseDOTFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := ApplyTransforms(g); err != nil {
			t.Fatal(err)
		}
		for _, d := range Validate(g, ValidateOptions{}) {
			if d.Rule == RuleUnknownAttribute || d.Rule == RuleUnknownShape || d.Rule == RuleHumanDefault {
				t.Errorf("%s: %+v", f, d)
			}
		}
	}
}
