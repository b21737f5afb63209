package engine

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/llm"
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

// systemPrompt asks the prompt builder, falling back to the default
// prompt; a run with its own identity (RunOptions.Identity) gets the
// default prompt under it.
func (e *Engine) systemPrompt(r *run, task string) string {
	in := abi.PromptInput{Task: task, Tools: e.reg.Specs()}
	if r.allowed != nil {
		in.Tools = slices.DeleteFunc(in.Tools, func(t abi.ToolSpec) bool { return !r.allowed[t.Name] })
	}
	identity := cmp.Or(r.opts.Identity, e.identity)
	in.DefaultPrompt = DefaultPrompt(identity, e.rules, in.Tools)
	if e.hookFuncs[abi.HookBuildPrompt] == nil || r.opts.Identity != "" {
		return in.DefaultPrompt
	}
	out, err := callEngineHook[abi.PromptOutput](e, r, abi.HookBuildPrompt, 0, in)
	if err == nil && (out == nil || strings.TrimSpace(out.SystemPrompt) == "") {
		err = fmt.Errorf("build_prompt hook returned an empty system prompt")
	}
	if err != nil {
		e.hookFailed(r, abi.HookBuildPrompt, 0, err, "using the default system prompt")
		return in.DefaultPrompt
	}
	return out.SystemPrompt
}

// parameters are the run's model parameters: the params builder's output
// merged over the base Parameters. Merged parameters the client rejects
// (or nested deeper than WithMaxJSONDepth) fall back to the base ones, with a
// warning naming the hook's plugin and the bad keys: a plugin's mistake
// does not lose the run. Base parameters that fail are the run's error:
// they are the operator's.
func (e *Engine) parameters(r *run, task string) (map[string]any, error) {
	base := maps.Clone(r.opts.Parameters)
	params, built := e.buildParams(r, task, base)
	err := e.checkParameters(params)
	if err == nil || !built {
		return params, err
	}
	if err := e.checkParameters(base); err != nil {
		return nil, err
	}
	owner := e.owner(abi.HookBuildParams)
	e.emit(r.ctx, r, Event{Kind: EventWarning, Plugin: owner, Hook: abi.HookBuildParams, Err: err,
		Message: fmt.Sprintf("the build_params hook of %q returned parameters the model client rejects; using the base parameters", owner)})
	return base, nil
}

// buildParams merges the params builder's output over base; built is
// false when there is no builder or it failed (base is returned).
func (e *Engine) buildParams(r *run, task string, base map[string]any) (params map[string]any, built bool) {
	if e.hookFuncs[abi.HookBuildParams] == nil {
		return base, false
	}
	in := abi.ParamsInput{Task: task, Options: r.opts.wire()} // a deep copy: the hook must not alter the caller's parameters
	out, err := callEngineHook[abi.ParamsOutput](e, r, abi.HookBuildParams, 0, in)
	if err != nil {
		e.hookFailed(r, abi.HookBuildParams, 0, err, "using the base parameters")
		return base, false
	}
	params = maps.Clone(base)
	if out == nil {
		return params, true
	}
	if params == nil && len(out.Parameters) > 0 {
		params = make(map[string]any, len(out.Parameters))
	}
	maps.Copy(params, out.Parameters)
	return params, true
}

// checkParameters asks the client, when it can tell, whether it can send
// params, after refusing params nested deeper than WithMaxJSONDepth (they
// are sent with every request and shown with the run's result).
func (e *Engine) checkParameters(params map[string]any) error {
	_, err := marshalBounded(params, e.maxDepth)
	if err == nil {
		if checker, ok := e.client.(llm.ParameterChecker); ok {
			err = checker.CheckParameters(params)
		}
	}
	if err != nil {
		return fmt.Errorf("engine: model parameters: %w", err)
	}
	return nil
}
