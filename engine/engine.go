// Package engine is morph's agent loop: a JSON tool-calling protocol against a
// chat model (see ParseResponse), a tool registry with schema validation, and
// hook points that embedding hosts or WebAssembly plugins fill in. It knows
// nothing of WebAssembly: package host adapts modules to the middleware
// interfaces and to engine hooks (HookFunc).
//
// # Precedence
//
// Where the host and plugins both supply something of one name, the
// host's explicit choice wins: a tool the host registered, an engine hook
// it set (WithPromptBuilder, WithHook, ...), a service it
// offered (WithService) or a config key it declared (WithConfigKeys) is
// used over a plugin's; a later plugin's over an earlier plugin's; and a plugin's tool
// over a built-in one (WithBuiltinTools). Each time Status.Warnings says
// what was replaced or is not used. Middleware do not replace each other:
// all of them run, the host's first.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/llm"
)

// ErrNoClient is returned by Run on an engine built without a model client.
var ErrNoClient = errors.New("engine: no model client")

// ErrUnknownTool is matched (errors.Is) by the error of a run whose
// RunOptions.Tools names a tool the engine does not have; the error names
// each such tool.
var ErrUnknownTool = errors.New("engine: unknown tool")

// Engine runs agents. It is safe for concurrent Runs as long as its hooks,
// tools and client are.
type Engine struct {
	client     llm.Client
	reg        *Registry
	hookFuncs  map[string]HookFunc // the engine hooks set, by abi name (WithHook)
	identity   string
	rules      []string
	onEvent    func(Event)
	log        *slog.Logger
	middleware []*mw            // WithMiddleware, in order
	now        func() time.Time // the quarantine clock; tests replace it
	nonce      func() string    // of new sessions' IDs and runs' call IDs (WithNonce)
	plugins    []Extender       // WithExtenders, loaded by Initialize
	builtins   []Tool           // WithBuiltinTools
	life       lifecycle
	stream     func(delta string) // WithStream
	hookOwner  map[string]string  // engine hook -> the plugin that set it; absent: the host
	maxObs     int                // WithMaxObservationBytes
	images     bool               // WithImages
	maxDepth   int                // WithMaxJSONDepth
	svc        services           // WithService, Extension.Services
	conf       settings           // WithConfigKeys, Extension.ConfigKeys
	toolWatch  toolWatchers       // OnToolsChanged
	tel        *tracing           // WithTelemetry; nil: nothing recorded
}

// New returns an engine that talks to client and offers the tools in reg (a
// nil reg is an empty registry). With no option set, every hook point uses
// the engine's default behaviour.
func New(client llm.Client, reg *Registry, opts ...Option) *Engine {
	if reg == nil {
		reg = NewRegistry()
	}
	e := &Engine{client: client, reg: reg, identity: DefaultIdentity, rules: DefaultRules, log: slog.Default(), now: time.Now, nonce: randomNonce,
		hookFuncs: map[string]HookFunc{}, hookOwner: map[string]string{}, maxObs: DefaultMaxObservationBytes, maxDepth: abi.MaxDepth, svc: services{byName: map[string]service{}}}
	e.conf.put(modeKey, sourceEngine)
	for _, o := range opts {
		o(e)
	}
	return e
}

// Registry returns the engine's live tool registry: a tool registered on
// it is the embedding host's, of the highest precedence. To list the tools,
// use Tools, which cannot change them.
func (e *Engine) Registry() *Registry { return e.reg }

// Tools describes the engine's tools as the model is told of them, sorted
// by name: a snapshot, which a caller may change or keep without reaching
// the engine's (a UI listing tools, a pipeline narrowing RunOptions.Tools).
// Plugins' tools are among them once Initialize has run.
func (e *Engine) Tools() []abi.ToolSpec { return e.reg.Specs() }

// run is the state of one Run that is not part of the public Context.
type run struct {
	*Context
	e       *Engine
	ctx     context.Context
	opts    RunOptions
	params  map[string]any
	allowed map[string]bool // tools the run offers (RunOptions.Tools, then before_run hooks); nil: every registered tool
	nonce   string          // of the run's tool call IDs (callID), drawn at its first call
	bounds  boundedCalls    // its Bounded middleware calls' context (run.bounded)
	encoded [2]encoded      // the current event's payload, without the history and with it (run.event)
	trace   *runTrace       // its open spans (WithTelemetry); nil without
}

// Run runs the agent on task until it gives a final answer: one turn of a
// new session. A returned Final always comes with a nil error; the Context
// is returned in every case, with the steps taken so far. Errors: ctx.Err()
// when the context ends the run, a model call that failed (after the
// client's retries), base parameters the client rejects (before the first call),
// or a *MiddlewareError from a fail-closed before_run hook. The session
// is closed when the turn ends (Session.Close).
func (e *Engine) Run(ctx context.Context, task string, opts RunOptions) (*Final, *Context, error) {
	s := e.NewSession("")
	defer s.Close(context.WithoutCancel(ctx))
	return s.RunTurn(ctx, task, opts)
}

// turn runs one turn up to its final, after history.
func (e *Engine) turn(r *run, history []llm.Message) (*Final, *Context, error) {
	if e.client == nil {
		return e.fail(r, StopModelFailed, ErrNoClient)
	}
	if err := r.ctx.Err(); err != nil {
		return e.fail(r, StopCanceled, err)
	}
	if err := r.checkMode(); err != nil {
		return e.fail(r, StopBadOptions, err)
	}
	if err := r.restrict(e.reg); err != nil {
		return e.fail(r, StopBadOptions, err)
	}
	r.Messages = append(history, llm.Message{Role: llm.RoleUser, Content: r.Task})
	notify(e, r.ctx, r, turnStartHook, 0, true, func(withHistory bool) abi.TurnStart {
		ev := abi.TurnStart{SessionID: r.SessionID, Turn: r.Turn, Input: r.Task}
		if withHistory {
			ev.History = historySnapshot(history)
		}
		return ev
	})
	r.SystemPrompt = e.systemPrompt(r, r.Task)
	if err := e.beforeRun(r); err != nil {
		return e.fail(r, StopMiddleware, err)
	}
	params, err := e.parameters(r, r.Task)
	if err != nil {
		return e.fail(r, StopBadParams, err)
	}
	r.params, r.Parameters = params, params
	r.Messages = append([]llm.Message{{Role: llm.RoleSystem, Content: r.SystemPrompt}}, r.Messages...)
	return e.loop(r)
}

// beforeRun runs the before_run chain: each hook sees the prompt and tools
// as the previous ones left them. A narrowed tool set rebuilds the prompt
// unless a hook replaced it.
func (e *Engine) beforeRun(r *run) error {
	replaced, narrowed := false, false
	enc := &r.event()[0] // of the input, until a hook changes the prompt or the tools
	for _, m := range e.chain() {
		if !beforeRunHook.has(m.f) {
			continue
		}
		in := abi.BeforeRunInput{SessionID: r.SessionID, Turn: r.Turn, SystemPrompt: r.SystemPrompt, Tools: r.toolNames(e), Model: r.opts.Model}
		out, ran, err := beforeRunHook.call(e, r, m, 0, enc, in)
		if !ran && m.cfg.Policy == FailClosed { // a quarantined gate stays shut
			err = errQuarantined
		}
		if err != nil {
			if m.cfg.Policy == FailClosed {
				return &MiddlewareError{Middleware: m.f.ID, Hook: abi.HookBeforeRun, Err: e.bounded(err)}
			}
			continue
		}
		if out.Tools != nil {
			allowed, unknown := map[string]bool{}, []string(nil)
			for _, name := range out.Tools {
				if slices.Contains(in.Tools, name) { // narrow only: a hook cannot add tools
					allowed[name] = true
				} else {
					unknown = append(unknown, quoteName(name))
				}
			}
			if len(unknown) > 0 {
				e.emit(r.ctx, r, Event{Kind: EventWarning, Plugin: m.f.ID, Hook: abi.HookBeforeRun,
					Message: fmt.Sprintf("middleware %q kept tools that are not offered, ignored: %s", m.f.ID, strings.Join(unknown, ", "))})
			}
			r.allowed, narrowed = allowed, true
			*enc = encoded{}
		}
		switch {
		case strings.TrimSpace(out.SystemPrompt) != "":
			r.SystemPrompt, replaced = out.SystemPrompt, true
			*enc = encoded{}
		case out.SystemPrompt != "":
			e.emit(r.ctx, r, Event{Kind: EventWarning, Plugin: m.f.ID, Hook: abi.HookBeforeRun,
				Message: fmt.Sprintf("middleware %q returned a blank system prompt; keeping the prompt as it was", m.f.ID)})
		}
	}
	if narrowed && !replaced {
		r.SystemPrompt = e.systemPrompt(r, r.Task)
	}
	return nil
}

// restrict narrows the run's tools to RunOptions.Tools, when set, and
// fails naming those the registry does not have.
func (r *run) restrict(reg *Registry) error {
	if r.opts.Tools == nil {
		return nil
	}
	r.allowed = map[string]bool{}
	var unknown []string
	for _, name := range r.opts.Tools {
		if _, ok := reg.Get(name); ok {
			r.allowed[name] = true
		} else {
			unknown = append(unknown, quoteName(name))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w in RunOptions.Tools: %s", ErrUnknownTool, strings.Join(unknown, ", "))
	}
	return nil
}

// toolNames are the names of the tools this run offers, sorted.
func (r *run) toolNames(e *Engine) []string {
	names := e.reg.Names()
	if r.allowed == nil {
		return names
	}
	return slices.DeleteFunc(names, func(n string) bool { return !r.allowed[n] })
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
		e.tel.startStep(r, step)
		res, err := e.chat(r)
		if err != nil {
			if ctxErr := r.ctx.Err(); ctxErr != nil {
				return e.fail(r, StopCanceled, ctxErr)
			}
			return e.fail(r, StopModelFailed, fmt.Errorf("engine: step %d: model call: %w", step, err))
		}
		st := Step{StepNumber: step, Usage: res.Usage}
		resp, perr := ParseResponseDepth(res, e.maxDepth)
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant, Content: res.Text})
		if perr != nil {
			parseFailures++
			r.Metrics.ParseRetries++
			st.Action, st.Error, st.Reply = "parse_error", perr.Error(), safetext.Line(res.Text, e.maxObs)
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
			notify(e, r.ctx, r, actionHook, step, true, func(withHistory bool) abi.Action {
				ev := abi.Action{SessionID: r.SessionID, Turn: r.Turn, Step: step, Tool: call.ToolName, Thought: call.Thought, Input: cloneParams(call.ToolParams)}
				if withHistory {
					ev.History = historySnapshot(r.Messages)
				}
				return ev
			})
			var res abi.ToolCallOutput
			res, st.Error, st.Truncated = e.callTool(r, step, call)
			st.Observation = res.Output
			r.Metrics.ToolCalls++
			r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Images: res.Images,
				Content: fmt.Sprintf("Tool Result (%s):\n%s", cutName(call.ToolName), st.Observation)})
			notify(e, r.ctx, r, observationHook, step, true, func(withHistory bool) abi.Observation {
				ev := abi.Observation{SessionID: r.SessionID, Turn: r.Turn, Step: step, Tool: call.ToolName, Observation: st.Observation, IsError: st.Error != ""}
				if withHistory {
					ev.History = historySnapshot(r.Messages)
				}
				return ev
			})
			e.record(r, st, started)
			key := callKey(call)
			if key == lastCall {
				repeats++
			} else {
				lastCall, repeats = key, 1
			}
			if repeats >= 3 {
				return e.forceConclusion(r, fmt.Sprintf("tool %s called with the same parameters 3 times in a row", quoteName(call.ToolName)))
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
	e.emit(r.ctx, r, Event{Kind: EventWarning, Step: len(r.Steps), Message: "forcing a conclusion: " + why})
	r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Content: ForceConclusionPrompt})
	res, err := e.chat(r)
	if err != nil {
		if ctxErr := r.ctx.Err(); ctxErr != nil {
			return e.fail(r, StopCanceled, ctxErr)
		}
		return e.fallback(r, fmt.Sprintf("%s; the forced conclusion's model call failed: %v", why, err))
	}
	r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant, Content: res.Text})
	resp, perr := ParseResponseDepth(res, e.maxDepth)
	switch {
	case perr != nil:
		return e.fallback(r, fmt.Sprintf("%s; the forced conclusion did not parse: %v", why, perr))
	case resp.Type != TypeFinal:
		return e.fallback(r, fmt.Sprintf("%s; the forced conclusion was a %s, not a final", why, resp.Type))
	}
	return e.finish(r, StopForced, resp.Final, resp.RawFinalAnswer)
}

func (e *Engine) fallback(r *run, why string) (*Final, *Context, error) {
	var final *abi.Final
	var raw json.RawMessage
	if e.hookFuncs[abi.HookFallbackFinal] != nil {
		in := abi.FallbackInput{Task: r.Task, Reason: why, Steps: len(r.Steps), Usage: r.Metrics.Usage()}
		var err error
		final, err = callEngineHook[abi.Final](e, r, abi.HookFallbackFinal, in.Steps, in)
		if err == nil && final == nil {
			err = errors.New("fallback_final hook returned no final")
		}
		if err == nil {
			raw, err = checkFinal(final, e.maxDepth)
		}
		if err != nil {
			final = nil
			e.hookFailed(r, abi.HookFallbackFinal, len(r.Steps), err, "using the default final")
		}
	}
	if final == nil {
		final = &abi.Final{Output: DefaultFinalOutput}
		raw, _ = json.Marshal(final) // a string: it encodes
	}
	e.emit(r.ctx, r, Event{Kind: EventWarning, Step: len(r.Steps), Message: "using the fallback final: " + why})
	return e.finish(r, StopFallback, finalOf(final), raw)
}

// checkFinal encodes a hook's final, refusing one that cannot be encoded
// as JSON (a native hook's NaN, a channel) or that nests deeper than
// maxDepth: the run's result could not be written, or would blow up when
// shown.
func checkFinal(final *abi.Final, maxDepth int) (json.RawMessage, error) {
	raw, err := marshalBounded(final, maxDepth)
	if err != nil {
		return nil, fmt.Errorf("fallback_final hook returned an unusable final: %w", err)
	}
	return raw, nil
}

// marshalBounded encodes v as JSON, refusing it when it nests deeper than
// maxDepth: whoever decodes, re-encodes or shows it would work out of all
// proportion to its size.
func marshalBounded(v any, maxDepth int) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err == nil {
		err = abi.CheckDepth(raw, maxDepth)
	}
	return raw, err
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
	e.tel.endStep(r, nil)
	e.emit(r.ctx, r, Event{Kind: EventFinal, Step: len(r.Steps), Action: reason})
	return final, r.Context, nil
}

func (e *Engine) fail(r *run, reason string, err error) (*Final, *Context, error) {
	r.StopReason = reason
	e.tel.endStep(r, nil)
	return nil, r.Context, err
}

func (e *Engine) chat(r *run) (llm.Result, error) {
	req := llm.Request{
		Model:      r.opts.Model,
		Messages:   append([]llm.Message(nil), r.Messages...),
		ForceJSON:  true,
		Parameters: maps.Clone(r.params),
		Stream:     e.stream,

		ResponseSchema: responseSchema,
	}
	started := time.Now()
	res, err := e.tel.chat(r.ctx, e.client, req)
	if err != nil {
		return res, err
	}
	res.Usage.TotalTokens = res.Usage.Total() // one place where a missing total is filled in
	d := res.Duration
	if d == 0 {
		d = time.Since(started)
	}
	r.AddUsage(res.Usage, d)
	r.Metrics.UsageEstimated = r.Metrics.UsageEstimated || res.UsageEstimated
	return res, nil
}

func (e *Engine) record(r *run, st Step, started time.Time) {
	st.Duration = time.Since(started)
	r.Steps = append(r.Steps, st)
	e.tel.endStep(r, &st)
	e.emit(r.ctx, r, Event{Kind: EventStep, Step: st.StepNumber, Action: st.Action, Usage: st.Usage, Err: stepErr(st), Reply: st.Reply})
}

func stepErr(st Step) error {
	if st.Error == "" {
		return nil
	}
	return errors.New(st.Error)
}

// callTool runs one tool call through the before_tool_call chain, schema
// validation, the tool, and the after_tool_call chain, and returns the
// observation for the model (res.Output), with its images when the model
// takes them and the result's other content (keptRich), and, when the
// call failed, the error text for the step record: both capped at the
// engine's observation limit, and truncated says whether they were cut.
func (e *Engine) callTool(r *run, step int, call *ToolCall) (res abi.ToolCallOutput, errText string, truncated bool) {
	capped := func(s string) string {
		out := safetext.Truncate(s, e.maxObs)
		truncated = truncated || len(out) != len(s)
		return out
	}
	tool, ok := e.reg.Get(call.ToolName)
	if offered := r.allowed == nil || r.allowed[call.ToolName]; !ok || !offered {
		why := "not found"
		if ok {
			why = "is not available in this run"
		}
		obs := capped(fmt.Sprintf("Error: tool '%s' %s. Available tools: %s", cutName(call.ToolName), why, orNone(r.toolNames(e))))
		return abi.ToolCallOutput{Output: obs}, obs, truncated
	}
	if mutates(tool) && r.mode(e) == ModePlan {
		obs := capped(fmt.Sprintf("Tool call refused: plan mode: tool '%s' changes things, so it does not run while planning; "+
			"the mode must be switched to %s to run it.", cutName(call.ToolName), ModeNormal))
		return abi.ToolCallOutput{Output: obs}, obs, truncated
	}
	input, valid, denied := e.beforeToolCall(r, step, call.ToolName, call.ToolParams)
	if denied != "" {
		obs := capped("Tool call denied: " + denied)
		return abi.ToolCallOutput{Output: obs}, obs, truncated
	}
	// The tool's output (or a plugin's trap message) is capped before the
	// after_tool_call chain sees it, and the chain's result again.
	res, err := e.execute(r, step, tool, input, valid)
	out := res.Output
	if err != nil {
		out = err.Error()
	}
	shown := capped(out)
	out = capped(e.afterToolCall(r, step, call.ToolName, input, shown, err != nil))
	if err != nil {
		return abi.ToolCallOutput{Output: out}, capped(err.Error()), truncated
	}
	if e.hookFuncs[abi.HookOnToolSuccess] != nil {
		in := abi.ToolSuccessInput{Tool: call.ToolName, Step: step, Params: input, Observation: out}
		if _, err := callEngineHook[struct{}](e, r, abi.HookOnToolSuccess, step, in); err != nil {
			e.hookFailed(r, abi.HookOnToolSuccess, step, err, "")
		}
	}
	res = e.keptRich(r, step, call.ToolName, res, out != shown)
	res.Output = out
	return res, "", truncated
}

// keptRich is a tool's result with only the parts beyond its text that may
// be sent on: its images go to the model only when it takes images
// (WithImages); its other content and structured result go only to a
// caller of CallToolResult. None of them is kept when after_tool_call
// middleware rewrote the result (a redaction cannot see them, so it must
// not be bypassed through them), and the images, or the rest, not when
// their data is over the observation limit, with a warning.
func (e *Engine) keptRich(r *run, step int, tool string, res abi.ToolCallOutput, rewritten bool) abi.ToolCallOutput {
	if !e.images {
		res.Images = nil
	}
	images, other := 0, len(res.Structured)
	for _, img := range res.Images {
		images += len(img.Data)
	}
	for _, c := range res.Content {
		other += len(c.Data) + len(c.Text) + len(c.URI) + len(c.Name) + len(c.MimeType)
	}
	drop := func(what string, n, size int) bool {
		why := ""
		switch {
		case n == 0:
			return false
		case rewritten:
			why = "after_tool_call middleware rewrote the result"
		case size > e.maxObs:
			why = fmt.Sprintf("their %d bytes are over the observation limit of %d (max_observation_kb)", size, e.maxObs)
		default:
			return false
		}
		e.emit(r.ctx, r, Event{Kind: EventWarning, Step: step,
			Message: fmt.Sprintf("the %d %s of tool %s's result are not sent: %s", n, what, quoteName(tool), why)})
		return true
	}
	if drop("images", len(res.Images), images) {
		res.Images = nil
	}
	n := len(res.Content)
	if len(res.Structured) > 0 {
		n++
	}
	if drop("items beyond text and images", n, other) {
		res.Content, res.Structured = nil, nil
	}
	return res
}

// execute validates input against the tool's schema, unless valid says
// that was done, and runs the tool with its call's ID (CallID); the
// error's text is the observation ("Error: ..." for bad input, "error:
// ..." for the tool's own failure).
func (e *Engine) execute(r *run, step int, tool Tool, input map[string]any, valid validation) (abi.ToolCallOutput, error) {
	if err := valid.of(e.reg, tool.Name(), input); err != nil {
		return abi.ToolCallOutput{}, fmt.Errorf("Error: %w", err)
	}
	var res abi.ToolCallOutput
	ctx, span := e.tel.startTool(WithCallID(r.ctx, e.callID(r, step, 1)), e.reg, tool.Name(), input) // one tool call a step
	err := callHook("tool "+tool.Name(), func() (err error) {
		switch t := tool.(type) {
		case ResultTool:
			res, err = t.ExecuteResult(ctx, input)
		case ImageTool:
			res.Output, res.Images, err = t.ExecuteImages(ctx, input)
		default:
			res.Output, err = tool.Execute(ctx, input)
		}
		return err
	})
	span.end(res, err)
	if err != nil {
		return abi.ToolCallOutput{}, fmt.Errorf("error: %w", err)
	}
	return res, nil
}

// validation is the outcome of validating a tool's input, kept so that it
// is done once however many middleware rewrite (or fail to rewrite) it.
type validation struct {
	done bool
	err  error
}

// of returns the outcome for input, validating it unless that was done.
func (v *validation) of(reg *Registry, tool string, input map[string]any) error {
	if !v.done {
		v.done, v.err = true, reg.Validate(tool, input)
	}
	return v.err
}

// beforeToolCall runs the before_tool_call chain. It returns the input as
// rewritten, with its validation when one was needed, or the reason of the
// first denial. A failing hook of a fail-closed middleware denies the
// call. A rewrite that turns an input the tool's schema accepts into one
// it rejects is the middleware's mistake, not the model's: a fail-open
// middleware's rewrite is dropped with a warning, a fail-closed one
// denies the call, naming it. (A rewrite of an input that was already
// invalid is dropped: the model then hears of its own mistake.)
func (e *Engine) beforeToolCall(r *run, step int, tool string, input map[string]any) (map[string]any, validation, string) {
	var valid validation // of input
	enc := &r.event()[0] // of the input, until a hook rewrites it
	for _, m := range e.chain() {
		if !beforeToolCallHook.has(m.f) {
			continue
		}
		in := abi.BeforeToolCallInput{SessionID: r.SessionID, Turn: r.Turn, Step: step, Tool: tool, Input: cloneParams(input)}
		out, ran, err := beforeToolCallHook.call(e, r, m, step, enc, in)
		if !ran && m.cfg.Policy == FailClosed { // a quarantined guard denies
			err = errQuarantined
		}
		switch {
		case err != nil && m.cfg.Policy == FailClosed:
			return nil, valid, fmt.Sprintf("the guard %q failed and is fail-closed: %v", m.f.ID, err)
		case err != nil:
		case out.Deny:
			reason := out.Reason
			if reason == "" {
				reason = fmt.Sprintf("by %q", m.f.ID)
			}
			return nil, valid, reason
		case out.Input != nil:
			verr := e.reg.Validate(tool, out.Input)
			switch {
			case verr == nil:
				input, valid, *enc = out.Input, validation{done: true}, encoded{}
			case valid.of(e.reg, tool, input) != nil: // invalid before the rewrite too
			case m.cfg.Policy == FailClosed:
				return nil, valid, fmt.Sprintf("the guard %q rewrote the input into one the tool's schema rejects: %v", m.f.ID, verr)
			default:
				e.emit(r.ctx, r, Event{Kind: EventWarning, Step: step, Plugin: m.f.ID, Hook: abi.HookBeforeToolCall, Err: verr,
					Message: fmt.Sprintf("middleware %q rewrote the input of tool %q into one its schema rejects; using the input as it was", m.f.ID, tool)})
			}
		}
	}
	return input, valid, ""
}

// afterToolCall runs the after_tool_call chain over a tool's output.
func (e *Engine) afterToolCall(r *run, step int, tool string, input map[string]any, output string, isErr bool) string {
	enc := &r.event()[0] // of the input, until a hook rewrites the output
	for _, m := range e.chain() {
		if !afterToolCallHook.has(m.f) {
			continue
		}
		in := abi.AfterToolCallInput{SessionID: r.SessionID, Turn: r.Turn, Step: step, Tool: tool, Input: cloneParams(input), Output: output, IsError: isErr}
		if out, _, err := afterToolCallHook.call(e, r, m, step, enc, in); err == nil && out.Output != nil {
			output, *enc = *out.Output, encoded{}
		}
	}
	return output
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
