package temporal

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/internal/durable"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/pipeline"
)

// Names a pipeline's workflow answers to.
const (
	// QueryPipelineProgress answers a pipeline's progress
	// (PipelineProgress).
	QueryPipelineProgress = "pipeline_progress"
	// UpdateAnswer answers a human gate (AnswerSignal; AnswerGate sends
	// it): it completes once the gate took the answer. Its validator
	// refuses an answer larger than the workflow's MaxAnswerBytes (a
	// *TooLargeError), for no gate waiting at its node (ErrNoGate), naming
	// none of the gate's choices (ErrNoChoice), or for a gate answered
	// already (ErrAnswered): a refused update leaves no event in the
	// workflow's history.
	UpdateAnswer = "gate_answer"
	// SignalAnswer answers a human gate as UpdateAnswer does, but its
	// sender is told nothing, and Temporal records a signal in the history
	// whole, whatever its size, before the workflow can refuse it.
	//
	// Deprecated: send UpdateAnswer (AnswerGate). Workflows still take the
	// signal (the same checks, a refusal only logged) so that those
	// started before the update, waiting on it, replay and go on.
	SignalAnswer = "answer"
)

// PipelineInput is a pipeline run, as PipelineWorkflow takes it.
type PipelineInput struct {
	// Source is the pipeline's DOT source; DotFile the file it came from
	// (for messages: the workers do not read it).
	Source  []byte
	DotFile string
	// Goal, if set, replaces the graph's goal attribute.
	Goal    string
	Limits  pipeline.Limits
	Options RunOptions // the agents' base options
	// Resume, if set, is the run to go on with: the run starts from its
	// checkpoint's next node (pipeline.Runner.Resume).
	Resume *PipelineState
	// ContinueAfter, if positive, continues the workflow as new after
	// that many checkpoints, besides when Temporal suggests it: a bound on
	// each run's history for the operator, and a way to test it.
	ContinueAfter int
	// Continued counts the runs before this one (continue-as-new).
	Continued int
	// MaxAnswerBytes caps a human gate's answer (AnswerMaxBytes; 0: the
	// default): a larger one is refused, logged and not kept.
	MaxAnswerBytes int
}

// PipelineState is what a resume needs of a run directory: the
// checkpoint, the manifest and the full-fidelity threads; and the model
// calls the run made (ChatRequest.Call goes on from there). The
// workflow's run directory is scratch on its worker; this is how a run
// moves on to the next run of the workflow (continue-as-new) or to a new
// workflow (morph pipeline resume --temporal).
type PipelineState struct {
	Checkpoint *pipeline.Checkpoint
	Manifest   *pipeline.Manifest
	Threads    map[string]json.RawMessage
	ModelCalls int
	// PluginCalls are the threads' sessions' calls of each plugin
	// (sessionCalls), which go on in the same sessions in the next run.
	PluginCalls map[string]map[string]int `json:",omitempty"`
}

// PipelineResult is how a pipeline's workflow ended: the run's result and
// its state (the final context is the checkpoint's); or, for a pipeline
// that does not validate, its diagnostics and Error; for a run a call
// without an answer ended (a *CallError), Error.
type PipelineResult struct {
	Result      *pipeline.Result
	State       *PipelineState
	Diagnostics []pipeline.Diagnostic
	Error       string
}

// PipelineProgress is a pipeline's progress, as QueryPipelineProgress
// answers it: this run's events so far (the agents' events are their
// steps) and the questions its human gates wait on.
type PipelineProgress struct {
	// Run is Continued of this run: its events start after those of the
	// runs before it.
	Run    int
	Events []pipeline.Event
	// Questions are those waiting, in the order asked.
	Questions []Question
}

// Question is a human gate's question waiting for its answer. Seq numbers
// the questions of a run in the order asked, so that a gate asked again
// between two queries is told from one still waiting.
type Question struct {
	Seq int `json:"seq"`
	pipeline.Question
}

// AnswerSignal answers the question of the human gate at Node, as the
// console does: Value (yes, no, skipped: pipeline.Answer's), else Choice
// naming one of its choices (key, label or target); Text for a freeform
// gate.
type AnswerSignal = durable.Answer

// PipelineWorkflow runs a DOT pipeline: morph's pipeline runner, in
// workflow code, on the workflow's engine (see TurnWorkflow), so that
// every model call, tool call and hook call of its stages is an activity,
// and so is each call of a WebAssembly stage handler (HandleStage). Its
// time, timeouts and parallel branches are the workflow's (executor); a
// human gate waits for UpdateAnswer; QueryPipelineProgress tells its
// progress. Its run directory is scratch, on the worker, removed at the
// end: the durable record is the workflow's history. When Temporal
// suggests it (or after in.ContinueAfter checkpoints), the workflow stops
// the run at a checkpoint and continues as new from there.
func PipelineWorkflow(ctx workflow.Context, in PipelineInput) (PipelineResult, error) {
	setup, err := workerSetup(ctx)
	if err != nil {
		return PipelineResult{}, err
	}
	ctx = withHeartbeat(ctx, setup)
	g, err := pipeline.ParseDOTNamed(in.DotFile, in.Source)
	if err != nil {
		return PipelineResult{Error: err.Error()}, nil
	}
	dir, err := os.MkdirTemp("", "morph-pipeline-")
	if err != nil {
		return PipelineResult{}, fmt.Errorf("the run's scratch directory: %w", err)
	}
	defer os.RemoveAll(dir)

	// The run's contexts: the workflow's cancel reaches them only through
	// cancel, which ends the Go context before the workflow's, so that a
	// stage that wakes at the cancel sees the run's end (and stops it at a
	// checkpoint), not a failure of its own.
	exec := executor{ctx}
	runCtx, _ := workflow.NewDisconnectedContext(ctx)
	gctx, cancel := exec.WithCancel(withWorkflow(context.Background(), runCtx))
	defer cancel()
	gctx, abort := withAbort(gctx, func(error) { cancel() }) // a call without an answer ends the run
	workflow.Go(ctx, func(c workflow.Context) {
		c.Done().Receive(c, nil)
		cancel()
	})
	gates, err := newGates(ctx, in.MaxAnswerBytes)
	if err != nil {
		return PipelineResult{}, err
	}
	// The answers' updates answer before the workflow ends (they do once
	// their gates took them), not cut off by its end.
	defer workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	progress := PipelineProgress{Run: in.Continued}
	if err := workflow.SetQueryHandler(ctx, QueryPipelineProgress, func() (PipelineProgress, error) {
		p := progress
		p.Questions = gates.questions()
		return p, nil
	}); err != nil {
		return PipelineResult{}, err
	}
	checkpoints, continuing, calls, pluginCalls := 0, false, 0, sessionCalls{}
	if in.Resume != nil {
		calls = in.Resume.ModelCalls
		if in.Resume.PluginCalls != nil {
			pluginCalls = in.Resume.PluginCalls
		}
	}
	r, backend := pipelineRunner(ctx, setup, in, exec, gates, &calls, pluginCalls, func(ev pipeline.Event) {
		if ev.Kind == pipeline.EventAgent {
			if ev.Agent == nil || ev.Agent.Kind != engine.EventStep {
				return
			}
			step := *ev.Agent
			step.Err = nil // an error does not decode; a step's is in its action
			ev.Agent = &step
		}
		progress.Events = append(progress.Events, ev)
		if ev.Kind == pipeline.EventCheckpointSaved {
			checkpoints++
			if workflow.GetInfo(ctx).GetContinueAsNewSuggested() || in.ContinueAfter > 0 && checkpoints >= in.ContinueAfter {
				continuing = true
				cancel() // the run stops before its next node, saving the checkpoint
			}
		}
	})

	cfg := pipeline.RunConfig{RunDir: dir, Goal: in.Goal, Source: in.Source, DotFile: in.DotFile, RunID: workflow.GetInfo(ctx).WorkflowExecution.ID}
	var res *pipeline.Result
	if in.Resume != nil {
		if err := in.Resume.save(dir); err != nil {
			return PipelineResult{}, err
		}
		res, err = r.Resume(gctx, g, cfg)
	} else {
		res, err = r.Run(gctx, g, cfg)
	}
	continues := continuing && err == nil && abort.err == nil && res.State == pipeline.RunCanceled
	if !continues {
		// the full-fidelity threads' sessions end with the run, on the
		// workers too (sessionend.go); continued as new, they go on
		_ = backend.Close(context.Background()) // endSessions logs what did not end
	}
	var ve *pipeline.ValidationError
	if abort.err != nil {
		return PipelineResult{Error: abort.err.Error()}, nil
	} else if errors.As(err, &ve) {
		return PipelineResult{Diagnostics: ve.Diagnostics, Error: err.Error()}, nil
	} else if err != nil {
		return PipelineResult{Error: err.Error()}, nil
	}
	state, err := loadPipelineState(dir)
	if err != nil {
		return PipelineResult{}, err
	}
	state.ModelCalls = calls
	if continues {
		state.PluginCalls = pluginCalls
		next := in
		next.Resume, next.Continued = state, in.Continued+1
		return PipelineResult{}, workflow.NewContinueAsNewError(ctx, PipelineWorkflow, next)
	}
	res.RunDir = "" // scratch, gone
	return PipelineResult{Result: res, State: state}, nil
}

// pipelineRunner is the runner of a pipeline's workflow: the workers'
// engine, tools and stage handlers as activities, the workflow's executor,
// its gates for human gates, and the durable rule; calls counts its model
// calls, pluginCalls its sessions' calls of plugins. Its full-fidelity
// threads' sessions are named by the workflow's ID, so that they go on
// across continues-as-new. Close the backend it returns when the run ends.
// It is config.OpenPipeline's runner in workflow code: the same limits
// (the client's, from [pipeline]) and handler registry, but the stage
// handlers, tools and model calls are activity stubs, the clock and the
// jitter the workflow's, and no node may name an endpoint or a shell
// command.
func pipelineRunner(ctx workflow.Context, setup Setup, in PipelineInput, exec executor, gates *gates, calls *int, pluginCalls sessionCalls, onEvent func(pipeline.Event)) (*pipeline.Runner, *pipeline.EngineBackend) {
	backend := &pipeline.EngineBackend{Engine: newWorkflowEngine(ctx, setup, calls, pluginCalls, nil), Options: in.Options.engine(),
		SessionID: func(thread string) string { return workflow.GetInfo(ctx).WorkflowExecution.ID + "/" + thread }}
	handlers := pipeline.DefaultHandlerRegistry()
	for _, typ := range setup.StageHandlers {
		handlers.Register(stageStub{ctx: ctx, typ: typ, timeout: setup.Timeouts.Stages[typ]})
	}
	// The backoff's jitter: a sequence of the workflow's own, the same on
	// every replay.
	h := fnv.New64a()
	h.Write([]byte(workflow.GetInfo(ctx).WorkflowExecution.RunID))
	jitter := rand.New(rand.NewPCG(h.Sum64(), 0))
	return &pipeline.Runner{Handlers: handlers, Backend: &threadTurns{CodergenBackend: backend, ctx: ctx}, Tools: backend, Interviewer: gates,
		Limits: in.Limits, OnEvent: onEvent, Logger: slog.New(slog.DiscardHandler), Clock: exec, Rand: jitter.Float64,
		Rules: []pipeline.Rule{durableRule}}, backend
}

// threadTurns has the agent runs of one full-fidelity thread take turns in
// workflow code. The engine's session runs one turn at a time behind a Go
// mutex, on which a second parallel branch would block while the first
// waits for an activity: workflow code must not block outside the SDK, so
// the second waits on a workflow semaphore of the thread's instead.
type threadTurns struct {
	pipeline.CodergenBackend
	ctx   workflow.Context
	turns map[string]workflow.Semaphore
}

// RunAgent runs the agent, after the thread's turns before it.
func (b *threadTurns) RunAgent(gctx context.Context, cfg pipeline.AgentRunConfig) (*pipeline.AgentRunResult, error) {
	if cfg.FidelityMode == pipeline.FidelityFull {
		if b.turns == nil {
			b.turns = map[string]workflow.Semaphore{}
		}
		turn := b.turns[cfg.ThreadID]
		if turn == nil {
			turn = workflow.NewSemaphore(b.ctx, 1)
			b.turns[cfg.ThreadID] = turn
		}
		if err := turn.Acquire(scope(gctx, b.ctx), 1); err != nil {
			return nil, cmp.Or(gctx.Err(), err)
		}
		defer turn.Release(1)
	}
	return b.CodergenBackend.RunAgent(gctx, cfg)
}

// save writes s into the run directory dir.
func (s *PipelineState) save(dir string) error {
	if s.Checkpoint == nil || s.Manifest == nil {
		return errors.New("resume: the state has no checkpoint or manifest")
	}
	if err := pipeline.SaveCheckpoint(dir, s.Checkpoint); err != nil {
		return err
	}
	if err := pipeline.SaveManifest(dir, s.Manifest); err != nil {
		return err
	}
	return pipeline.SaveThreads(dir, s.Threads)
}

// loadPipelineState reads the state of the run directory dir.
func loadPipelineState(dir string) (*PipelineState, error) {
	cp, err := pipeline.LoadCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	man, err := pipeline.LoadManifest(dir)
	if err != nil {
		return nil, err
	}
	threads, err := pipeline.LoadThreads(dir)
	if err != nil {
		return nil, err
	}
	return &PipelineState{Checkpoint: cp, Manifest: man, Threads: threads}, nil
}

// RuleDurable is the rule of what a pipeline's workflow cannot run yet.
const RuleDurable = "durable"

// durableRule refuses the nodes a workflow cannot run durably yet, each
// with an ERROR naming the node: a shell command (tool_command) would run
// on whichever worker, outside the sandbox, and again after a crash; a
// manager loop reads its child's DOT file and keeps its runs on a disk;
// a node's own model endpoint (llm_provider, base_url) is one the workers
// have no client for.
var durableRule = pipeline.NewRule(RuleDurable, func(g *pipeline.Graph, _ pipeline.ValidateOptions) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	refuse := func(n *pipeline.Node, fix, format string, args ...any) {
		out = append(out, pipeline.Diagnostic{Rule: RuleDurable, Severity: pipeline.SeverityError, NodeID: n.ID, Line: n.Line,
			Message: fmt.Sprintf(format, args...) + ": not durable on Temporal yet", Fix: fix})
	}
	for _, n := range g.Nodes {
		switch {
		case strings.TrimSpace(n.Attrs["tool_command"]) != "":
			refuse(n, `use a tool (tool="<name>"), which runs as an activity, or run the pipeline without --temporal`,
				"node %s runs a shell command (tool_command), which would run outside the sandbox on whichever worker takes it", n.ID)
		case n.Type() == pipeline.TypeManagerLoop:
			refuse(n, "run the pipeline without --temporal",
				"node %s supervises a child pipeline (stack.manager_loop), which reads its DOT file and keeps its runs on one machine's disk", n.ID)
		case strings.TrimSpace(n.Attrs["llm_provider"]) != "" || strings.TrimSpace(n.Attrs["base_url"]) != "":
			refuse(n, "remove llm_provider and base_url from the node (and the stylesheet), or run the pipeline without --temporal",
				"node %s names a model endpoint of its own (llm_provider, base_url), and the workers have only their configuration's", n.ID)
		}
	}
	return out
})

// gates is the human gates' Interviewer of a pipeline's workflow: a
// question waits for an UpdateAnswer naming its node and one of its
// choices. The update's validator refuses an answer larger than max bytes,
// for no gate waiting, naming none of its gate's choices, or for a gate
// answered already: the refusal is logged (escaped) and goes back to the
// sender, and the rejected update leaves nothing in the history; the gate
// goes on waiting, as the console asks again. Its timeout (human.timeout)
// takes the default as locally. A SignalAnswer (deprecated) is checked the
// same way, its refusal only logged.
type gates struct {
	ctx     workflow.Context
	max     int
	waiting []*gate // in the order asked
	asked   int
}

// gate is a question waiting.
type gate struct {
	q      pipeline.Question
	seq    int
	answer *AnswerSignal // the answer it was given
	took   bool          // Ask returned the answer
	done   bool          // Ask returned
}

// newGates serves UpdateAnswer and SignalAnswer for the gates of ctx's
// workflow, each answer at most max bytes.
func newGates(ctx workflow.Context, max int) (*gates, error) {
	g := &gates{ctx: ctx, max: max}
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateAnswer, func(ctx workflow.Context, a AnswerSignal) error {
		w, err := g.take(a) // refused here only when the gate stopped waiting since the validator ran
		if err != nil {
			return err
		}
		if err := workflow.Await(ctx, func() bool { return w.done }); err != nil {
			return err
		}
		if !w.took { // its timeout ended it at the same time
			return g.refuse(a, ErrNoGate)
		}
		return nil
	}, workflow.UpdateHandlerOptions{Validator: func(a AnswerSignal) error {
		if _, err := g.check(a); err != nil {
			return g.refuse(a, err)
		}
		return nil
	}})
	if err != nil {
		return nil, err
	}
	// The signal, for the workflows started before the update (their
	// histories replay with it), and for senders that still signal.
	signals := workflow.GetSignalChannel(ctx, SignalAnswer)
	workflow.Go(ctx, func(c workflow.Context) {
		for {
			var a AnswerSignal
			if !signals.Receive(c, &a) { // a payload that does not decode is logged by the SDK and skipped
				return
			}
			g.take(a)
		}
	})
	return g, nil
}

// check finds the gate waiting for a, or says why a is refused: a
// *TooLargeError, ErrNoGate, ErrNoChoice or ErrAnswered.
func (g *gates) check(a AnswerSignal) (*gate, error) {
	if err := checkAnswer(a, g.max); err != nil {
		return nil, err
	}
	for _, w := range g.waiting {
		if w.q.NodeID != a.Node {
			continue
		}
		if err := w.q.Check(pipeline.Answer{Value: a.Value, Choice: a.Choice, Text: a.Text}); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoChoice, err)
		}
		if w.answer != nil {
			return nil, ErrAnswered
		}
		return w, nil
	}
	return nil, ErrNoGate
}

// take gives a its gate, or logs why it cannot and returns the refusal.
func (g *gates) take(a AnswerSignal) (*gate, error) {
	w, err := g.check(a)
	if err != nil {
		return nil, g.refuse(a, err)
	}
	w.answer = &a
	return w, nil
}

// refuse logs why a is refused, its node and choice escaped, and returns
// the refusal as its sender gets it (answerFailure).
func (g *gates) refuse(a AnswerSignal, err error) error {
	workflow.GetLogger(g.ctx).Warn("answer refused", "node", safetext.Line(a.Node, 100), "choice", safetext.Line(a.Choice, 100), "error", err)
	return answerFailure(err)
}

// questions are the questions waiting.
func (g *gates) questions() []Question {
	out := []Question{}
	for _, w := range g.waiting {
		out = append(out, Question{Seq: w.seq, Question: w.q})
	}
	return out
}

// Ask waits for the question's answer, or for gctx's end (its timeout:
// the cause is context.DeadlineExceeded).
func (g *gates) Ask(gctx context.Context, q pipeline.Question) (pipeline.Answer, error) {
	w := scope(gctx, g.ctx)
	for _, o := range g.waiting {
		if o.q.NodeID == q.NodeID {
			return pipeline.Answer{}, fmt.Errorf("human gate %s is asked twice at once (by two parallel branches): an answer could not tell them apart", q.NodeID)
		}
	}
	g.asked++
	me := &gate{q: q, seq: g.asked}
	g.waiting = append(g.waiting, me)
	defer func() {
		me.done = true
		for i, o := range g.waiting {
			if o == me {
				g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
				break
			}
		}
	}()
	// An answer that came with the gate's timeout is taken.
	if err := workflow.Await(w, func() bool { return me.answer != nil }); err != nil && me.answer == nil {
		if cause := context.Cause(gctx); cause != nil {
			return pipeline.Answer{}, cause
		}
		return pipeline.Answer{}, err
	}
	me.took = true
	a := me.answer
	return pipeline.Answer{Value: a.Value, Choice: a.Choice, Text: a.Text}, nil
}

// StageCall is one call of a worker's stage handler (its type,
// "wasm:<plugin>") with the input host.StageInput built.
type StageCall struct {
	Type  string
	Input abi.StageInput
}

// StageResult is a stage handler's answer: its outcome, or its failure's
// text (a failed call is the stage's FAIL, not the activity's failure).
type StageResult struct {
	Outcome abi.StageOutcome
	Error   string
}

// HandleStage runs a WebAssembly stage handler of the worker's plugins.
func (a *Activities) HandleStage(ctx context.Context, c StageCall) (StageResult, error) {
	for _, h := range a.rt.StageHandlers() {
		if h.Type() == c.Type {
			out, err := h.Call(ctx, c.Input)
			if err != nil && ctx.Err() != nil {
				return StageResult{}, err // the attempt's end, not the stage's: retried (lostAttempt)
			} else if err != nil {
				return StageResult{Error: err.Error()}, nil
			}
			return StageResult{Outcome: out}, nil
		}
	}
	return StageResult{}, nonRetryable("stage", fmt.Errorf("this worker has no stage handler %q: workers must load the same configuration", c.Type))
}

// stageStub is a worker's stage handler: the HandleStage activity, with
// the input and outcome of the local handler (host.StageInput,
// host.StageOutcome).
type stageStub struct {
	ctx     workflow.Context
	typ     string
	timeout time.Duration
}

func (s stageStub) Type() string { return s.typ }

func (s stageStub) Execute(gctx context.Context, node *pipeline.Node, pctx *pipeline.Context, _ *pipeline.ArtifactStore) (*pipeline.Outcome, error) {
	var res StageResult
	err := call(gctx, s.ctx, s.timeout, acts.HandleStage, &res, StageCall{Type: s.typ, Input: host.StageInput(gctx, node, pctx)})
	if err == nil && res.Error != "" {
		err = errors.New(res.Error)
	}
	return host.PipelineOutcome(strings.TrimPrefix(s.typ, pipeline.TypeWasmPrefix), node, res.Outcome, err), nil
}
