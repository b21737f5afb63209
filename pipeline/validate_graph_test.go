package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// namedTools is a ToolRunner that lists its tools, as EngineBackend does.
type namedTools []string

func (n namedTools) RunTool(context.Context, string, map[string]any) (string, error) {
	return "", errors.New("not run")
}
func (n namedTools) HasTool(name string) bool { return slices.Contains(n, name) }
func (n namedTools) ToolNames() []string      { return n }

// A misspelled tool gets the closest name the runner has, and the fix
// names the command that lists them; a name far from every tool gets no
// guess.
func TestValidateToolKnownSuggests(t *testing.T) {
	r := &Runner{Tools: namedTools{"count_words", "echo"}}
	g := okGraph(vNode("t", "shape", "parallelogram", "tool", "cout_words"), vEdge("work", "t"), vEdge("t", "exit"))
	ds, err := r.Prepare(g)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Prepare: %v", err)
	}
	got := withRule(ds, RuleToolKnown)
	if len(got) != 1 {
		t.Fatalf("tool_known: %+v", ds)
	}
	if fix := got[0].Fix; !strings.Contains(fix, `did you mean "count_words"?`) || !strings.Contains(fix, "morph tools --config FILE") {
		t.Errorf("fix %q", fix)
	}
	g = okGraph(vNode("t", "shape", "parallelogram", "tool", "zzzzzz"), vEdge("work", "t"), vEdge("t", "exit"))
	ds, _ = r.Prepare(g)
	if got := withRule(ds, RuleToolKnown); len(got) != 1 || strings.Contains(got[0].Fix, "did you mean") {
		t.Errorf("no close name: %+v", got)
	}
}

// ValidateGraph checks the graph alone: plugins, tools and the shell
// setting belong to a config, so a wasm:<plugin> node, a tool node and a
// shell command pass, while a graph error is still one. A Runner with
// nothing installed says the plugin is not, and its fix names --config.
func TestValidateGraphOnly(t *testing.T) {
	g := okGraph(vNode("v", "type", "wasm:verify"), vNode("t", "shape", "parallelogram", "tool", "grep"),
		vNode("sh", "shape", "parallelogram", "tool_command", "make test"),
		vEdge("work", "v"), vEdge("v", "t"), vEdge("t", "sh"), vEdge("sh", "exit"))
	if ds, err := ValidateGraph(g.Clone()); err != nil || len(ds) != 0 {
		t.Errorf("ValidateGraph: %v %+v", err, ds)
	}
	ds, err := (&Runner{}).Prepare(g.Clone())
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Prepare with nothing installed: %v", err)
	}
	plugin := withRule(ds, RuleHandlerPlugin)
	if len(plugin) != 1 || !strings.Contains(plugin[0].Fix, "--config") {
		t.Errorf("handler_plugin: %+v", plugin)
	}
	bad := vGraph(map[string]string{"goal": "x"}, vNode("start", "shape", "Mdiamond"), vNode("work", "prompt", "p"), vEdge("start", "work"))
	if _, err := ValidateGraph(bad); !errors.As(err, &ve) || len(withRule(ve.Diagnostics, RuleTerminalNode)) != 1 {
		t.Errorf("a graph without an exit: %v", err)
	}
}
