// Package durable holds what morph and morph-temporal (package temporal's
// program) exchange about a durable turn or pipeline: its progress and its
// result, as `morph-temporal run` and `morph-temporal pipeline` write them,
// one JSON object a line, and a human gate's answers. Package temporal
// gives them their public names.
package durable

import (
	"encoding/json"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
	"github.com/morphhost/morph/pipeline"
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

// PipelineLine is one line of `morph-temporal pipeline run` and `pipeline
// resume`: the workflow's id first, then the run's events and its human
// gates' questions as they come, then its result; or, for a pipeline that
// does not validate, its diagnostics and Error.
type PipelineLine struct {
	Workflow    string                `json:",omitempty"`
	Event       *pipeline.Event       `json:",omitempty"`
	Question    *pipeline.Question    `json:",omitempty"`
	Result      *pipeline.Result      `json:",omitempty"`
	Diagnostics []pipeline.Diagnostic `json:",omitempty"`
	Error       string                `json:",omitempty"`
}

// Answer answers the question of the human gate at Node, as
// pipeline.Answer does: Value (yes, no, skipped, timeout or a choice's
// key), Choice (one of its choices: its key, label or target) and Text (a
// freeform answer). `morph-temporal pipeline` reads them on standard
// input, one a line, and sends them to the workflow. Value is omitted
// when empty, so the answers of older workflows' histories decode the
// same.
type Answer struct {
	Node   string
	Value  string `json:",omitempty"`
	Choice string
	Text   string `json:",omitempty"`
}
