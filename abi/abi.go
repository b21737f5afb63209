// Package abi is morph's contract with its extensions: the wire types of every
// hook payload and tool call, shared by the engine, the WebAssembly host and
// the guest PDKs.
//
// It imports only the standard library and must build for GOOS=wasip1 and
// TinyGo, because guest code reuses these types. Each wire type is defined
// here once; other packages alias or embed it rather than copying it.
//
// Compatibility: within one ABI version fields are only ever added, and
// decoders ignore fields they do not know, so an older guest keeps working
// with a newer host and the other way round.
package abi

import "encoding/json"

// Usage is the token and cost account of one model call or of a whole run.
type Usage struct {
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	TotalTokens  int     `json:"total_tokens"`
	Cost         float64 `json:"cost"` // USD
	// CostUnknown says a call was of a model the host has no price for:
	// Cost counts it as 0, so the real cost is higher than Cost. Absent
	// when false.
	CostUnknown bool `json:"cost_unknown,omitempty"`
}

// Add returns the sum of u and v. A side that reports no total counts as
// input+output, so a model that omits totals still adds up; the sum's cost
// is unknown when either side's is.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:  u.InputTokens + v.InputTokens,
		OutputTokens: u.OutputTokens + v.OutputTokens,
		TotalTokens:  u.Total() + v.Total(),
		Cost:         u.Cost + v.Cost,
		CostUnknown:  u.CostUnknown || v.CostUnknown,
	}
}

// Total is TotalTokens, or input+output when the model reported no total.
func (u Usage) Total() int {
	if u.TotalTokens == 0 {
		return u.InputTokens + u.OutputTokens
	}
	return u.TotalTokens
}

// ToolSpec describes a tool to the model and to prompt builders.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema of the tool's params object
}

// RunOptions are the per-run settings a caller passes to the engine; params
// builders receive them to decide the model parameters of the run.
type RunOptions struct {
	Model        string         `json:"model,omitempty"`
	MaxSteps     int            `json:"max_steps,omitempty"`     // 0: the engine default (15)
	ParseRetries int            `json:"parse_retries,omitempty"` // 0: the engine default (2); <0: none
	TokenBudget  int            `json:"token_budget,omitempty"`  // 0: unlimited
	Parameters   map[string]any `json:"parameters,omitempty"`    // base model parameters; a params builder's output overrides them key by key
}

// Final is an agent's final answer.
type Final struct {
	Thought string `json:"thought"`
	Output  any    `json:"output"`
	Plan    *Plan  `json:"plan,omitempty"`
}

// Plan is the agent's current plan, as the model last stated it.
type Plan struct {
	Thought    string     `json:"thought,omitempty"`
	Summary    string     `json:"summary,omitempty"`
	Steps      []PlanStep `json:"steps"`
	Risks      []string   `json:"risks,omitempty"`
	Questions  []string   `json:"questions,omitempty"`
	Completion string     `json:"completion,omitempty"`
}

// Plan step statuses.
const (
	StepPending    = "pending"
	StepInProgress = "in_progress"
	StepCompleted  = "completed"
)

// PlanStep is one step of a Plan. On the wire it is either an object
// {"step":"...","status":"..."} or a bare string, which means a pending step.
type PlanStep struct {
	Step   string `json:"step"`
	Status string `json:"status,omitempty"`
}

// UnmarshalJSON accepts both the object and the bare-string form.
func (s *PlanStep) UnmarshalJSON(b []byte) error {
	var text string
	if err := json.Unmarshal(b, &text); err == nil {
		*s = PlanStep{Step: text, Status: StepPending}
		return nil
	}
	type plain PlanStep // no methods: avoids recursion
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.Status == "" {
		p.Status = StepPending
	}
	*s = PlanStep(p)
	return nil
}
