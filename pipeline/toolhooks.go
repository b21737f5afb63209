package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/safetext"
)

// EventToolHook reports a stage's tool hook that failed: a pre hook that
// denied a tool call (a status other than 0, a timeout), or a post hook
// that failed. Its Message names the hook, the node, the tool and why, with
// the start of the hook's standard error, escaped.
const EventToolHook EventKind = "tool_hook"

// The tool hooks' settings (spec 9.7).
const (
	// DefaultToolHookTimeout bounds a hook when tool_hooks.timeout is not
	// set.
	DefaultToolHookTimeout = 30 * time.Second
	// MaxToolHookTimeout is the longest tool_hooks.timeout: the engine
	// gives the middleware that runs the hooks this long (and a little
	// more) before it abandons a call.
	MaxToolHookTimeout = 10 * time.Minute
	// toolHookStderr is how much of a failed hook's standard error its
	// event, log line and denial reason quote.
	toolHookStderr = 300
	// toolHookOutput is how much of each of a hook's outputs is kept; the
	// rest is read and dropped, so a flooding hook never blocks.
	toolHookOutput = 4 << 10
	// ToolHooksMiddleware is the name of the engine middleware that runs
	// the hooks (ToolHooksOption).
	ToolHooksMiddleware = "pipeline.tool_hooks"
	// toolHooksLog is the stage file the failures are appended to.
	toolHooksLog = "tool_hooks.log"
)

// toolHookKeys are the attributes that name hook commands.
var toolHookKeys = []string{"tool_hooks.pre", "tool_hooks.post"}

// ErrToolHooks is the error of an agent stage whose tool hooks cannot run:
// shell commands off, a bad tool_hooks.timeout, or an engine without the
// ToolHooks middleware.
var ErrToolHooks = errors.New("tool hooks")

// ToolHooks is the engine middleware that runs a pipeline stage's
// tool_hooks.pre and tool_hooks.post (graph or node attributes, the
// node's winning) around each tool call of the stage's agent. It does
// nothing for a call outside a stage that sets hooks: EngineBackend puts
// the stage's hooks in the context of its agent's run, so one engine
// serves every stage and run.
//
// A hook is a shell command (sh -c), run as tool_command is (so only with
// [pipeline] allow_shell = true), with the environment of a shell command
// plus MORPH_TOOL_NAME, MORPH_TOOL_CALL_ID (the session, turn and step)
// and MORPH_NODE_ID, and the call as JSON on its standard input: {"tool",
// "input", "node", "call_id"}, and for the post hook "output" and
// "is_error" too. A pre hook that exits 0 lets the call go on; any other
// status, or a timeout (tool_hooks.timeout, default 30s), denies it: the
// model is told why as the call's observation. A post hook never changes
// the result. Failures are an EventToolHook, a log line and a line of the
// stage's tool_hooks.log.
type ToolHooks struct{}

// ToolHooksOption registers ToolHooks on an engine, fail-closed (a pre
// hook that cannot run denies the call) and given MaxToolHookTimeout per
// hook. config.OpenPipeline registers it when [pipeline] allow_shell is
// on; an embedding host that runs pipelines with hooks on its own engine
// registers it too. It is Bounded: a hook ends at its own timeout (its
// process group killed), so the engine calls it on the run's goroutine,
// and a tool call of a stage without hooks costs a context lookup.
func ToolHooksOption() engine.Option {
	var h ToolHooks
	f := &engine.Funcs{ID: ToolHooksMiddleware, Bounded: true, BeforeToolCall: h.BeforeToolCall, AfterToolCall: h.AfterToolCall}
	return engine.WithMiddleware(f, engine.MiddlewareConfig{Policy: engine.FailClosed, Timeout: MaxToolHookTimeout + 10*time.Second})
}

// Name returns ToolHooksMiddleware.
func (ToolHooks) Name() string { return ToolHooksMiddleware }

// BeforeToolCall runs the stage's pre hook, denying the call when it fails.
func (ToolHooks) BeforeToolCall(ctx context.Context, in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
	h, _ := ctx.Value(stageHooksKey{}).(*stageHooks)
	if h == nil || h.pre == "" {
		return abi.BeforeToolCallOutput{}, nil
	}
	id := callID(in.SessionID, in.Turn, in.Step)
	call := hookCall{Tool: in.Tool, Input: in.Input, Node: h.node, CallID: id}
	if why := h.run(ctx, "pre", h.pre, call); why != "" {
		return abi.BeforeToolCallOutput{Deny: true, Reason: why}, nil
	}
	return abi.BeforeToolCallOutput{}, nil
}

// AfterToolCall runs the stage's post hook; the output stays as it is.
func (ToolHooks) AfterToolCall(ctx context.Context, in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
	h, _ := ctx.Value(stageHooksKey{}).(*stageHooks)
	if h == nil || h.post == "" {
		return abi.AfterToolCallOutput{}, nil
	}
	out := in.Output
	call := hookCall{Tool: in.Tool, Input: in.Input, Node: h.node, CallID: callID(in.SessionID, in.Turn, in.Step), Output: &out, IsError: in.IsError}
	h.run(ctx, "post", h.post, call)
	return abi.AfterToolCallOutput{}, nil
}

// hookCall is what a hook reads on its standard input.
type hookCall struct {
	Tool    string         `json:"tool"`
	Input   map[string]any `json:"input"`
	Node    string         `json:"node"`
	CallID  string         `json:"call_id"`
	Output  *string        `json:"output,omitempty"` // post only
	IsError bool           `json:"is_error,omitempty"`
}

// callID names a tool call for its hooks: the engine's payloads carry the
// session, turn and step, which together are unique.
func callID(session string, turn, step int) string {
	return fmt.Sprintf("%s/%d/%d", session, turn, step)
}

// stageHooks are one agent stage's hooks, in its agent run's context.
type stageHooks struct {
	pre, post string
	timeout   time.Duration
	node      string
	env       []string
	x         *Execution
}

type stageHooksKey struct{}

// withToolHooks puts the stage's hooks, if it has any, in the context of
// its agent's run on eng: an error wrapping ErrToolHooks when they cannot
// run there.
func withToolHooks(ctx context.Context, eng *engine.Engine, cfg AgentRunConfig) (context.Context, error) {
	x := ExecutionFrom(ctx)
	if x == nil || x.Graph == nil {
		return ctx, nil
	}
	n := x.Graph.Node(cfg.NodeID)
	attr := func(key string) string {
		if n != nil {
			if v := strings.TrimSpace(n.Attrs[key]); v != "" {
				return v
			}
		}
		return strings.TrimSpace(x.Graph.Attrs[key])
	}
	h := &stageHooks{pre: attr("tool_hooks.pre"), post: attr("tool_hooks.post"), node: cfg.NodeID, x: x, timeout: DefaultToolHookTimeout}
	if h.pre == "" && h.post == "" {
		return ctx, nil
	}
	if x.Runner == nil || !x.Runner.AllowShell {
		return ctx, fmt.Errorf("%w: node %s: tool_hooks run shell commands, and shell commands are off: set allow_shell = true under [pipeline] in morph.toml to allow them", ErrToolHooks, cfg.NodeID)
	}
	if err := toolHookTimeoutAttr(map[string]string{"tool_hooks.timeout": attr("tool_hooks.timeout")}, "tool_hooks.timeout", "node "+cfg.NodeID); err != nil {
		return ctx, fmt.Errorf("%w: %w", ErrToolHooks, err)
	}
	if v := attr("tool_hooks.timeout"); v != "" {
		h.timeout, _ = ParseDuration(v) // checked above
	}
	if !slices.ContainsFunc(eng.Middleware(), func(m engine.MiddlewareInfo) bool { return m.Funcs.ID == ToolHooksMiddleware }) {
		return ctx, fmt.Errorf("%w: node %s sets tool_hooks, and its engine has no %s middleware to run them: register pipeline.ToolHooksOption() on the engine (morph does when [pipeline] allow_shell = true)", ErrToolHooks, cfg.NodeID, ToolHooksMiddleware)
	}
	h.env = baseShellEnv(x.RunDir, cfg.Goal, cfg.NodeID)
	return context.WithValue(ctx, stageHooksKey{}, h), nil
}

// toolHookTimeoutAttr checks tool_hooks.timeout: a duration, at most
// MaxToolHookTimeout.
func toolHookTimeoutAttr(attrs map[string]string, key, who string) error {
	v := strings.TrimSpace(attrs[key])
	if v == "" {
		return nil
	}
	d, err := ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", who, key, err)
	}
	if d <= 0 || d > MaxToolHookTimeout {
		return fmt.Errorf("%s: %s=%q is out of range: a hook may take from 1ms to %s", who, key, v, MaxToolHookTimeout)
	}
	return nil
}

// run runs one hook for call, returning "" when it succeeded, else why
// it failed, which it also reports.
func (h *stageHooks) run(ctx context.Context, which, cmd string, call hookCall) string {
	stdin, err := json.Marshal(call)
	if err != nil {
		return h.report(which, call.Tool, fmt.Sprintf("could not be given the call: %v", err), "")
	}
	hctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	env := append(slices.Clone(h.env), "MORPH_TOOL_NAME="+envValue(call.Tool), "MORPH_TOOL_CALL_ID="+envValue(call.CallID),
		"MORPH_NODE_ID="+envValue(h.node))
	stdout, stderr := &capWriter{max: toolHookOutput}, &capWriter{max: toolHookOutput}
	err = runShellIO(hctx, cmd, env, bytes.NewReader(stdin), stdout, stderr)
	if err == nil {
		return ""
	}
	var ee *exec.ExitError
	why := err.Error()
	switch {
	case ctx.Err() != nil:
		why = "was canceled with its stage"
	case hctx.Err() != nil:
		why = fmt.Sprintf("timed out after %s", h.timeout)
	case errors.As(err, &ee):
		why = fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	return h.report(which, call.Tool, why, stderr.String())
}

// report records a hook's failure: an event, a log line and a line of the
// stage's tool_hooks.log, with the start of its standard error, escaped.
// It returns the message, which is a pre hook's denial reason.
func (h *stageHooks) report(which, tool, why, stderr string) string {
	msg := fmt.Sprintf("tool_hooks.%s of node %s %s for tool %s", which, h.node, why, safetext.Line(tool, 100))
	if which == "pre" {
		msg += ": the call was denied"
	}
	if s := safetext.Line(strings.TrimSpace(stderr), toolHookStderr); s != "" {
		msg += "; stderr: " + s
	}
	x := h.x
	x.Emit(Event{Kind: EventToolHook, NodeID: h.node, Message: msg})
	x.Runner.logger().Warn("tool hook failed", "node", h.node, "hook", which, "message", msg)
	if dir := stageDir(x, h.node); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err == nil {
			_ = appendLine(filepath.Join(dir, toolHooksLog), []byte(time.Now().UTC().Format(time.RFC3339)+" "+msg))
		}
	}
	return msg
}
