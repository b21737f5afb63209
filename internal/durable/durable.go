// Package durable holds what morph and morph-temporal (package temporal's
// program) exchange about a durable turn: its progress and its result, as
// `morph-temporal run` writes them, one JSON object a line. Package temporal
// gives them their public names.
package durable

import (
	"encoding/json"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
)

// Progress is a step a turn has taken.
type Progress struct {
	Step   int
	Action string // a tool's name, "plan", "final" or "parse_error"
	Usage  llm.Usage
}

// TurnResult is what a turn ends with: its final (nil when the run failed,
// Error then saying why), its steps and metrics, as engine.Context has them.
type TurnResult struct {
	Final        *engine.Final
	RawFinal     json.RawMessage
	StopReason   string
	Steps        []engine.Step
	Metrics      engine.Metrics
	SystemPrompt string
	Error        string
}

// Line is one line of `morph-temporal run`'s output: a step, or the result.
type Line struct {
	Progress *Progress   `json:",omitempty"`
	Result   *TurnResult `json:",omitempty"`
}
