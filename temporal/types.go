package temporal

import (
	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/durable"
	"github.com/morphhost/morph/llm"
)

// TurnInput is one turn of a session, as TurnWorkflow takes it.
type TurnInput struct {
	SessionID string
	Task      string
	History   []llm.Message // the session's earlier turns: each input and final
	Options   RunOptions
}

// RunOptions are the engine.RunOptions a workflow can carry (no callbacks).
type RunOptions struct {
	Model        string
	MaxSteps     int
	ParseRetries int
	TokenBudget  int
	Tools        []string
}

// RunOptionsOf is what of o a workflow carries.
func RunOptionsOf(o engine.RunOptions) RunOptions {
	return RunOptions{Model: o.Model, MaxSteps: o.MaxSteps, ParseRetries: o.ParseRetries, TokenBudget: o.TokenBudget, Tools: o.Tools}
}

func (o RunOptions) engine() engine.RunOptions {
	return engine.RunOptions{Model: o.Model, MaxSteps: o.MaxSteps, ParseRetries: o.ParseRetries, TokenBudget: o.TokenBudget, Tools: o.Tools}
}

// TurnResult is what a turn ends with: its final (nil when the run failed,
// Error then saying why), its steps and metrics, as engine.Context has them.
type TurnResult = durable.TurnResult

// Progress is a step a turn has taken, as QueryProgress answers them.
type Progress = durable.Progress

// Setup is what a worker tells a workflow of the engine it would run
// locally: its tools, its engine hooks and middleware, its settings.
type Setup struct {
	Tools               []abi.ToolSpec
	Hooks               []string // the engine hooks set: abi.HookBuildPrompt, ...
	Middleware          []MiddlewareSpec
	Identity            string
	Rules               []string
	MaxObservationBytes int
	MaxJSONDepth        int
	Images              bool
	// StageHandlers are the pipeline handler types of the plugins that
	// implement handle_stage ("wasm:<plugin>").
	StageHandlers []string
	// Timeouts are the activities' timeouts, as the worker's limits bound
	// their calls.
	Timeouts Timeouts
	// ToolPlugins and HookPlugins name the plugin that serves each tool
	// (by name) and engine hook (by abi name), as the workflow numbers a
	// session's calls of each plugin (CallSession.Calls); the host's tools
	// and hooks have none.
	ToolPlugins map[string]string `json:",omitempty"`
	HookPlugins map[string]string `json:",omitempty"`
}

// ChatRequest is llm.Request without its streaming callback, and the
// call's number.
type ChatRequest struct {
	Model          string
	Messages       []llm.Message
	ForceJSON      bool
	Parameters     map[string]any
	ResponseSchema *llm.JSONSchema
	// Call counts the workflow's model calls before this one (a session's
	// and a pipeline's across their continues-as-new), the same on every
	// attempt and replay: a scripted model answers its reply Call
	// (scripted.WithReplyIndex), whichever worker makes the call.
	Call int
}

// ToolCall is one call of a tool.
type ToolCall struct {
	Tool   string
	Params map[string]any
	// Session is the session the call is made for, which the worker serves
	// it as.
	Session CallSession
}

// ToolResult is a tool's answer: its output and images, or its error's
// text (the tool's failure is an answer the model reads, not the
// activity's failure).
type ToolResult struct {
	Output string
	Images []abi.Image
	Error  string
}
