package temporal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
)

// QueryProgress is the query that answers a turn's steps so far ([]Progress).
const QueryProgress = "progress"

// acts names the activities for ExecuteActivity; its methods are never
// called on it in workflow code.
var acts *Activities

// TurnWorkflow runs one turn of a session: morph's engine, in workflow
// code, with every model call, tool call and engine hook an activity. A
// turn without a session ID is a session of its own, which ends with it
// (on the workers too: sessionend.go); one of a session whose history the
// caller keeps leaves it open for the next. Such a caller-kept session's
// calls of plugins are numbered from 0 in each turn, so a session moved
// to another worker between two of its turns is not told (reason moved):
// a session whose plugins keep state belongs in SessionWorkflow
// (StartTurn), which numbers them across its turns.
func TurnWorkflow(ctx workflow.Context, in TurnInput) (TurnResult, error) {
	s, err := newTurns(ctx, in.SessionID, in.History, 0, 0, nil)
	if err != nil {
		return TurnResult{}, err
	}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() ([]Progress, error) { return s.progress, nil }); err != nil {
		return TurnResult{}, err
	}
	res := s.run(in.Task, in.Options)
	if in.SessionID == "" {
		_ = s.session.Close(context.Background()) // endSessions logs what did not end
	}
	return res, nil
}

// turns runs the turns of a session in workflow code, one at a time, on
// one engine: the workflow's, built from what a worker's Setup answers.
// Its middleware's quarantines hold from one turn to the next.
type turns struct {
	engine   *engine.Engine
	session  *engine.Session
	progress []Progress // the steps of the turn running, or of the last
	calls    int        // the session's model calls so far (ChatRequest.Call)
	mwCalls  sessionCalls
}

// newTurns builds the workflow's engine and resumes the session id on it,
// with the history, the number of turns it had and of model calls it made,
// and its calls of plugins by plugin (SessionState.MiddlewareCalls).
func newTurns(ctx workflow.Context, id string, history []llm.Message, done, calls int, mwCalls map[string]int) (*turns, error) {
	setup, err := workerSetup(ctx)
	if err != nil {
		return nil, err
	}
	ctx = withHeartbeat(ctx, setup)
	t := &turns{calls: calls, mwCalls: sessionCalls{id: maps.Clone(mwCalls)}}
	t.engine = newWorkflowEngine(ctx, setup, &t.calls, t.mwCalls, func(ev engine.Event) {
		if ev.Kind == engine.EventStep {
			t.progress = append(t.progress, Progress{Step: ev.Step, Action: ev.Action, Usage: ev.Usage})
		}
	})
	if err := t.engine.Initialize(context.Background()); err != nil {
		return nil, err
	}
	t.session = t.engine.ResumeSessionAt(id, history, done)
	return t, nil
}

// run runs one turn of the session on task.
func (t *turns) run(task string, opts RunOptions) TurnResult {
	t.progress = nil
	gctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	gctx, abort := withAbort(gctx, cancel)
	final, rc, err := t.session.RunTurn(gctx, task, opts.engine())
	res := TurnResult{Final: final, Steps: rc.Steps, Metrics: rc.Metrics, StopReason: rc.StopReason, SystemPrompt: rc.SystemPrompt, RawFinal: rc.RawFinalAnswer}
	if abort.err != nil {
		// a call without an answer ends the turn, whatever the engine made
		// of it
		res.Final, res.RawFinal, err = nil, nil, abort.err
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

// workerSetup is what a worker's Setup answers.
func workerSetup(ctx workflow.Context) (Setup, error) {
	var s Setup
	return s, call(context.Background(), ctx, setupTimeout, acts.Setup, &s)
}

// newWorkflowEngine is an engine whose model, tools and hooks are
// activities of ctx (or of the workflow context a call's Go context
// carries, see scope), deciding by the workflow's clock; calls counts its
// model calls, mwCalls its calls of plugins by session (sessionCalls).
func newWorkflowEngine(ctx workflow.Context, s Setup, calls *int, mwCalls sessionCalls, onEvent func(engine.Event)) *engine.Engine {
	reg := engine.NewRegistry()
	for _, spec := range s.Tools {
		reg.Register(&toolStub{ctx: ctx, spec: spec, timeout: s.Timeouts.Tools[spec.Name], calls: mwCalls, plugin: s.ToolPlugins[spec.Name]})
	}
	nonces := 0
	opts := []engine.Option{
		engine.WithClock(func() time.Time { return workflow.Now(ctx) }),
		engine.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), // the workers log what they do
		engine.WithMaxObservationBytes(s.MaxObservationBytes), engine.WithMaxJSONDepth(s.MaxJSONDepth), engine.WithImages(s.Images),
		engine.WithEventHandler(onEvent),
		// the run's ID and a count, not random nonces: a replay runs as the
		// first run, its sessions' calls reaching the workers' plugins under
		// the same sessions (the tools' call IDs are their activities', see
		// Journal)
		engine.WithNonce(func() string {
			nonces++
			return fmt.Sprintf("%s.%d", workflow.GetInfo(ctx).WorkflowExecution.RunID, nonces)
		}),
	}
	if s.Identity != "" {
		opts = append(opts, engine.WithIdentity(s.Identity))
	}
	if len(s.Rules) > 0 {
		opts = append(opts, engine.WithRules(s.Rules...))
	}
	ends := true // the first middleware that keeps something per session ends sessions on the workers
	for _, m := range s.Middleware {
		opts = append(opts, engine.WithMiddleware(stubMiddleware(ctx, m, s.Timeouts.Middleware[m.ID], mwCalls, ends && m.EndsSessions), m.Config))
		ends = ends && !m.EndsSessions
	}
	h := hookStub{ctx, s.Timeouts.Hooks, mwCalls, s.HookPlugins}
	for _, name := range s.Hooks {
		row, ok := abi.HookByName(name)
		if !ok || row.Kind != abi.EngineHook {
			continue // not this build's engine hook: Activities.Setup lists only those
		}
		opts = append(opts, engine.WithHook(name, h.hook(row)))
	}
	return engine.New(chatStub{ctx, s.Timeouts.Chat, calls}, reg, opts...)
}

// call runs one activity of the workflow context gctx's code runs in
// (else def; see scope), with its timeout (see withTimeout), and decodes
// its result into out, or returns its failure as the local call would
// have failed: with its message. A call with no answer (unanswered) is a
// *CallError, which also aborts gctx's turn or run (withAbort): once one
// call of it has failed so, the calls after it fail with the same error
// without running, so that no tool, hook or model takes that failure for
// an answer and goes on.
func call(gctx context.Context, def workflow.Context, timeout time.Duration, activity any, out any, args ...any) error {
	if err := aborted(gctx); err != nil {
		return err
	}
	a, _ := gctx.Value(abortKey{}).(*aborter)
	ctx := withTimeout(scope(gctx, def), timeout)
	err := workflow.ExecuteActivity(ctx, activity, args...).Get(ctx, out)
	if ce := unanswered(err); ce != nil {
		ce.Attempts = int(workflow.GetActivityOptions(ctx).RetryPolicy.MaximumAttempts)
		if a != nil {
			a.abort(ce)
		}
		return ce
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return errors.New(appErr.Message())
	}
	return err
}

// CallError is the failure of a call that has no answer: Temporal gave
// up on every attempt it allowed (each lost: its worker died or stopped,
// its heartbeat or its timeout passed; see retryPolicy), or the result
// journal failed it (Journal; see journalFailure). Neither is the call's
// own failure, so the workflow hands it to no engine as a tool's
// observation, a hook's fallback or a failed model call: the turn (or the
// pipeline run) ends with it, its TurnResult.Error (PipelineResult.Error)
// naming the activity and why.
type CallError struct {
	Activity string // the activity's type: Chat, CallTool, Middleware, HandleStage, ...
	Journal  bool   // the result journal failed it, rather than every attempt lost
	Attempts int    // the attempts Temporal allowed the call (the worker's [temporal] lost_attempts)
	Err      error  // the activity's last failure
}

func (e *CallError) Error() string {
	why := fmt.Sprintf("every attempt was lost (%d at most: [temporal] lost_attempts; see heartbeat_timeout and the worker's logs)", e.Attempts)
	if e.Journal {
		why = "the result journal failed it, and it is not made again (see the worker's logs and [temporal] journal_dir)"
	}
	return fmt.Sprintf("call %s has no answer: %s: %v", e.Activity, why, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// unanswered is err, an activity's failure, as a *CallError when it is
// no answer: the last of its lost attempts (a timeout, AttemptLost) or
// the journal's (journalFailure); else nil.
func unanswered(err error) *CallError {
	var actErr *temporal.ActivityError
	if !errors.As(err, &actErr) {
		return nil
	}
	ce := &CallError{Activity: actErr.ActivityType().GetName(), Err: err}
	var timeout *temporal.TimeoutError
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &timeout):
	case errors.As(err, &appErr) && appErr.Type() == AttemptLost:
	case errors.As(err, &appErr) && appErr.Type() == journalFailure:
		ce.Journal = true
	default:
		return nil
	}
	return ce
}

// abortKey is the context key of a turn's or a pipeline run's aborter.
type abortKey struct{}

// aborter holds the first *CallError of a turn or a pipeline run (call),
// and ends the run's Go context with it.
type aborter struct {
	err    error
	cancel func(cause error)
}

// withAbort is gctx, a turn's or a run's context, with an aborter that
// calls cancel at the run's first *CallError. It is a value, not a
// context's end, so that it holds in the contexts without cancel that the
// engine derives (its on_final and after_run hooks).
func withAbort(gctx context.Context, cancel func(cause error)) (context.Context, *aborter) {
	a := &aborter{cancel: cancel}
	return context.WithValue(gctx, abortKey{}, a), a
}

// aborted is the *CallError that aborted gctx's turn or run, if one did:
// no call is made after it (call), nor counted (the session's and the
// model's numbers count calls made).
func aborted(gctx context.Context) error {
	if a, _ := gctx.Value(abortKey{}).(*aborter); a != nil && a.err != nil {
		return a.err
	}
	return nil
}

// abort records err, unless an error is already, and ends the run.
func (a *aborter) abort(err error) {
	if a.err == nil {
		a.err = err
		a.cancel(err)
	}
}

// chatStub is the engine's model: the Chat activity, each numbered by
// the workflow's count of its model calls (ChatRequest.Call).
type chatStub struct {
	ctx     workflow.Context
	timeout time.Duration
	calls   *int
}

func (c chatStub) Chat(gctx context.Context, req llm.Request) (llm.Result, error) {
	var res llm.Result
	if err := aborted(gctx); err != nil {
		return res, err
	}
	n := *c.calls
	*c.calls++
	err := call(gctx, c.ctx, c.timeout, acts.Chat, &res, ChatRequest{Model: req.Model, Messages: req.Messages, ForceJSON: req.ForceJSON,
		Parameters: req.Parameters, ResponseSchema: req.ResponseSchema, Call: n})
	return res, err
}

// toolStub is a worker's tool: the CallTool activity, for the call's
// session.
type toolStub struct {
	ctx     workflow.Context
	spec    abi.ToolSpec
	timeout time.Duration
	calls   sessionCalls
	plugin  string // the plugin whose tool it is: none for the host's
}

func (t *toolStub) Name() string            { return t.spec.Name }
func (t *toolStub) Description() string     { return t.spec.Description }
func (t *toolStub) ParameterSchema() string { return string(t.spec.Parameters) }

func (t *toolStub) Execute(ctx context.Context, params map[string]any) (string, error) {
	out, _, err := t.ExecuteImages(ctx, params)
	return out, err
}

func (t *toolStub) ExecuteImages(gctx context.Context, params map[string]any) (string, []abi.Image, error) {
	var res ToolResult
	if err := call(gctx, t.ctx, t.timeout, acts.CallTool, &res, ToolCall{Tool: t.spec.Name, Params: params, Session: t.calls.of(gctx, t.plugin)}); err != nil {
		return "", nil, err
	}
	if res.Error != "" {
		return "", nil, errors.New(res.Error)
	}
	return res.Output, res.Images, nil
}

// hookStub is the workers' engine hooks: an activity each
// (hookActivities), with its timeout by the hook's abi name, for the
// call's session.
type hookStub struct {
	ctx      workflow.Context
	timeouts map[string]time.Duration
	calls    sessionCalls
	plugins  map[string]string // by the hook's abi name: Setup.HookPlugins
}

// hookActivities are the activities that run the engine hooks on a
// worker, by the hook's abi name.
var hookActivities = map[string]any{
	abi.HookBuildPrompt:   acts.BuildPrompt,
	abi.HookBuildParams:   acts.BuildParams,
	abi.HookOnToolSuccess: acts.OnToolSuccess,
	abi.HookFallbackFinal: acts.FallbackFinal,
}

// hook is the engine hook row as the workflow's engine calls it: its
// activity, whose answer decodes into the row's output payload (nil for a
// hook that answers nothing, or a worker's answer of null).
func (h hookStub) hook(row abi.Hook) engine.HookFunc {
	return func(gctx context.Context, in any) (any, error) {
		session := h.calls.of(gctx, h.plugins[row.Name])
		if row.Output == nil {
			return nil, call(gctx, h.ctx, h.timeouts[row.Name], hookActivities[row.Name], nil, in, session)
		}
		out := reflect.New(reflect.PointerTo(row.Output)) // a **Output, whose *Output stays nil on null
		if err := call(gctx, h.ctx, h.timeouts[row.Name], hookActivities[row.Name], out.Interface(), in, session); err != nil {
			return nil, err
		}
		return out.Elem().Interface(), nil
	}
}
