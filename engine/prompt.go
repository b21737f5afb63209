package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/morphhost/morph/abi"
)

// DefaultIdentity opens the default system prompt.
const DefaultIdentity = "You are morph, a careful agent that solves the user's task step by step, using the tools below when they help."

// DefaultRules close the default system prompt.
var DefaultRules = []string{
	"Reply with exactly one JSON object per turn, and nothing else.",
	"Call only the tools listed above, with parameters that satisfy their schema.",
	"Use a tool result before calling the same tool again with the same parameters.",
	"When you know the answer, reply with a final; do not guess when a tool can tell you.",
}

// responseFormat documents the protocol for the model, one example per type.
const responseFormat = `## Response format
Answer with one JSON object of one of these types:
{"type":"tool_call","tool_call":{"thought":"why this tool","tool_name":"<tool>","tool_params":{}}}
{"type":"plan","plan":{"thought":"","summary":"","steps":[{"step":"first step","status":"in_progress"}],"risks":[],"questions":[],"completion":""}}
{"type":"final","final":{"thought":"brief reasoning","output":"the answer (any JSON value)"}}`

// DefaultPrompt is the engine's system prompt: identity, tools with their
// parameter schemas, the response format, and the rules.
func DefaultPrompt(identity string, rules []string, tools []abi.ToolSpec) string {
	var b strings.Builder
	b.WriteString(identity)
	b.WriteString("\n\n## Tools\n")
	if len(tools) == 0 {
		b.WriteString("(none: answer from what you know)\n")
	}
	for _, t := range tools {
		fmt.Fprintf(&b, "- %s: %s\n  parameters (JSON Schema): %s\n", t.Name, t.Description, strings.TrimSpace(string(t.Parameters)))
	}
	b.WriteString("\n")
	b.WriteString(responseFormat)
	b.WriteString("\n\n## Rules\n")
	for _, r := range rules {
		fmt.Fprintf(&b, "- %s\n", r)
	}
	return b.String()
}

// systemPrompt asks the prompt builder, falling back to the default prompt.
func (e *Engine) systemPrompt(r *run, task string) string {
	in := abi.PromptInput{Task: task, Tools: e.reg.Specs()}
	if r.allowed != nil {
		in.Tools = slices.DeleteFunc(in.Tools, func(t abi.ToolSpec) bool { return !r.allowed[t.Name] })
	}
	in.DefaultPrompt = DefaultPrompt(e.identity, e.rules, in.Tools)
	if e.promptHook == nil {
		return in.DefaultPrompt
	}
	var out abi.PromptOutput
	err := e.engineHook(r, "build_prompt", func() (err error) {
		out, err = e.promptHook.BuildPrompt(r.ctx, in)
		return err
	})
	if err == nil && strings.TrimSpace(out.SystemPrompt) == "" {
		err = fmt.Errorf("build_prompt hook returned an empty system prompt")
	}
	if err != nil {
		e.emit(r.ctx, r.Context, Event{Kind: EventWarning, Err: err, Message: "build_prompt hook failed; using the default system prompt"})
		return in.DefaultPrompt
	}
	return out.SystemPrompt
}

// parameters merges the params builder's output over the run's base
// Parameters, falling back to the base alone.
func (e *Engine) parameters(r *run, task string) map[string]any {
	params := maps.Clone(r.opts.Parameters)
	if e.paramsHook == nil {
		return params
	}
	in := abi.ParamsInput{Task: task, Options: r.opts}
	in.Options.Parameters = maps.Clone(params) // the hook must not alter the caller's map
	var out abi.ParamsOutput
	err := e.engineHook(r, "build_params", func() (err error) {
		out, err = e.paramsHook.BuildParams(r.ctx, in)
		return err
	})
	if err != nil {
		e.emit(r.ctx, r.Context, Event{Kind: EventWarning, Err: err, Message: "build_params hook failed; using the base parameters"})
		return params
	}
	if params == nil && len(out.Parameters) > 0 {
		params = make(map[string]any, len(out.Parameters))
	}
	maps.Copy(params, out.Parameters)
	return params
}
