package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/morphhost/morph/abi"
)

// The four engine hook points. Each takes a context (which carries the
// deadline and the run, see RunContext) and a wire payload from package abi,
// and may fail: a hook backed by a WebAssembly module can trap or time out.
// The engine never lets a failing hook end a run:
//   - PromptBuilder fails: the default system prompt is used, with a warning event.
//   - ParamsBuilder fails, or returns parameters the client rejects: the
//     run's base Parameters are used, with a warning event.
//   - ToolSuccessHook fails: a warning event; the tool's result stands.
//   - FallbackFinalizer fails, answers nil, or answers a final that cannot
//     be encoded as JSON or nests deeper than WithMaxJSONDepth: the default
//     final (Output DefaultFinalOutput), with a warning event.
// A panic in a hook counts as its failure.

// PromptBuilder builds the run's system prompt.
type PromptBuilder interface {
	BuildPrompt(ctx context.Context, in abi.PromptInput) (abi.PromptOutput, error)
}

// ParamsBuilder builds the model parameters sent with every request of a run.
type ParamsBuilder interface {
	BuildParams(ctx context.Context, in abi.ParamsInput) (abi.ParamsOutput, error)
}

// ToolSuccessHook is told of every tool call that was found and returned no error.
type ToolSuccessHook interface {
	OnToolSuccess(ctx context.Context, in abi.ToolSuccessInput) error
}

// FallbackFinalizer gives the final answer when the forced conclusion
// fails. It answers the wire's final, as a plugin's fallback_final does;
// the engine makes its own Final of it.
type FallbackFinalizer interface {
	FallbackFinal(ctx context.Context, in abi.FallbackInput) (*abi.Final, error)
}

// engineHooks are an engine's four hooks; a nil field is unset.
type engineHooks struct {
	prompt   PromptBuilder
	params   ParamsBuilder
	success  ToolSuccessHook
	fallback FallbackFinalizer
}

// EngineHooks are the engine hooks an engine uses, after precedence (the
// host's over a plugin's, a later plugin's over an earlier one's); nil
// where none is set. One implementation serves each hook: they do not
// chain.
type EngineHooks struct {
	Prompt   PromptBuilder
	Params   ParamsBuilder
	Success  ToolSuccessHook
	Fallback FallbackFinalizer
	// Owners name the plugin that set each hook, by its abi name; a hook
	// the host set, or none did, is absent. A host that runs a hook on
	// another engine's behalf bounds the call by its plugin's deadline
	// (package temporal's activity timeouts).
	Owners map[string]string
}

// EngineHooks returns the engine hooks it uses once Initialize has run: for
// a host that runs them on another engine's behalf (package temporal's
// workers, for the engine of a workflow, whose hooks are activities).
func (e *Engine) EngineHooks() EngineHooks {
	return EngineHooks{Prompt: e.hook.prompt, Params: e.hook.params, Success: e.hook.success, Fallback: e.hook.fallback,
		Owners: maps.Clone(e.hookOwner)}
}

// engineHookNames name the engine hooks, in the order of engineHooks.set.
var engineHookNames = [4]string{abi.HookBuildPrompt, abi.HookBuildParams, abi.HookOnToolSuccess, abi.HookFallbackFinal}

// set says which hooks are set, in engineHookNames' order.
func (h *engineHooks) set() [4]bool {
	return [4]bool{h.prompt != nil, h.params != nil, h.success != nil, h.fallback != nil}
}

// take sets the hooks of o that which says, in engineHookNames' order.
func (h *engineHooks) take(o engineHooks, which [4]bool) {
	if which[0] {
		h.prompt = o.prompt
	}
	if which[1] {
		h.params = o.params
	}
	if which[2] {
		h.success = o.success
	}
	if which[3] {
		h.fallback = o.fallback
	}
}

// PromptBuilderFunc adapts a function to PromptBuilder.
type PromptBuilderFunc func(ctx context.Context, in abi.PromptInput) (abi.PromptOutput, error)

// BuildPrompt calls f.
func (f PromptBuilderFunc) BuildPrompt(ctx context.Context, in abi.PromptInput) (abi.PromptOutput, error) {
	return f(ctx, in)
}

// ParamsBuilderFunc adapts a function to ParamsBuilder.
type ParamsBuilderFunc func(ctx context.Context, in abi.ParamsInput) (abi.ParamsOutput, error)

// BuildParams calls f.
func (f ParamsBuilderFunc) BuildParams(ctx context.Context, in abi.ParamsInput) (abi.ParamsOutput, error) {
	return f(ctx, in)
}

// ToolSuccessFunc adapts a function to ToolSuccessHook.
type ToolSuccessFunc func(ctx context.Context, in abi.ToolSuccessInput) error

// OnToolSuccess calls f.
func (f ToolSuccessFunc) OnToolSuccess(ctx context.Context, in abi.ToolSuccessInput) error {
	return f(ctx, in)
}

// FallbackFinalFunc adapts a function to FallbackFinalizer.
type FallbackFinalFunc func(ctx context.Context, in abi.FallbackInput) (*abi.Final, error)

// FallbackFinal calls f.
func (f FallbackFinalFunc) FallbackFinal(ctx context.Context, in abi.FallbackInput) (*abi.Final, error) {
	return f(ctx, in)
}

// Option configures an Engine. Of the options that set an engine hook
// (WithPromptBuilder, WithPromptBuilderHook, ...), the last given for a
// hook wins; set by the host, the hook is used over any plugin's (see
// Precedence in the package doc).
type Option func(*Engine)

// WithPromptBuilderHook sets the prompt builder; nil sets nothing.
func WithPromptBuilderHook(h PromptBuilder) Option {
	if h == nil {
		return nop
	}
	return func(e *Engine) { e.hook.prompt = h }
}

// WithParamsBuilderHook sets the params builder; nil sets nothing.
func WithParamsBuilderHook(h ParamsBuilder) Option {
	if h == nil {
		return nop
	}
	return func(e *Engine) { e.hook.params = h }
}

// WithToolSuccessHook sets the tool-success hook; nil sets nothing.
func WithToolSuccessHook(h ToolSuccessHook) Option {
	if h == nil {
		return nop
	}
	return func(e *Engine) { e.hook.success = h }
}

// WithFallbackFinalHook sets the fallback finalizer; nil sets nothing.
func WithFallbackFinalHook(h FallbackFinalizer) Option {
	if h == nil {
		return nop
	}
	return func(e *Engine) { e.hook.fallback = h }
}

// nop is what a hook option given nil returns: an option list built from
// optional settings must neither install a hook that fails on every run
// nor clear one an earlier option set.
func nop(*Engine) {}

// WithPromptBuilder sets a prompt builder that cannot fail; fn receives the
// engine's registry and the task. A nil fn sets nothing.
func WithPromptBuilder(fn func(reg *Registry, task string) string) Option {
	if fn == nil {
		return nop
	}
	return func(e *Engine) {
		reg := e.reg
		e.hook.prompt = PromptBuilderFunc(func(_ context.Context, in abi.PromptInput) (abi.PromptOutput, error) {
			return abi.PromptOutput{SystemPrompt: fn(reg, in.Task)}, nil
		})
	}
}

// WithParamsBuilder sets a params builder that cannot fail; fn receives
// the run's options as any params builder does. A nil fn sets nothing.
func WithParamsBuilder(fn func(opts abi.RunOptions) map[string]any) Option {
	if fn == nil {
		return nop
	}
	return WithParamsBuilderHook(ParamsBuilderFunc(func(_ context.Context, in abi.ParamsInput) (abi.ParamsOutput, error) {
		return abi.ParamsOutput{Parameters: fn(in.Options)}, nil
	}))
}

// WithOnToolSuccess sets a tool-success hook that receives the run Context.
// A nil fn sets nothing.
func WithOnToolSuccess(fn func(rc *Context, toolName string)) Option {
	if fn == nil {
		return nop
	}
	return WithToolSuccessHook(ToolSuccessFunc(func(ctx context.Context, in abi.ToolSuccessInput) error {
		fn(RunContext(ctx), in.Tool)
		return nil
	}))
}

// WithFallbackFinal sets a fallback finalizer that cannot fail; fn answers
// the wire's final, as any fallback finalizer does. A nil fn sets nothing.
func WithFallbackFinal(fn func() *abi.Final) Option {
	if fn == nil {
		return nop
	}
	return WithFallbackFinalHook(FallbackFinalFunc(func(context.Context, abi.FallbackInput) (*abi.Final, error) {
		return fn(), nil
	}))
}

// WithIdentity sets the first paragraph of the default system prompt.
func WithIdentity(identity string) Option { return func(e *Engine) { e.identity = identity } }

// WithRules replaces the rules listed in the default system prompt.
func WithRules(rules ...string) Option {
	return func(e *Engine) { e.rules = append([]string(nil), rules...) }
}

// WithEventHandler subscribes fn to the events of every run of the engine
// (Event.SessionID and Event.Turn tell runs apart; RunOptions.OnEvent
// subscribes to one run's). fn is called synchronously on the run's
// goroutine, concurrently for concurrent runs, so it must be quick and
// safe for concurrent use.
func WithEventHandler(fn func(Event)) Option { return func(e *Engine) { e.onEvent = fn } }

// WithStream streams the assistant's text as it arrives: fn receives each
// piece of every model reply, in order, on the run's goroutine. For native
// hosts (a terminal UI, say); the protocol still needs the whole reply.
func WithStream(fn func(delta string)) Option { return func(e *Engine) { e.stream = fn } }

// WithClock sets the clock the engine decides by (a middleware's
// quarantine, which ends after a time): a durable executor replaying a run
// gives its own deterministic clock (package temporal: the workflow's), so
// that a replay decides as the first run did. nil sets nothing.
func WithClock(now func() time.Time) Option {
	if now == nil {
		return nop
	}
	return func(e *Engine) { e.now = now }
}

// WithImages says whether the model takes images: when it does, the images
// of a tool's result (ImageTool) go to it with the observation; when it
// does not (the default), they are dropped and the model reads the text.
func WithImages(on bool) Option { return func(e *Engine) { e.images = on } }

// WithMaxObservationBytes caps what one tool call adds to the conversation
// (its output, a plugin's trap message, a middleware's rewrite), cut on a
// character boundary with a note of how much was left out; it caps the
// message and error text of every event too. n <= 0 means
// DefaultMaxObservationBytes (64 KiB).
func WithMaxObservationBytes(n int) Option {
	return func(e *Engine) {
		if n <= 0 {
			n = DefaultMaxObservationBytes
		}
		e.maxObs = n
	}
}

// WithMaxJSONDepth caps how deeply a model reply, the parameters a params
// builder returns, and a fallback final may nest arrays and objects: a
// deeper reply gets a correction, deeper parameters and finals are
// replaced, with a warning. n <= 0 means abi.MaxDepth (64). Tool
// parameters are the registry's (SchemaLimits.MaxParamsDepth).
func WithMaxJSONDepth(n int) Option {
	return func(e *Engine) {
		if n <= 0 {
			n = abi.MaxDepth
		}
		e.maxDepth = n
	}
}

// WithLogger sets the logger for warnings and debug events (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

// callHook runs one hook call, turning a panic into its error so that no
// hook can take the run down.
func callHook(name string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s %w: %v", name, errPanic, r)
		}
	}()
	return fn()
}

// engineHook calls one of the four engine hooks: isolated as callHook does,
// timed, and reported as an EventHook naming the plugin that set it and
// the step (0 for the hooks before the first).
func (e *Engine) engineHook(r *run, hook string, step int, fn func() error) error {
	start := time.Now()
	err := callHook(hook, fn)
	outcome := OutcomeOK
	switch {
	case errors.Is(err, errPanic):
		outcome = OutcomePanic
	case errors.Is(err, context.DeadlineExceeded):
		outcome = OutcomeTimeout
	case err != nil:
		outcome = OutcomeError
	}
	e.emit(r.ctx, r, Event{Kind: EventHook, Step: step, Hook: hook, Plugin: e.owner(hook), Duration: time.Since(start), Outcome: outcome, Err: err})
	return err
}

// hookFailed warns that an engine hook failed, naming the plugin that set
// it, and what the engine uses instead ("" when nothing was replaced).
func (e *Engine) hookFailed(r *run, hook string, step int, err error, instead string) {
	msg := hook + " hook failed"
	if instead != "" {
		msg += "; " + instead
	}
	e.emit(r.ctx, r, Event{Kind: EventWarning, Step: step, Plugin: e.owner(hook), Hook: hook, Err: err, Message: msg})
}

// owner names who set an engine hook: its plugin, or SourceHost.
func (e *Engine) owner(hook string) string {
	if owner := e.hookOwner[hook]; owner != "" {
		return owner
	}
	return SourceHost
}
