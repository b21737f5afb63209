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

// The engine hooks are the rows of abi.Hooks of kind abi.EngineHook
// (build_prompt, build_params, on_tool_success, fallback_final). An engine
// holds at most one function per hook (HookFunc), by the hook's name; they
// do not chain. Each is called with a context (which carries the deadline
// and the run, see RunContext) and its row's input payload, and may fail: a
// hook backed by a WebAssembly module can trap or time out. The engine
// never lets a failing hook end a run:
//   - build_prompt fails, or answers an empty prompt: the default system
//     prompt is used, with a warning event.
//   - build_params fails, or answers parameters the client rejects: the
//     run's base Parameters are used, with a warning event.
//   - on_tool_success fails: a warning event; the tool's result stands.
//   - fallback_final fails, answers nil, or answers a final that cannot be
//     encoded as JSON or nests deeper than WithMaxJSONDepth: the default
//     final (Output DefaultFinalOutput), with a warning event.
// An answer of another type than the hook's, or a panic, counts as its
// failure.

// HookFunc is one engine hook as a host binds a plugin's (package host's
// WebAssembly plugins, package temporal's activities): called with its
// hook's input payload, the row's Input of abi.Hooks (abi.PromptInput for
// build_prompt, ...), it answers a pointer to the row's Output payload
// (*abi.PromptOutput, *abi.ParamsOutput, *abi.Final), or nil: for a hook
// that answers nothing (on_tool_success), or one that had nothing to say
// (read as an empty prompt, no parameters, no final). An embedding host
// sets the hooks with WithPromptBuilder, WithParamsBuilder,
// WithOnToolSuccess and WithFallbackFinal; WithHook is for a host that
// binds hooks by the table.
type HookFunc func(ctx context.Context, in any) (any, error)

// engineHookNames name the engine hooks, in the table's order.
var engineHookNames = abi.HookNames(abi.EngineHook)

// EngineHooks are the engine hooks an engine uses, after precedence (the
// host's over a plugin's, a later plugin's over an earlier one's).
type EngineHooks struct {
	// Funcs are the hooks set, by their abi name; an unset hook is absent.
	Funcs map[string]HookFunc
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
	return EngineHooks{Funcs: maps.Clone(e.hookFuncs), Owners: maps.Clone(e.hookOwner)}
}

// Option configures an Engine. Of the options that set an engine hook
// (WithPromptBuilder, ..., WithHook), the last given for a hook wins; set
// by the host, the hook is used over any plugin's (see Precedence in the
// package doc).
type Option func(*Engine)

// WithHook sets the engine hook of that name (one of
// abi.HookNames(abi.EngineHook)) to fn; a nil fn sets nothing. It is how a
// host binds a plugin's hooks by walking abi.Hooks; an embedding host's
// own hooks read better through WithPromptBuilder and the other three.
// WithHook panics on a name that is not an engine hook's: the names are
// the abi package's constants, so such a name is a bug in the caller.
func WithHook(name string, fn HookFunc) Option {
	if h, ok := abi.HookByName(name); !ok || h.Kind != abi.EngineHook {
		panic(fmt.Sprintf("engine.WithHook: %q is not an engine hook (want one of %q)", name, engineHookNames))
	}
	if fn == nil {
		return nop
	}
	return func(e *Engine) { e.hookFuncs[name] = fn }
}

// nop is what a hook option given nil returns: an option list built from
// optional settings must neither install a hook that fails on every run
// nor clear one an earlier option set.
func nop(*Engine) {}

// payload is a hook's input as its type, or an error naming the hook when
// a caller passed another.
func payload[In any](hook string, in any) (In, error) {
	v, ok := in.(In)
	if !ok {
		return v, fmt.Errorf("%s hook called with a %T, not a %T", hook, in, v)
	}
	return v, nil
}

// WithPromptBuilder sets the prompt builder: fn receives the engine's
// registry and the task, and answers the run's system prompt (an empty one
// means the default). A nil fn sets nothing.
func WithPromptBuilder(fn func(reg *Registry, task string) string) Option {
	if fn == nil {
		return nop
	}
	return func(e *Engine) {
		reg := e.reg
		e.hookFuncs[abi.HookBuildPrompt] = func(_ context.Context, in any) (any, error) {
			p, err := payload[abi.PromptInput](abi.HookBuildPrompt, in)
			if err != nil {
				return nil, err
			}
			return &abi.PromptOutput{SystemPrompt: fn(reg, p.Task)}, nil
		}
	}
}

// WithParamsBuilder sets the params builder: fn receives the run's options
// as a plugin's params builder is told them (Model, MaxSteps,
// ParseRetries, TokenBudget and a copy of Parameters; not the run's
// Identity, Tools, Mode or OnEvent) and answers model parameters merged
// over the run's Parameters, key by key. A nil fn sets nothing.
func WithParamsBuilder(fn func(opts RunOptions) map[string]any) Option {
	if fn == nil {
		return nop
	}
	return WithHook(abi.HookBuildParams, func(_ context.Context, in any) (any, error) {
		p, err := payload[abi.ParamsInput](abi.HookBuildParams, in)
		if err != nil {
			return nil, err
		}
		return &abi.ParamsOutput{Parameters: fn(optionsOf(p.Options))}, nil
	})
}

// WithOnToolSuccess sets the tool-success hook: fn is called with the run's
// Context and the tool's name after every tool call that was found and
// returned no error. A nil fn sets nothing.
func WithOnToolSuccess(fn func(rc *Context, toolName string)) Option {
	if fn == nil {
		return nop
	}
	return WithHook(abi.HookOnToolSuccess, func(ctx context.Context, in any) (any, error) {
		p, err := payload[abi.ToolSuccessInput](abi.HookOnToolSuccess, in)
		if err != nil {
			return nil, err
		}
		fn(RunContext(ctx), p.Tool)
		return nil, nil
	})
}

// WithFallbackFinal sets the fallback finalizer: fn gives the final answer
// when the run ends without one (its forced conclusion failed); nil means
// the default final. A nil fn sets nothing.
func WithFallbackFinal(fn func() *Final) Option {
	if fn == nil {
		return nop
	}
	return WithHook(abi.HookFallbackFinal, func(_ context.Context, in any) (any, error) {
		if _, err := payload[abi.FallbackInput](abi.HookFallbackFinal, in); err != nil {
			return nil, err
		}
		f := fn()
		if f == nil {
			return nil, nil
		}
		// Not f.wire(), whose deep copy would recurse without end on a
		// cyclic Output: the engine's depth check refuses it first.
		return &abi.Final{Thought: f.Thought, Output: f.Output, Plan: f.Plan.wire()}, nil
	})
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

// callEngineHook calls the engine hook of that name, which is set, with
// in: isolated as callHook does, timed, and reported as an EventHook naming
// the plugin that set it and the step (0 for the hooks before the first).
// Out is the hook's output payload (struct{} for one that answers
// nothing); an answer that is neither nil nor an *Out is the hook's
// failure.
func callEngineHook[Out any](e *Engine, r *run, hook string, step int, in any) (*Out, error) {
	var out *Out
	start := time.Now()
	ctx, span := e.tel.startHook(r.ctx, e.owner(hook), hook)
	err := callHook(hook, func() error {
		ans, err := e.hookFuncs[hook](ctx, in)
		if err != nil || ans == nil {
			return err
		}
		var ok bool
		if out, ok = ans.(*Out); !ok {
			return fmt.Errorf("%s hook answered a %T, not a %T", hook, ans, out)
		}
		return nil
	})
	outcome := OutcomeOK
	switch {
	case errors.Is(err, errPanic):
		outcome = OutcomePanic
	case errors.Is(err, context.DeadlineExceeded):
		outcome = OutcomeTimeout
	case err != nil:
		outcome = OutcomeError
	}
	span.end(outcome, err)
	e.emit(r.ctx, r, Event{Kind: EventHook, Step: step, Hook: hook, Plugin: e.owner(hook), Duration: time.Since(start), Outcome: outcome, Err: err})
	if err != nil {
		return nil, err
	}
	return out, nil
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
