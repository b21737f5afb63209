package temporal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/llm"
	"github.com/morphhost/morph/llm/scripted"
)

// Activities are what a worker does for TurnWorkflow: the model calls, tool
// calls and engine hooks of the engine it would run locally, loaded from
// morph.toml. A call's own failure is a non-retryable application error:
// the model client has already retried by its own rules, and a tool's or
// a hook's failure is an answer the engine handles (an observation, a
// fallback). Temporal retries an activity only when its attempt was lost:
// its worker gone (a missed heartbeat, its timeout) or stopping, or
// starved past its timeout (lostAttempt, which the worker's attempts
// apply to every activity, with its heartbeats).
type Activities struct {
	cfg     *config.Config
	rt      *config.Runtime
	client  llm.Client
	log     *slog.Logger
	journal *Journal
	// tc and queue are the Temporal client and task queue of the worker
	// (NewWorker), which Workers asks.
	tc    client.Client
	queue string
	// stopPrune ends the journal's cleaning (Journal.prune).
	stopPrune context.CancelFunc
}

// NewActivities loads cfg's model client and engine, plugins included,
// as `morph run` would, and opens its result journal (see Journal).
func NewActivities(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*Activities, error) {
	client, err := cfg.Client(logger)
	if err != nil {
		return nil, err
	}
	j, err := openJournal(cfg, logger)
	if err != nil {
		return nil, err
	}
	rt, err := cfg.Open(ctx, logger)
	if err != nil {
		return nil, err
	}
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	go j.prune(pctx, cfg.Temporal.WithDefaults().JournalRetention, logger)
	return &Activities{cfg: cfg, rt: rt, client: client, log: logger, journal: j, stopPrune: stop}, nil
}

// Close closes the engine and its plugins.
func (a *Activities) Close(ctx context.Context) error {
	a.stopPrune()
	return a.rt.Close(ctx)
}

// Setup describes the worker's engine for the workflow's, and the
// timeouts of its calls.
func (a *Activities) Setup(context.Context) (Setup, error) {
	e := a.rt.Engine
	s := Setup{Tools: e.Tools(), Identity: a.cfg.Agent.Identity, Rules: a.cfg.Agent.Rules,
		MaxObservationBytes: a.cfg.Agent.MaxObservationKB << 10, MaxJSONDepth: a.cfg.Agent.MaxJSONDepth, Images: a.cfg.LLM.Images}
	s.Hooks = slices.Sorted(maps.Keys(e.EngineHooks().Funcs))
	s.Timeouts = a.timeouts(s.Hooks)
	s.ToolPlugins, s.HookPlugins = a.plugins(s.Hooks)
	s.Middleware = middlewareSpecs(e)
	for _, h := range a.rt.StageHandlers() {
		s.StageHandlers = append(s.StageHandlers, h.Type())
	}
	return s, nil
}

// Chat is one model call. A scripted model answers the reply the
// workflow's count of its calls names, not its own next one: the calls of
// a workflow run on several workers.
func (a *Activities) Chat(ctx context.Context, req ChatRequest) (llm.Result, error) {
	res, err := a.client.Chat(scripted.WithReplyIndex(ctx, req.Call), llm.Request{Model: req.Model, Messages: req.Messages, ForceJSON: req.ForceJSON,
		Parameters: req.Parameters, ResponseSchema: req.ResponseSchema})
	return res, nonRetryable("model call", err)
}

// CallTool runs one tool, as the engine would after its middleware, as a
// call of call's session; the tool's failure is in the result. A tool of
// the embedding host's that panics fails too, as it would locally, and its
// panic is logged (escaped), by the rule of every activity's panic
// (recovered): while the attempt lives, the panic is the call's answer
// (Temporal would otherwise run the activity again, and the tool with it,
// repeating what it did before panicking); once it has ended, the attempt
// was lost.
func (a *Activities) CallTool(ctx context.Context, call ToolCall) (res ToolResult, err error) {
	ctx = call.Session.context(ctx)
	tool, ok := a.rt.Engine.Registry().Get(call.Tool)
	if !ok {
		return ToolResult{}, nonRetryable("tool call", fmt.Errorf("this worker has no tool %q: workers must load the same configuration", call.Tool))
	}
	a.log.InfoContext(ctx, "tool called", "tool", call.Tool)
	defer func() {
		if p := recover(); p != nil {
			a.log.ErrorContext(ctx, "tool panicked", "tool", call.Tool, "panic", safetext.Escape(fmt.Sprint(p)), "stack", safetext.Escape(string(debug.Stack())))
			res, err = ToolResult{Error: fmt.Sprintf("tool %s panicked: %v", call.Tool, p)}, nil
			if ctx.Err() != nil {
				res, err = ToolResult{}, errors.New(res.Error) // retried (lostAttempt)
			}
		}
	}()
	if it, ok := tool.(engine.ImageTool); ok {
		res.Output, res.Images, err = it.ExecuteImages(ctx, call.Params)
	} else {
		res.Output, err = tool.Execute(ctx, call.Params)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ToolResult{}, err // the attempt's end, not the tool's answer: retried (lostAttempt)
		}
		res.Error = err.Error()
	}
	return res, nil
}

// BuildPrompt runs the build_prompt hook, as a call of session s (as the
// other engine hooks: a call recorded before the session was passed
// serves as no session's). It answers an *abi.PromptOutput.
func (a *Activities) BuildPrompt(ctx context.Context, in abi.PromptInput, s CallSession) (any, error) {
	return a.engineHook(ctx, abi.HookBuildPrompt, in, s)
}

// BuildParams runs the build_params hook, as a call of session s. It
// answers an *abi.ParamsOutput.
func (a *Activities) BuildParams(ctx context.Context, in abi.ParamsInput, s CallSession) (any, error) {
	return a.engineHook(ctx, abi.HookBuildParams, in, s)
}

// OnToolSuccess runs the on_tool_success hook, as a call of session s.
func (a *Activities) OnToolSuccess(ctx context.Context, in abi.ToolSuccessInput, s CallSession) error {
	_, err := a.engineHook(ctx, abi.HookOnToolSuccess, in, s)
	return err
}

// FallbackFinal runs the fallback_final hook, as a call of session s. It
// answers an *abi.Final.
func (a *Activities) FallbackFinal(ctx context.Context, in abi.FallbackInput, s CallSession) (any, error) {
	return a.engineHook(ctx, abi.HookFallbackFinal, in, s)
}

// engineHook runs the engine's hook of that name with in, as a call of
// session s; its answer is the hook's (HookFunc), encoded as the activity's
// result.
func (a *Activities) engineHook(ctx context.Context, hook string, in any, s CallSession) (any, error) {
	fn := a.rt.Engine.EngineHooks().Funcs[hook]
	if fn == nil {
		return nil, nonRetryable(hook, fmt.Errorf("this worker has no %s hook: workers must load the same configuration", hook))
	}
	out, err := fn(s.context(ctx), in)
	return out, nonRetryable(hook, err)
}

// nonRetryable marks err as an answer, not a lost worker: Temporal does not
// run the activity again for it (unless its attempt was lost meanwhile:
// lostAttempt). Its message is err's, which the workflow hands the engine
// as the local call would have failed, cut to failureMessage bytes: a
// failure's message is kept in the workflow's history as it is, not
// moved to the payload store.
func nonRetryable(what string, err error) error {
	if err == nil {
		return nil
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return err
	}
	return temporal.NewNonRetryableApplicationError(safetext.Truncate(err.Error(), failureMessage), what, nil)
}
