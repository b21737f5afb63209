package abi

// Session middleware payloads (ABI v1, additive). Observing hooks
// (on_turn_start, on_action, on_observation, on_final, after_run) answer
// nothing (empty output); mutating hooks (before_run, before_tool_call,
// after_tool_call) answer an output whose zero value changes nothing.
//
// History is sent only to middleware that asks for it (Manifest.History for
// a plugin), so a hook that ignores it costs the same at any conversation
// length.

// Message is one message of a session's history.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Hook names of the session middleware, as in Manifest.Hooks.
const (
	HookOnTurnStart    = "on_turn_start"
	HookOnAction       = "on_action"
	HookOnObservation  = "on_observation"
	HookOnFinal        = "on_final"
	HookBeforeRun      = "before_run"
	HookAfterRun       = "after_run"
	HookBeforeToolCall = "before_tool_call"
	HookAfterToolCall  = "after_tool_call"
)

// MiddlewareExports maps each middleware hook's name to its export (from
// Hooks).
var MiddlewareExports = exportsOf(Middleware)

// Turn statuses, as in TurnEnd.Status and AfterRunInput.Status.
const (
	StatusFinal    = "final"        // the model answered with a final
	StatusForced   = "forced_final" // the forced conclusion gave the final
	StatusFallback = "fallback"     // the fallback final was used
	StatusError    = "error"        // the turn failed (model error, rejected parameters, a fail-closed before_run)
	StatusCanceled = "canceled"     // the context ended the turn
)

// TurnStart: a turn's input was recorded.
type TurnStart struct {
	SessionID string    `json:"session_id"`
	Turn      int       `json:"turn"`
	Input     string    `json:"input"`
	History   []Message `json:"history,omitempty"` // before this turn's input; only when asked for
}

// Action: the model asked for a tool; it has not run yet.
type Action struct {
	SessionID string         `json:"session_id"`
	Turn      int            `json:"turn"`
	Step      int            `json:"step"`
	Tool      string         `json:"tool"`
	Thought   string         `json:"thought,omitempty"`
	Input     map[string]any `json:"input"`
	History   []Message      `json:"history,omitempty"`
}

// Observation: a tool's result was written back to the conversation.
type Observation struct {
	SessionID   string    `json:"session_id"`
	Turn        int       `json:"turn"`
	Step        int       `json:"step"`
	Tool        string    `json:"tool"`
	Observation string    `json:"observation"`
	IsError     bool      `json:"is_error,omitempty"`
	History     []Message `json:"history,omitempty"`
}

// TurnEnd: a turn ended, on whichever path; sent exactly once per turn.
type TurnEnd struct {
	SessionID string `json:"session_id"`
	Turn      int    `json:"turn"`
	Step      int    `json:"step"`            // steps taken in the turn
	Final     string `json:"final,omitempty"` // the final payload as JSON text; empty when the turn failed
	Status    string `json:"status"`          // one of the Status* constants
	Error     string `json:"error,omitempty"` // why the turn failed
	StepUsage Usage  `json:"step_usage"`      // the last model call's usage
	TurnUsage Usage  `json:"turn_usage"`      // the whole turn's usage
}

// BeforeRunInput: a turn is about to call the model for the first time.
type BeforeRunInput struct {
	SessionID    string   `json:"session_id"`
	Turn         int      `json:"turn"`
	SystemPrompt string   `json:"system_prompt"`
	Tools        []string `json:"tools"` // names of the tools offered
	Model        string   `json:"model,omitempty"`
}

// BeforeRunOutput may replace the system prompt and narrow the tool set.
type BeforeRunOutput struct {
	SystemPrompt string   `json:"system_prompt,omitempty"` // empty: unchanged
	Tools        []string `json:"tools,omitempty"`         // a subset of the input's tools; absent: unchanged
}

// BeforeToolCallInput: a tool is about to run with Input.
type BeforeToolCallInput struct {
	SessionID string         `json:"session_id"`
	Turn      int            `json:"turn"`
	Step      int            `json:"step"`
	Tool      string         `json:"tool"`
	Input     map[string]any `json:"input"`
}

// BeforeToolCallOutput may rewrite the input or deny the call; the reason
// of a denial is what the model sees as the observation.
type BeforeToolCallOutput struct {
	Input  map[string]any `json:"input,omitempty"` // absent: unchanged
	Deny   bool           `json:"deny,omitempty"`
	Reason string         `json:"reason,omitempty"`
}

// AfterToolCallInput: a tool returned Output (or failed, IsError).
type AfterToolCallInput struct {
	SessionID string         `json:"session_id"`
	Turn      int            `json:"turn"`
	Step      int            `json:"step"`
	Tool      string         `json:"tool"`
	Input     map[string]any `json:"input"`
	Output    string         `json:"output"`
	IsError   bool           `json:"is_error,omitempty"`
}

// AfterToolCallOutput may rewrite the output (redaction, say).
type AfterToolCallOutput struct {
	Output *string `json:"output,omitempty"` // absent: unchanged
}

// AfterRunInput: a turn ended (read-only); sent after on_final.
type AfterRunInput struct {
	SessionID string `json:"session_id"`
	Turn      int    `json:"turn"`
	Final     *Final `json:"final,omitempty"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	Usage     Usage  `json:"usage"`
	Steps     int    `json:"steps"`
}

// ExportInstanceReplaced is an optional export, not listed in the manifest
// (SPEC section 10.6), of a plugin in session isolation: InstanceReplaced ->
// empty. The host calls it on a fresh instance before the first call it
// makes there for a session whose earlier instance is gone while the
// session went on, so that the plugin knows its state of the session was
// lost (a counter restarted, a buffer emptied) rather than finding out by
// surprise. A plugin without it is not told; the host still warns and
// counts (SPEC section 10.6). A host that predates it never calls it.
const ExportInstanceReplaced = "morph_instance_replaced"

// InstanceReplaced is the input of morph_instance_replaced.
type InstanceReplaced struct {
	SessionID string `json:"session_id"`
	// Reason is why the session's earlier instance is gone: ReplacedIdle,
	// ReplacedDiscarded or ReplacedMoved.
	Reason string `json:"reason"`
}

// Reasons of InstanceReplaced.Reason.
const (
	// ReplacedIdle: the session made no call for the plugin's session_idle,
	// and its instance was released; then it called again.
	ReplacedIdle = "idle_expired"
	// ReplacedDiscarded: the session's instance was discarded after a trap,
	// a timeout or bad output (section 6).
	ReplacedDiscarded = "discarded"
	// ReplacedMoved: the session's earlier calls of the plugin were served
	// by another process (a Temporal worker that served its earlier turns,
	// or this worker before it restarted), whose instance this host does
	// not have.
	ReplacedMoved = "moved"
)
