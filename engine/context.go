package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/llm"
)

// Final is an agent's final answer. It is the engine's own type, not the
// wire's: the model's reply is parsed into it, and hooks are told it, or
// answer it, as abi.Final (see wire.go), so a field the engine adds is no
// change of the plugin ABI. The JSON names are those of the model's reply.
type Final struct {
	Thought string `json:"thought"`
	Output  any    `json:"output"`
	Plan    *Plan  `json:"plan,omitempty"`
}

// Plan is the agent's plan as the model last stated it; like Final, the
// engine's own type, told to hooks as abi.Plan.
type Plan struct {
	Thought    string     `json:"thought,omitempty"`
	Summary    string     `json:"summary,omitempty"`
	Steps      []PlanStep `json:"steps"`
	Risks      []string   `json:"risks,omitempty"`
	Questions  []string   `json:"questions,omitempty"`
	Completion string     `json:"completion,omitempty"`
}

// PlanStep is one step of a Plan. It is the wire type itself: a leaf value
// whose two forms (an object, or a bare string that means a pending step)
// the engine must read the same way in a model's reply and in a plugin's
// final, so its decoding lives once, in abi.
type PlanStep = abi.PlanStep

// RunOptions are the per-run settings; zero fields take the engine
// defaults. They are the engine's own type, not the wire's: a params
// builder receives the settings a plugin may see as abi.RunOptions (see
// wire), and settings that only make sense in the host's process need no
// place in the ABI.
type RunOptions struct {
	Model        string
	MaxSteps     int            // 0: DefaultMaxSteps
	ParseRetries int            // 0: DefaultParseRetries; <0: none
	TokenBudget  int            // 0: unlimited
	Parameters   map[string]any // base model parameters; a params builder's output overrides them key by key
	// Identity, if set, opens this run's system prompt in place of the
	// engine's (WithIdentity): a pipeline stage sets its own role without
	// an engine of its own. The engine still adds the run's tools, the
	// response format and the rules, which the protocol needs. It is the
	// caller's explicit choice for this run, so the engine's build_prompt
	// hook is not called; before_run middleware see the prompt and may
	// still change it, as they may any.
	Identity string
	// Tools, if not nil, are the names of the only tools this run offers:
	// the prompt lists only them, before_run middleware may narrow them
	// further, and a call of another tool gets an observation that it is
	// not available in this run. Empty but not nil: no tools. A name the
	// registry does not have fails the run before any model call
	// (ErrUnknownTool, StopBadOptions).
	Tools []string
	// Mode, if set, is this run's mode in place of the engine's (see
	// Engine.SetMode): a planning run beside others that act. Another
	// value than ModeNormal or ModePlan fails the run before any model
	// call (a *ConfigValueError, StopBadOptions).
	Mode Mode
	// OnEvent, if set, receives this run's events, after the engine's
	// handler (WithEventHandler) does: a caller running several runs on
	// one engine at once hears each one's apart. It is called on the run's
	// goroutine, so it must be quick.
	OnEvent func(Event)
}

// Engine defaults for zero RunOptions fields.
const (
	DefaultMaxSteps     = 15
	DefaultParseRetries = 2
)

// DefaultMaxObservationBytes caps each tool observation the model is given,
// and each message and error text of an event.
const DefaultMaxObservationBytes = 64 << 10

// DefaultFinalOutput is the output of the final the engine gives when the
// forced conclusion fails and no fallback hook answers.
const DefaultFinalOutput = "insufficient_evidence"

// Metrics account a run's model calls, tools and time. Its JSON
// (MarshalJSON) has the names and units of the "metrics" object "morph run"
// prints: the tags give the names; durations are whole milliseconds.
type Metrics struct {
	LLMRounds    int           `json:"llm_rounds"`
	InputTokens  int           `json:"input_tokens"`
	OutputTokens int           `json:"output_tokens"`
	TotalTokens  int           `json:"total_tokens"`
	ToolCalls    int           `json:"tool_calls"`
	ParseRetries int           `json:"parse_retries"`
	TotalCost    float64       `json:"cost_usd"` // USD
	LLMTime      time.Duration `json:"llm_time_ms"`
	StartTime    time.Time     `json:"start_time,omitempty"`
	Elapsed      time.Duration `json:"elapsed_ms"`

	// UsageEstimated says some call's token counts (and so cost) were
	// estimated by the client, the server having reported none
	// (llm.Result.UsageEstimated).
	UsageEstimated bool `json:"usage_estimated,omitempty"`
	// CostUnknown says some call was of a model the client has no price
	// for (llm.Usage.CostUnknown): TotalCost counts it as 0, so the run
	// cost more than TotalCost says.
	CostUnknown bool `json:"cost_unknown,omitempty"`
}

// Usage returns the metrics' token and cost totals as a Usage.
func (m Metrics) Usage() llm.Usage {
	return llm.Usage{InputTokens: m.InputTokens, OutputTokens: m.OutputTokens, TotalTokens: m.TotalTokens, Cost: m.TotalCost,
		CostUnknown: m.CostUnknown}
}

// Step records one model reply and what the engine did with it.
type Step struct {
	StepNumber  int            `json:"step"`
	Thought     string         `json:"thought,omitempty"`
	Action      string         `json:"action"` // a tool name, "plan", "final" or "parse_error"
	ActionInput map[string]any `json:"action_input,omitempty"`
	Observation string         `json:"observation,omitempty"`
	Error       string         `json:"error,omitempty"`
	// Truncated says the tool's output or error was cut to the engine's
	// observation limit (WithMaxObservationBytes) for the model and here.
	Truncated bool          `json:"truncated,omitempty"`
	Usage     llm.Usage     `json:"usage"`
	Duration  time.Duration `json:"duration_ns"`
	// Reply is, for a parse_error step, the model's reply that did not
	// parse, as one line (control characters, line breaks and invalid
	// UTF-8 escaped) cut to the observation limit: what the model said,
	// for the person reading why the step failed. Empty for other steps,
	// whose replies the other fields hold.
	Reply string `json:"reply,omitempty"`
}

// Stop reasons recorded in Context.StopReason.
const (
	StopFinal       = "final"            // the model answered with a final
	StopForced      = "forced_final"     // the forced conclusion produced a final
	StopFallback    = "fallback"         // the forced conclusion failed; the fallback final was used
	StopCanceled    = "canceled"         // the context ended the run
	StopModelFailed = "model_error"      // a model call failed outside the forced conclusion
	StopBadParams   = "parameters_error" // the model parameters were rejected before the first call
	StopBadOptions  = "options_error"    // RunOptions.Tools names a tool the engine does not have, or RunOptions.Mode no mode
	StopMiddleware  = "middleware_error" // a fail-closed before_run hook failed
	StopInit        = "init_error"       // the engine could not be initialized, or is closed (or the session is)
)

// Context is the state of one run. The engine owns it while the run is in
// progress; hooks may read it (see RunContext) but must not keep it.
type Context struct {
	SessionID    string         `json:"session_id"`
	Turn         int            `json:"turn"` // 1 for the first turn of a session
	Task         string         `json:"task"` // the turn's input
	SystemPrompt string         `json:"system_prompt"`
	Parameters   map[string]any `json:"parameters,omitempty"` // sent with every chat request of the run
	Messages     []llm.Message  `json:"messages"`
	Steps        []Step         `json:"steps"`
	Plan         *Plan          `json:"plan,omitempty"`
	Metrics      Metrics        `json:"metrics"`
	StopReason   string         `json:"stop_reason"`
	// RawFinalAnswer holds the final payload's bytes as the model sent them,
	// or the marshalled fallback final: it is set on every path that returns a final.
	RawFinalAnswer json.RawMessage `json:"raw_final_answer,omitempty"`
}

// AddUsage accounts one model call: one round, its tokens, its cost (and
// whether it is unknown) and its duration. A call that reports no total
// counts input+output.
func (c *Context) AddUsage(u llm.Usage, d time.Duration) {
	sum := c.Metrics.Usage().Add(u)
	c.Metrics.InputTokens, c.Metrics.OutputTokens, c.Metrics.TotalTokens, c.Metrics.TotalCost, c.Metrics.CostUnknown =
		sum.InputTokens, sum.OutputTokens, sum.TotalTokens, sum.Cost, sum.CostUnknown
	c.Metrics.LLMRounds++
	c.Metrics.LLMTime += d
}

type runContextKey struct{}

// RunContext returns the run Context that ctx belongs to, or nil. The engine
// attaches it to the context it passes to hooks and tools.
func RunContext(ctx context.Context) *Context {
	if r, _ := ctx.Value(runContextKey{}).(*run); r != nil {
		return r.Context
	}
	return nil
}

// WithSession is ctx as the context of a call made for turn of session
// id, for a host that serves a run's hooks and tools outside the run (a
// Temporal worker serving a workflow's engine): RunContext(ctx) answers a
// Context with SessionID and Turn set and nothing else of the run, so that
// what keys state by session (a plugin in session isolation) serves the
// call as that session's. Warn on it returns false: there is no run to
// report to, and the caller logs.
func WithSession(ctx context.Context, id string, turn int) context.Context {
	return context.WithValue(ctx, runContextKey{}, &run{Context: &Context{SessionID: id, Turn: turn}})
}

// newRun is a run of e with context rc, whose ctx carries it (RunContext,
// Warn).
func (e *Engine) newRun(ctx context.Context, rc *Context, opts RunOptions) *run {
	r := &run{Context: rc, e: e, opts: withDefaults(opts)}
	r.ctx = context.WithValue(ctx, runContextKey{}, r)
	return r
}

// Warn reports message as an EventWarning of the run ctx belongs to, from
// plugin (its name, in Event.Plugin): how code that serves a hook or a tool
// (package host, for a plugin whose session lost its instance) tells the
// run's observers of something they must hear of. The engine logs it as it
// logs its own warnings. Call it while the hook or tool runs, on its
// goroutine, as the engine's own events are emitted. It returns false, and
// does nothing, when ctx belongs to no run (or is WithSession's): the
// caller logs it itself.
func Warn(ctx context.Context, plugin, message string) bool {
	r, _ := ctx.Value(runContextKey{}).(*run)
	if r == nil || r.e == nil { // no run, or WithSession's
		return false
	}
	r.e.emit(ctx, r, Event{Kind: EventWarning, Plugin: plugin, Message: message})
	return true
}
