package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/morphhost/morph/internal/safetext"
)

// KeyToolOutput is where a tool node puts its output (cut; the whole
// output is the artifact <node>.output).
const KeyToolOutput = "tool.output"

// A tool stage's files in its stage directory: the call (a morph tool's
// name and expanded input, as JSON) or the shell command, written before
// it runs, and its output (capped as the artifact is) when it succeeds.
const (
	toolCallFile    = "tool_call.json"
	toolCommandFile = "command.sh"
	toolOutputFile  = "output.txt"
)

// ToolHandler runs a tool node (parallelogram). With `tool`, it runs that
// morph tool, a built-in or a plugin's (plugin tools run in their
// sandbox), with `tool_input`, a JSON object whose string values may hold
// $goal and ${context.key}: they are expanded inside the decoded strings,
// so a value cannot break out of its string into the JSON. With
// `tool_command`, it runs a shell command, outside any sandbox: only when
// the operator allowed it (Runner.AllowShell, [pipeline] allow_shell in
// morph.toml). Either way the node's timeout (default Limits.ToolTimeout)
// and the output cap (Limits.MaxToolOutputBytes) hold.
type ToolHandler struct {
	// Tools runs the tools (nil: the Runner's).
	Tools ToolRunner
}

// Type returns "tool".
func (*ToolHandler) Type() string { return TypeTool }

// Execute runs the tool or the command.
func (h *ToolHandler) Execute(ctx context.Context, node *Node, pctx *Context, store *ArtifactStore) (*Outcome, error) {
	x := ExecutionFrom(ctx)
	var r *Runner
	if x != nil {
		r = x.Runner
	}
	lim := r.limits()
	timeout, err := node.Duration("timeout", lim.ToolTimeout)
	if err != nil {
		return nil, err
	}
	tctx, cancel := r.executor().WithTimeout(ctx, timeout)
	defer cancel()

	var out string
	switch name, cmd := strings.TrimSpace(node.Attrs["tool"]), node.Attrs["tool_command"]; {
	case name != "":
		tools := h.Tools
		if tools == nil && r != nil {
			tools = r.Tools
		}
		if tools == nil || !tools.HasTool(name) {
			return Fail("tool node %s: no tool %q (give a built-in tool in [tools] builtin, or a plugin that provides it)", node.ID, name), nil
		}
		input, err := toolInput(node, pctx)
		if err != nil {
			return Fail("tool node %s: %v", node.ID, err), nil
		}
		call, _ := json.Marshal(map[string]any{"tool": name, "input": input})
		_ = x.WriteStageFile(toolCallFile, call)
		out, err = tools.RunTool(tctx, name, input)
		if err != nil {
			return toolFailure(ctx, tctx, node, timeout, err), nil
		}
	case strings.TrimSpace(cmd) != "":
		if r == nil || !r.AllowShell {
			return Fail("tool node %s: tool_command runs a shell command outside the sandbox, which is off: set allow_shell = true under [pipeline] in morph.toml to allow it, or use a tool (tool=\"name\")", node.ID), nil
		}
		_ = x.WriteStageFile(toolCommandFile, []byte(cmd))
		out, err = runShell(tctx, cmd, lim.MaxToolOutputBytes, shellEnv(x, pctx))
		if err != nil {
			return toolFailure(ctx, tctx, node, timeout, err), nil
		}
	default:
		return Fail("tool node %s has neither tool nor tool_command: set tool=\"<name>\" (or tool_command) on it", node.ID), nil
	}
	out = safetext.Truncate(out, lim.MaxToolOutputBytes)
	_ = x.WriteStageFile(toolOutputFile, []byte(out))
	o := &Outcome{Status: StatusSuccess, ContextUpdates: map[string]any{
		KeyToolOutput:       safetext.Truncate(out, maxContextOutputBytes),
		node.ID + ".output": safetext.Truncate(out, maxContextOutputBytes),
	}}
	if store != nil {
		if _, err := store.Store(node.ID+".output", node.Label(), []byte(out)); err != nil {
			o.Notes = "output not stored: " + err.Error()
		}
	}
	return o, nil
}

// toolFailure words a tool's error: a timeout as such, else the error.
func toolFailure(ctx, tctx context.Context, node *Node, timeout time.Duration, err error) *Outcome {
	if ctx.Err() == nil && timedOut(tctx) {
		return Fail("tool node %s timed out after %s (its timeout attribute)", node.ID, timeout)
	}
	return Fail("tool node %s: %s", node.ID, safetext.Truncate(err.Error(), 4000))
}

// toolInput decodes tool_input and expands placeholders in its strings.
func toolInput(node *Node, pctx *Context) (map[string]any, error) {
	raw := strings.TrimSpace(node.Attrs["tool_input"])
	if raw == "" {
		return map[string]any{}, nil
	}
	var input map[string]any
	if err := json.Unmarshal([]byte(raw), &input); err != nil {
		return nil, fmt.Errorf("tool_input is not a JSON object: %w", err)
	}
	return expandJSON(input, pctx).(map[string]any), nil
}

// expandJSON expands placeholders in every string of v.
func expandJSON(v any, pctx *Context) any {
	switch x := v.(type) {
	case string:
		return ExpandVars(x, pctx)
	case map[string]any:
		for k, e := range x {
			x[k] = expandJSON(e, pctx)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = expandJSON(e, pctx)
		}
		return x
	}
	return v
}
