// Package engine is morph's agent loop: a JSON tool-calling protocol against a
// chat model (see ParseResponse), a tool registry with schema validation, and
// hook points that embedding hosts or WebAssembly plugins fill in. It knows
// nothing of WebAssembly: package host adapts modules to the hook interfaces.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/llm"
)

// ErrNoClient is returned by Run on an engine built without a model client.
var ErrNoClient = errors.New("engine: no model client")

// Engine runs agents. It is safe for concurrent Runs as long as its hooks,
// tools and client are.
type Engine struct {
	client       llm.Client
	reg          *Registry
	promptHook   PromptBuilder
	paramsHook   ParamsBuilder
	successHook  ToolSuccessHook
	fallbackHook FallbackFinalizer
	identity     string
	rules        []string
	onEvent      func(Event)
	log          *slog.Logger
}

// New returns an engine that talks to client and offers the tools in reg (a
// nil reg is an empty registry). With no option set, every hook point uses
// the engine's default behaviour.
func New(client llm.Client, reg *Registry, opts ...Option) *Engine {
	if reg == nil {
		reg = NewRegistry()
	}
	e := &Engine{client: client, reg: reg, identity: DefaultIdentity, rules: DefaultRules, log: slog.Default()}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Registry returns the engine's tool registry.
func (e *Engine) Registry() *Registry { return e.reg }

// run is the state of one Run that is not part of the public Context.
type run struct {
	*Context
	ctx    context.Context
	opts   RunOptions
	params map[string]any
}

// Run runs the agent on task until it gives a final answer. A returned
// Final always comes with a nil error; the Context is returned in every
// case, with the steps taken so far. Errors: ctx.Err() when the context
// ends the run, a model call that failed (after the client's retries), or
// parameters the client rejects before the first call.
func (e *Engine) Run(ctx context.Context, task string, opts RunOptions) (*Final, *Context, error) {
	rc := &Context{Task: task, Metrics: Metrics{StartTime: time.Now()}}
	defer func() { rc.Metrics.Elapsed = time.Since(rc.Metrics.StartTime) }()
	if e.client == nil {
		return nil, rc, ErrNoClient
	}
	r := &run{Context: rc, ctx: withRunContext(ctx, rc), opts: withDefaults(opts)}
	if err := ctx.Err(); err != nil {
		rc.StopReason = StopCanceled
		return nil, rc, err
	}
	rc.SystemPrompt = e.systemPrompt(r, task)
	r.params = e.parameters(r, task)
	rc.Parameters = r.params
	if checker, ok := e.client.(llm.ParameterChecker); ok {
		if err := checker.CheckParameters(r.params); err != nil {
			rc.StopReason = StopBadParams
			return nil, rc, fmt.Errorf("engine: model parameters: %w", err)
		}
	}
	rc.Messages = []llm.Message{{Role: llm.RoleSystem, Content: rc.SystemPrompt}, {Role: llm.RoleUser, Content: task}}
	return e.loop(r)
}

func withDefaults(o RunOptions) RunOptions {
	if o.MaxSteps <= 0 {
		o.MaxSteps = DefaultMaxSteps
	}
	if o.ParseRetries == 0 {
		o.ParseRetries = DefaultParseRetries
	} else if o.ParseRetries < 0 {
		o.ParseRetries = 0
	}
	return o
}

// loop is the protocol's step loop; it returns through finish, fail or
// forceConclusion.
func (e *Engine) loop(r *run) (*Final, *Context, error) {
	parseFailures := 0
	lastCall, repeats := "", 0
	for step := 1; step <= r.opts.MaxSteps; step++ {
		if err := r.ctx.Err(); err != nil {
			return e.fail(r, StopCanceled, err)
		}
		started := time.Now()
		res, err := e.chat(r)
		if err != nil {
			if ctxErr := r.ctx.Err(); ctxErr != nil {
				return e.fail(r, StopCanceled, ctxErr)
			}
			return e.fail(r, StopModelFailed, fmt.Errorf("engine: step %d: model call: %w", step, err))
		}
		st := Step{StepNumber: step, Usage: res.Usage}
		resp, perr := ParseResponse(res)
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant, Content: res.Text})
		if perr != nil {
			parseFailures++
			r.Metrics.ParseRetries++
			st.Action, st.Error = "parse_error", perr.Error()
			e.record(r, st, started)
			if parseFailures > r.opts.ParseRetries {
				return e.forceConclusion(r, fmt.Sprintf("%d unparseable replies in a row", parseFailures))
			}
			r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Content: correction(perr)})
			continue
		}
		parseFailures = 0
		switch resp.Type {
		case TypeFinal:
			st.Action, st.Thought = "final", resp.Final.Thought
			e.record(r, st, started)
			return e.finish(r, StopFinal, resp.Final, resp.RawFinalAnswer)
		case TypePlan:
			r.Plan = resp.Plan
			st.Action, st.Thought = "plan", resp.Plan.Thought
			r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Content: "Plan received. Proceed."})
			e.record(r, st, started)
		case TypeToolCall:
			call := resp.ToolCall
			st.Action, st.Thought, st.ActionInput = call.ToolName, call.Thought, call.ToolParams
			st.Observation, st.Error = e.callTool(r, step, call)
			r.Metrics.ToolCalls++
			r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser,
				Content: fmt.Sprintf("Tool Result (%s):\n%s", call.ToolName, st.Observation)})
			e.record(r, st, started)
			key := callKey(call)
			if key == lastCall {
				repeats++
			} else {
				lastCall, repeats = key, 1
			}
			if repeats >= 3 {
				return e.forceConclusion(r, fmt.Sprintf("tool %q called with the same parameters 3 times in a row", call.ToolName))
			}
		}
		if b := r.opts.TokenBudget; b > 0 && r.Metrics.TotalTokens > b {
			return e.forceConclusion(r, fmt.Sprintf("token budget exceeded (%d > %d)", r.Metrics.TotalTokens, b))
		}
	}
	return e.forceConclusion(r, fmt.Sprintf("reached max steps (%d)", r.opts.MaxSteps))
}

// ForceConclusionPrompt is the message that asks the model for its final answer.
const ForceConclusionPrompt = "You have reached the maximum number of steps or token budget. Provide your final output NOW as a JSON final response."

// forceConclusion asks once for a final; whatever goes wrong then, the run
// still ends with a final (the fallback), unless the context ended it.
func (e *Engine) forceConclusion(r *run, why string) (*Final, *Context, error) {
	e.emit(r.ctx, r.Context, Event{Kind: EventWarning, Step: len(r.Steps), Message: "forcing a conclusion: " + why})
	r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Content: ForceConclusionPrompt})
	res, err := e.chat(r)
	if err != nil {
		if ctxErr := r.ctx.Err(); ctxErr != nil {
			return e.fail(r, StopCanceled, ctxErr)
		}
		return e.fallback(r, fmt.Sprintf("%s; the forced conclusion's model call failed: %v", why, err))
	}
	r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant, Content: res.Text})
	resp, perr := ParseResponse(res)
	switch {
	case perr != nil:
		return e.fallback(r, fmt.Sprintf("%s; the forced conclusion did not parse: %v", why, perr))
	case resp.Type != TypeFinal:
		return e.fallback(r, fmt.Sprintf("%s; the forced conclusion was a %s, not a final", why, resp.Type))
	}
	return e.finish(r, StopForced, resp.Final, resp.RawFinalAnswer)
}

func (e *Engine) fallback(r *run, why string) (*Final, *Context, error) {
	var final *Final
	if e.fallbackHook != nil {
		in := abi.FallbackInput{Task: r.Task, Reason: why, Steps: len(r.Steps), Usage: r.Metrics.Usage()}
		err := callHook("fallback_final", func() (err error) {
			final, err = e.fallbackHook.FallbackFinal(r.ctx, in)
			return err
		})
		if err == nil && final == nil {
			err = errors.New("fallback_final hook returned no final")
		}
		if err != nil {
			final = nil
			e.emit(r.ctx, r.Context, Event{Kind: EventWarning, Step: len(r.Steps), Err: err,
				Message: "fallback_final hook failed; using the default final"})
		}
	}
	if final == nil {
		final = &Final{Output: DefaultFinalOutput}
	}
	e.emit(r.ctx, r.Context, Event{Kind: EventWarning, Step: len(r.Steps), Message: "using the fallback final: " + why})
	raw, err := json.Marshal(final)
	if err != nil { // an Output that cannot be marshalled: keep the run, say so
		raw, _ = json.Marshal(&Final{Thought: final.Thought, Output: fmt.Sprint(final.Output)})
	}
	return e.finish(r, StopFallback, final, raw)
}

func (e *Engine) finish(r *run, reason string, final *Final, raw json.RawMessage) (*Final, *Context, error) {
	if r.Plan != nil {
		for i := range r.Plan.Steps {
			r.Plan.Steps[i].Status = abi.StepCompleted
		}
		final.Plan = r.Plan
	}
	r.RawFinalAnswer = raw
	r.StopReason = reason
	e.emit(r.ctx, r.Context, Event{Kind: EventFinal, Step: len(r.Steps), Action: reason})
	return final, r.Context, nil
}

func (e *Engine) fail(r *run, reason string, err error) (*Final, *Context, error) {
	r.StopReason = reason
	return nil, r.Context, err
}

func (e *Engine) chat(r *run) (llm.Result, error) {
	req := llm.Request{
		Model:      r.opts.Model,
		Messages:   append([]llm.Message(nil), r.Messages...),
		ForceJSON:  true,
		Parameters: maps.Clone(r.params),
	}
	started := time.Now()
	res, err := e.client.Chat(r.ctx, req)
	if err != nil {
		return res, err
	}
	d := res.Duration
	if d == 0 {
		d = time.Since(started)
	}
	r.AddUsage(res.Usage, d)
	return res, nil
}

func (e *Engine) record(r *run, st Step, started time.Time) {
	st.Duration = time.Since(started)
	r.Steps = append(r.Steps, st)
	e.emit(r.ctx, r.Context, Event{Kind: EventStep, Step: st.StepNumber, Action: st.Action, Usage: st.Usage, Err: stepErr(st)})
}

func stepErr(st Step) error {
	if st.Error == "" {
		return nil
	}
	return errors.New(st.Error)
}

// callTool runs one tool call and returns the observation for the model and,
// when the call failed, the error text for the step record.
func (e *Engine) callTool(r *run, step int, call *ToolCall) (observation, errText string) {
	tool, ok := e.reg.Get(call.ToolName)
	if !ok {
		obs := fmt.Sprintf("Error: tool '%s' not found. Available tools: %s", call.ToolName, strings.Join(e.reg.Names(), ", "))
		return obs, obs
	}
	if err := e.reg.Validate(call.ToolName, call.ToolParams); err != nil {
		obs := "Error: " + err.Error()
		return obs, obs
	}
	var out string
	err := callHook("tool "+call.ToolName, func() (err error) {
		out, err = tool.Execute(r.ctx, call.ToolParams)
		return err
	})
	if err != nil {
		obs := "error: " + err.Error()
		return obs, obs
	}
	if e.successHook != nil {
		in := abi.ToolSuccessInput{Tool: call.ToolName, Step: step, Params: call.ToolParams, Observation: out}
		if err := callHook("on_tool_success", func() error { return e.successHook.OnToolSuccess(r.ctx, in) }); err != nil {
			e.emit(r.ctx, r.Context, Event{Kind: EventWarning, Step: step, Err: err, Message: "on_tool_success hook failed"})
		}
	}
	return out, ""
}

// callKey identifies a tool call for repeat detection; encoding/json sorts
// map keys, so equal params give equal keys.
func callKey(call *ToolCall) string {
	b, _ := json.Marshal(call.ToolParams)
	return call.ToolName + "\x00" + string(b)
}

func correction(err error) string {
	return "Your last reply could not be used: " + err.Error() +
		". Reply with exactly one JSON object of type tool_call, plan or final, as the response format describes."
}
