package pipeline

import (
	"errors"
	"fmt"
	"strings"

	"github.com/morphhost/morph/abi"
)

// StageStatus is how a stage ended. The strings are lowercase everywhere:
// in outcomes, checkpoints, conditions and the JSON summary.
type StageStatus string

// Stage statuses: the ABI's (abi.StageSuccess...), which a WebAssembly stage
// handler answers, typed.
const (
	StatusSuccess        StageStatus = abi.StageSuccess
	StatusFail           StageStatus = abi.StageFail
	StatusPartialSuccess StageStatus = abi.StagePartialSuccess
	StatusRetry          StageStatus = abi.StageRetry
	StatusSkipped        StageStatus = abi.StageSkipped
)

// ParseStatus reads a status case-insensitively ("SUCCESS", "Fail"); "ok"
// and "pass" are success, "failure" and "error" fail.
func ParseStatus(s string) (StageStatus, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "success", "ok", "pass", "passed", "succeeded":
		return StatusSuccess, nil
	case "fail", "failed", "failure", "error":
		return StatusFail, nil
	case "partial_success", "partial":
		return StatusPartialSuccess, nil
	case "retry":
		return StatusRetry, nil
	case "skipped", "skip":
		return StatusSkipped, nil
	}
	return "", fmt.Errorf("unknown stage status %q: want success, fail, partial_success, retry or skipped", s)
}

// MaxStatusBytes bounds a custom status name.
const MaxStatusBytes = 64

// ParseStageStatus reads a status as ParseStatus does, and also accepts a
// custom one: the attractor specification's conditions take any literal
// (10.2) and a stage's status is what its handler reports, so published
// pipelines route on outcome=needs_dod or outcome=disagree. A custom
// status is lowercased and must look like a name, [a-z_][a-z0-9_.:-]*
// (the specification's BareLiteral), at most MaxStatusBytes long. It is
// neither a success (goal gates stay unsatisfied) nor a FAIL: routing
// takes the edge whose condition names it, else the unconditional edges.
func ParseStageStatus(s string) (StageStatus, error) {
	if st, err := ParseStatus(s); err == nil {
		return st, nil
	}
	name := strings.ToLower(strings.TrimSpace(s))
	if name == "" || len(name) > MaxStatusBytes || !isStatusName(name) {
		return "", fmt.Errorf("bad stage status %q: want success, fail, partial_success, retry, skipped "+
			"or a custom name of letters, digits and _ . : - (at most %d bytes, not starting with a digit)", s, MaxStatusBytes)
	}
	return StageStatus(name), nil
}

func isStatusName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case (c >= '0' && c <= '9') || c == '.' || c == ':' || c == '-':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Standard reports whether s is one of the five statuses of the
// specification (or an alias ParseStatus knows).
func (s StageStatus) Standard() bool {
	_, err := ParseStatus(string(s))
	return err == nil
}

// Succeeded reports whether s counts as done for goal gates and join
// policies: success or partial_success.
func (s StageStatus) Succeeded() bool { return s == StatusSuccess || s == StatusPartialSuccess }

// Outcome is what a stage handler reports: its status, routing hints for
// the next edge, and what to write into the run's context.
type Outcome struct {
	Status StageStatus `json:"status"`
	// PreferredLabel picks the unconditional edge of that label (see
	// SelectEdge).
	PreferredLabel string `json:"preferred_label,omitempty"`
	// SuggestedNextIDs pick the first unconditional edge to one of them.
	SuggestedNextIDs []string `json:"suggested_next_ids,omitempty"`
	// ContextUpdates are set in the run's context after the stage. Values
	// must marshal as JSON: they are checkpointed.
	ContextUpdates map[string]any `json:"context_updates,omitempty"`
	Notes          string         `json:"notes,omitempty"`
	FailureReason  string         `json:"failure_reason,omitempty"`
	// JumpTo, if set, is the next node whatever the edges say: the
	// parallel handler sends the run on to its fan-in node this way.
	JumpTo string `json:"jump_to,omitempty"`
	// Usage is what the stage spent on models, counted against the run's
	// budgets.
	Usage Usage `json:"usage,omitzero"`
}

// Usage is tokens and cost spent by a stage.
type Usage struct {
	InputTokens  int     `json:"input_tokens,omitempty"`
	OutputTokens int     `json:"output_tokens,omitempty"`
	TotalTokens  int     `json:"total_tokens,omitempty"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
	// CostUnknown says some call was of a model without a price in
	// [llm.pricing]: CostUSD counts it as 0, so the cost is a lower bound
	// and a cost budget cannot hold it (the run warns once).
	CostUnknown bool `json:"cost_unknown,omitempty"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.TotalTokens += o.TotalTokens
	u.CostUSD += o.CostUSD
	u.CostUnknown = u.CostUnknown || o.CostUnknown
}

// ErrTransient marks a handler's error as worth another attempt (a
// rate limit, a dropped connection): a handler, tool or stage plugin wraps
// it (fmt.Errorf("...: %w", ErrTransient)) and the runner retries the node
// within its max_retries, with the RETRY backoff (spec 3.5's
// should_retry). Any other error, a node timeout, and a FAIL outcome are
// final: a FAIL is the stage's verdict, and running it again would spend
// the same tokens on the same verdict (see "Where the spec disagrees with
// itself" in the package documentation).
var ErrTransient = errors.New("transient error")

// Fail is a FAIL outcome with a reason.
func Fail(format string, args ...any) *Outcome {
	return &Outcome{Status: StatusFail, FailureReason: fmt.Sprintf(format, args...)}
}

// Success is a SUCCESS outcome.
func Success() *Outcome { return &Outcome{Status: StatusSuccess} }
