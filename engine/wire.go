package engine

import (
	"slices"

	"github.com/morphhost/morph/abi"
)

// The conversions between the engine's own types and the wire types of
// package abi, which hooks and middleware speak. Each copies deeply: a
// hook given a payload cannot change the caller's result through it, nor
// can a hook that keeps what it answered change a run's result after.

// wire is what a params builder is told of the options.
func (o RunOptions) wire() abi.RunOptions {
	return abi.RunOptions{Model: o.Model, MaxSteps: o.MaxSteps, ParseRetries: o.ParseRetries, TokenBudget: o.TokenBudget, Parameters: cloneParams(o.Parameters)}
}

// optionsOf are the options a params builder was told, as the engine's
// own: what RunOptions.wire keeps of them. Parameters are o's, the copy
// wire made for the call.
func optionsOf(o abi.RunOptions) RunOptions {
	return RunOptions{Model: o.Model, MaxSteps: o.MaxSteps, ParseRetries: o.ParseRetries, TokenBudget: o.TokenBudget, Parameters: o.Parameters}
}

// wire is the final as middleware are told it; nil stays nil.
func (f *Final) wire() *abi.Final {
	if f == nil {
		return nil
	}
	return &abi.Final{Thought: f.Thought, Output: cloneJSON(f.Output), Plan: f.Plan.wire()}
}

// wire is the plan as middleware are told it; nil stays nil.
func (p *Plan) wire() *abi.Plan {
	if p == nil {
		return nil
	}
	return &abi.Plan{Thought: p.Thought, Summary: p.Summary, Steps: slices.Clone(p.Steps),
		Risks: slices.Clone(p.Risks), Questions: slices.Clone(p.Questions), Completion: p.Completion}
}

// finalOf is the engine's final for one a hook answered; nil stays nil.
func finalOf(f *abi.Final) *Final {
	if f == nil {
		return nil
	}
	return &Final{Thought: f.Thought, Output: cloneJSON(f.Output), Plan: planOf(f.Plan)}
}

// planOf is the engine's plan for one a hook answered; nil stays nil.
func planOf(p *abi.Plan) *Plan {
	if p == nil {
		return nil
	}
	return &Plan{Thought: p.Thought, Summary: p.Summary, Steps: slices.Clone(p.Steps),
		Risks: slices.Clone(p.Risks), Questions: slices.Clone(p.Questions), Completion: p.Completion}
}
