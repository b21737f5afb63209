package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/morphhost/morph/internal/suggest"
)

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
			"node %s has type %q, which no handler runs: it runs as its shape implies (%s)", n.ID, t, n.ShapeType()))
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

func checkShellDisabled(g *Graph, opts ValidateOptions) []Diagnostic {
	if opts.AllowShell {
		return nil
	}
	const fix = "let the operator set allow_shell = true under [pipeline] in morph.toml, or remove the attribute"
	var out []Diagnostic
	for _, key := range toolHookKeys {
		if strings.TrimSpace(g.Attrs[key]) != "" {
			out = append(out, graphDiag(RuleShellDisabled, SeverityError, fix,
				"graph attribute %s runs a shell command around each tool call of every agent stage, and shell commands are off: they run outside any sandbox", key))
		}
	}
	for _, n := range g.Nodes {
		for _, key := range toolHookKeys {
			if strings.TrimSpace(n.Attrs[key]) != "" {
				out = append(out, nodeDiag(RuleShellDisabled, SeverityError, n, fix,
					"node %s: %s runs a shell command around each tool call of its agent, and shell commands are off: they run outside any sandbox", n.ID, key))
			}
		}
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
			// A warning: the spec's tool handler (4.10) fails such a node
			// when it runs, and a run that never reaches it is fine.
			out = append(out, nodeDiag(RuleToolNodeConfig, SeverityWarning, n,
				fmt.Sprintf(`set tool="<name>" on %s (a WebAssembly tool, with tool_input='{"arg": "..."}')`, n.ID),
				"tool node %s names no tool: it has neither tool nor tool_command, and fails if it runs", n.ID))
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
			fix := fmt.Sprintf("install a plugin that provides the tool %q, or name one that exists (morph tools --config FILE lists them)", tool)
			if opts.ToolNames != nil {
				if c := suggest.Closest(tool, opts.ToolNames(), 1, suggest.MaxTypo); len(c) > 0 {
					fix = fmt.Sprintf("did you mean %q? write tool=%q, or ", c[0], c[0]) + fix
				}
			}
			out = append(out, nodeDiag(RuleToolKnown, SeverityError, n, fix, "node %s uses the tool %q, which does not exist", n.ID, tool))
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
				fmt.Sprintf("add the plugin %q (one that provides a stage handler) to the [[plugins]] of the config given with --config, or fix the name", plugin),
				"node %s is run by the WebAssembly plugin %q, which is not installed", n.ID, plugin))
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
		explicit := n.explicitType() != "" || strings.TrimSpace(n.Attrs["handler"]) != ""
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

// nodeTypeAttr checks node_type, which kilroy and fabro write for type
// (spec 2.6 allows the name only inside an implementation): read as type,
// a WARNING suggesting type; when type is set too, node_type is ignored,
// also a WARNING.
func nodeTypeAttr(attrs map[string]string, key, who string) error {
	v := strings.TrimSpace(attrs[key])
	if v == "" {
		return nil
	}
	if t := strings.TrimSpace(attrs["type"]); t != "" {
		if t == v {
			return &attrWarning{fmt.Sprintf("%s: node_type=%q repeats type", who, v), "remove node_type"}
		}
		return &attrWarning{fmt.Sprintf("%s: node_type=%q is ignored: type=%q is the node's type", who, v, t), "remove node_type"}
	}
	return &attrWarning{fmt.Sprintf("%s: node_type=%q is read as type", who, v), fmt.Sprintf("write type=%q instead of node_type", v)}
}

// humanTypes are the values of a gate's human.type.
var humanTypes = []string{string(QuestionMultipleChoice), string(QuestionYesNo), string(QuestionConfirmation), string(QuestionFreeform)}

// humanModeAttr checks tracker's mode attribute, which a gate reads as
// human.type (its "choice" as multiple_choice): a WARNING naming the
// attribute to write. A value that is no question type (tracker's
// interview) is asked as multiple choice, as tracker does: a WARNING too.
func humanModeAttr(attrs map[string]string, key, who string) error {
	v := strings.TrimSpace(attrs[key])
	if v == "" {
		return nil
	}
	t, ok := humanModes[v]
	if !ok {
		return &attrWarning{fmt.Sprintf("%s: mode=%q is no question type morph asks: the gate asks multiple choice", who, v),
			"write human.type=\"multiple_choice\", \"yes_no\", \"confirmation\" or \"freeform\" instead of mode"}
	}
	if ht := strings.TrimSpace(attrs["human.type"]); ht != "" {
		return &attrWarning{fmt.Sprintf("%s: mode=%q is tracker's name of human.type, which is set too: mode is ignored", who, v), "remove mode"}
	}
	return &attrWarning{fmt.Sprintf("%s: mode=%q is tracker's name of human.type: read as human.type=%q", who, v, t),
		fmt.Sprintf("write human.type=%q instead of mode", t)}
}
