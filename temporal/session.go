package temporal

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/cenkalti/backoff/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
)

// UpdateTurn is the update that runs a turn of a session's workflow: it
// takes a SessionTurn and answers its TurnResult once the turn is done.
const UpdateTurn = "turn"

// QueryTurnProgress is the query of a session's workflow that answers the
// steps so far ([]Progress) of the turn of an update, given the update's
// ID: none before that turn starts or after the next one does.
const QueryTurnProgress = "turn-progress"

// QuerySession is the query of a session's workflow that answers its
// SessionState now: its history, its middleware's quarantines, its turns.
const QuerySession = "session"

// SessionWorkflowID is the ID of session id's workflow: one a session.
func SessionWorkflowID(id string) string { return "morph-session-" + id }

// SessionState is a session's workflow's input, and its result when it
// ends idle: the session's history, the quarantines of its middleware
// (which hold across turns, as on one local engine), the turns it has run,
// and its limits. A continue-as-new carries it to the next run.
type SessionState struct {
	SessionID   string
	History     []llm.Message
	Quarantines []engine.Quarantine
	Turns       int
	ModelCalls  int // the model calls of its turns (ChatRequest.Call)
	// MiddlewareCalls are the calls of its turns of each plugin, by name
	// (sessionCalls): of its middleware, tools and engine hooks. (The name
	// is from when it counted middleware alone; histories keep it.)
	MiddlewareCalls map[string]int `json:",omitempty"`
	Limits          SessionLimits
}

// SessionLimits bound one run of a session's workflow: after MaxTurns
// turns, or once its Temporal history passes MaxHistoryBytes (or Temporal
// suggests it), it continues as new between turns; after IdleTimeout
// without a turn it ends. It refuses a turn whose task is larger than
// MaxTaskBytes (CheckTask).
type SessionLimits struct {
	MaxTurns        int
	MaxHistoryBytes int
	IdleTimeout     time.Duration
	MaxTaskBytes    int
}

// LimitsOf are the session limits of a [temporal] table, its defaults
// applied.
func LimitsOf(t config.Temporal) SessionLimits {
	t = t.WithDefaults()
	return SessionLimits{MaxTurns: t.SessionMaxTurns, MaxHistoryBytes: t.SessionMaxHistoryKB << 10, IdleTimeout: t.SessionIdleTimeout,
		MaxTaskBytes: t.TurnMaxKB << 10}
}

// withDefaults is l with each limit that is not positive at the [temporal]
// table's default.
func (l SessionLimits) withDefaults() SessionLimits {
	d := LimitsOf(config.Temporal{})
	if l.MaxTurns <= 0 {
		l.MaxTurns = d.MaxTurns
	}
	if l.MaxHistoryBytes <= 0 {
		l.MaxHistoryBytes = d.MaxHistoryBytes
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.MaxTaskBytes <= 0 {
		l.MaxTaskBytes = d.MaxTaskBytes
	}
	return l
}

// SessionTurn is one turn of a session, as UpdateTurn takes it.
type SessionTurn struct {
	Task    string
	Options RunOptions
	// UpdateID is the ID of the update that asks for the turn (StartTurn),
	// by which Temporal tells a retry of the request from another turn:
	// empty, StartTurn makes a random one. It is not part of the update's
	// argument.
	UpdateID string `json:"-"`
}

// pendingTurn is a turn an update asked for, until the workflow has run it.
type pendingTurn struct {
	update string // the update's ID
	turn   SessionTurn
	done   bool
	res    TurnResult
}

// SessionWorkflow runs a session, one turn an UpdateTurn, each by the
// engine TurnWorkflow runs: the session's history and its middleware's
// quarantines are the workflow's state. Past its limits it continues as
// new with them, between turns, once the turns already asked for have run
// and their updates have answered; idle past in.Limits.IdleTimeout, it ends
// with them.
func SessionWorkflow(ctx workflow.Context, in SessionState) (SessionState, error) {
	in.Limits = in.Limits.withDefaults()
	var queue []*pendingTurn
	var current *pendingTurn
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateTurn, func(ctx workflow.Context, turn SessionTurn) (TurnResult, error) {
		p := &pendingTurn{update: workflow.GetCurrentUpdateInfo(ctx).ID, turn: turn}
		queue = append(queue, p)
		if err := workflow.Await(ctx, func() bool { return p.done }); err != nil {
			return TurnResult{}, err
		}
		return p.res, nil
	}, workflow.UpdateHandlerOptions{Validator: func(turn SessionTurn) error {
		if turn.Task == "" {
			return errors.New("a turn needs a task")
		}
		// refused before it is kept: a rejected update leaves no event in
		// the history
		if err := in.Limits.CheckTask(turn.Task); err != nil {
			workflow.GetLogger(ctx).Warn("turn refused", "error", err)
			return err
		}
		return nil
	}})
	if err != nil {
		return in, err
	}
	s, err := newTurns(ctx, in.SessionID, in.History, in.Turns, in.ModelCalls, in.MiddlewareCalls)
	if err != nil {
		return in, err
	}
	s.engine.RestoreQuarantines(in.Quarantines)
	if err := workflow.SetQueryHandler(ctx, QueryTurnProgress, func(update string) ([]Progress, error) {
		if current == nil || current.update != update {
			return nil, nil
		}
		return s.progress, nil
	}); err != nil {
		return in, err
	}
	state := func() SessionState {
		return SessionState{SessionID: in.SessionID, History: s.session.History(), Quarantines: s.engine.Quarantines(),
			Turns: s.session.Turns(), ModelCalls: s.calls, MiddlewareCalls: maps.Clone(s.mwCalls[in.SessionID]), Limits: in.Limits}
	}
	if err := workflow.SetQueryHandler(ctx, QuerySession, func() (SessionState, error) { return state(), nil }); err != nil {
		return in, err
	}
	// settled waits for a turn asked for or for every update to have
	// answered, and says whether it was the latter.
	settled := func() (bool, error) {
		err := workflow.Await(ctx, func() bool { return len(queue) > 0 || workflow.AllHandlersFinished(ctx) })
		return len(queue) == 0, err
	}
	for ran := 0; ; {
		info := workflow.GetInfo(ctx)
		if ran > 0 && (ran >= in.Limits.MaxTurns || info.GetCurrentHistorySize() >= in.Limits.MaxHistoryBytes || info.GetContinueAsNewSuggested()) {
			// Run the turns already asked for, and let their updates answer.
			done, err := settled()
			if err != nil {
				return state(), err
			}
			if done {
				return state(), workflow.NewContinueAsNewError(ctx, SessionWorkflow, state())
			}
		}
		asked, err := workflow.AwaitWithTimeout(ctx, in.Limits.IdleTimeout, func() bool { return len(queue) > 0 })
		if err != nil {
			return state(), err
		}
		if !asked {
			if done, err := settled(); err != nil || done {
				return state(), err
			}
		}
		current, queue = queue[0], queue[1:]
		current.res = s.run(current.turn.Task, current.turn.Options)
		current.done = true
		ran++
	}
}

// StartTurn asks session id's workflow on taskQueue for a turn, starting
// the workflow, with limits, when it is not running (update-with-start; a
// running workflow keeps the limits it has), and returns once a worker has
// accepted the turn: WaitTurn waits for its TurnResult. A task larger than
// limits.MaxTaskBytes is refused (a *TooLargeError) before it reaches
// Temporal, as the workflow's validator would. A session whose workflow
// ended idle goes on from the state it ended with: the idle end gives back
// the workers' and Temporal's resources, not the session.
//
// A request that fails for a busy or slow service or worker (transient: a
// deadline of one RPC, unavailable, resource exhausted) is sent again,
// backing off (clientBackoff), for as long as ctx lives, with the same
// update ID (turn.UpdateID, or one made once for the call): Temporal
// answers a retry of an update its workflow's run has admitted already
// with that update, so that the turn runs once. A run that has ended since
// (continued as new past session_max_turns or its history's size, or
// ended idle) does not take the retry: before each retry, StartTurn looks
// for the update in the run that ended last (ranBefore) and, found there,
// answers it. One case is left: the first request's update admitted, its
// turn run to its end and its run ended, all between that look and the
// retry reaching Temporal (milliseconds), or two runs ending since the
// first request (two turns or more run within one backoff); the retry then
// starts the turn again, and the session's history shows it twice.
func StartTurn(ctx context.Context, c client.Client, taskQueue, id string, limits SessionLimits, turn SessionTurn) (client.WorkflowUpdateHandle, error) {
	if err := limits.CheckTask(turn.Task); err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	if turn.UpdateID == "" {
		turn.UpdateID = "turn-" + rand.Text()
	}
	retry := false
	h, err := retryTransient(ctx, func() (client.WorkflowUpdateHandle, error) {
		if retry {
			if h, err := ranBefore(ctx, c, SessionWorkflowID(id), turn.UpdateID); h != nil || err != nil {
				return h, err
			}
		}
		retry = true
		in, err := endedState(ctx, c, id)
		if err != nil {
			return nil, err
		}
		in.SessionID, in.Limits = id, limits
		// a start operation is good for one request: each attempt makes its own
		start := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: SessionWorkflowID(id), TaskQueue: taskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}, SessionWorkflow, in)
		return c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{UpdateID: turn.UpdateID, UpdateName: UpdateTurn, Args: []any{turn},
				WaitForStage: client.WorkflowUpdateStageAccepted}})
	})
	if err != nil {
		return nil, fmt.Errorf("session %s (workflow %s, update %s): %w", id, SessionWorkflowID(id), turn.UpdateID, err)
	}
	return h, nil
}

// WaitTurn waits for the TurnResult of the turn of h (StartTurn's) into
// res, for as long as ctx lives: a wait that fails for a busy or slow
// service (transient; the SDK's WorkflowUpdateServiceTimeoutOrCanceledError
// when one long poll ends without the result) waits again, as the SDK
// documents, rather than failing a turn that goes on.
func WaitTurn(ctx context.Context, h client.WorkflowUpdateHandle, res *TurnResult) error {
	// A handle's Get polls afresh each call (the SDK's lazy handle holds
	// the update's reference only), so polling again is calling it again.
	_, err := retryTransient(ctx, func() (struct{}, error) { return struct{}{}, h.Get(ctx, res) })
	if err != nil {
		return fmt.Errorf("the turn of update %s: %w", h.UpdateID(), err)
	}
	return nil
}

// WaitRun waits for the result of workflow run into valuePtr, as WaitTurn
// for a turn's: a long poll of its history that fails for a busy service
// (one RPC's deadline) polls again while ctx lives.
func WaitRun(ctx context.Context, run client.WorkflowRun, valuePtr any) error {
	_, err := retryTransient(ctx, func() (struct{}, error) { return struct{}{}, run.Get(ctx, valuePtr) })
	return err
}

// retryTransient calls op until it succeeds, fails for good (not
// transient), or ctx ends, backing off between attempts (clientBackoff).
// Ended by ctx, it returns op's last error with ctx's cause.
func retryTransient[T any](ctx context.Context, op func() (T, error)) (T, error) {
	var last error
	v, err := backoff.Retry(ctx, func() (T, error) {
		v, err := op()
		if err != nil && !Transient(ctx, err) {
			return v, backoff.Permanent(err)
		}
		last = err
		return v, err
	}, backoff.WithBackOff(clientBackoff()), backoff.WithMaxElapsedTime(0)) // ctx bounds the attempts
	if err != nil && ctx.Err() != nil && last != nil {
		return v, fmt.Errorf("%w (gave up: %w)", last, context.Cause(ctx))
	}
	return v, err
}

// clientBackoff is the waits between attempts of a request that failed for
// a busy service: a fifth of a second, doubling to at most five seconds
// (each give or take half, so that many clients failed at once do not come
// back at once).
func clientBackoff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: 200 * time.Millisecond, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: 5 * time.Second}
}

// Transient says whether err, a failed request to Temporal while ctx
// lives, is the service unreachable, or it or a worker busy or slow (one RPC's
// deadline, the SDK's update timeout-or-canceled, unavailable, resource
// exhausted), which a later attempt may not meet. With ctx ended, nothing
// is: the caller gave up.
func Transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var updateTimeout *client.WorkflowUpdateServiceTimeoutOrCanceledError
	var deadline *serviceerror.DeadlineExceeded
	var unavailable *serviceerror.Unavailable
	var exhausted *serviceerror.ResourceExhausted
	if errors.As(err, &updateTimeout) || errors.As(err, &deadline) || errors.As(err, &unavailable) || errors.As(err, &exhausted) ||
		errors.Is(err, context.DeadlineExceeded) { // an RPC's own deadline: ctx lives
		return true
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted:
		return true
	}
	return false
}

// ranBeforeWait bounds ranBefore's question to a run that ended, which
// answers at once; one that does not has not completed the update (or the
// service is too slow to say, and the retry goes ahead).
const ranBeforeWait = 10 * time.Second

// ranBefore is a handle of update updateID of workflow id if the run of
// it that ended last has it (the current run if it ended, else the run it
// continues), or nil: a retry of StartTurn whose first request's turn ran
// there and then its run ended. (The current run, running, dedupes the
// retry itself.) Asking the ended run for the update's outcome does not
// wait: it has the update completed or not at all (ranBeforeWait).
func ranBefore(ctx context.Context, c client.Client, id, updateID string) (client.WorkflowUpdateHandle, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	run := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		events := c.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		if !events.HasNext() {
			return nil, nil
		}
		first, err := events.Next()
		if err != nil {
			return nil, err
		}
		if run = first.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId(); run == "" {
			return nil, nil
		}
	}
	h := c.GetWorkflowUpdateHandle(client.GetWorkflowUpdateHandleOptions{WorkflowID: id, RunID: run, UpdateID: updateID})
	pctx, cancel := context.WithTimeout(ctx, ranBeforeWait)
	defer cancel()
	var svc serviceerror.ServiceError
	switch err := h.Get(pctx, nil); {
	case errors.As(err, &notFound), pctx.Err() != nil && ctx.Err() == nil: // not there, or not completed there: not run
		return nil, nil
	case errors.As(err, &svc) || Transient(ctx, err):
		return nil, err // asking failed; the outcome itself is not a ServiceError
	}
	return h, nil
}

// endedState is the state session id's workflow ended idle with, or none
// when it runs (the turn joins it), never ran, or ended otherwise (failed,
// terminated: its state is not its result).
func endedState(ctx context.Context, c client.Client, id string) (SessionState, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, SessionWorkflowID(id), "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return SessionState{}, nil
	case err != nil:
		return SessionState{}, fmt.Errorf("session %s (workflow %s): %w", id, SessionWorkflowID(id), err)
	case desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return SessionState{}, nil
	}
	var st SessionState
	if err := c.GetWorkflow(ctx, SessionWorkflowID(id), "").Get(ctx, &st); err != nil {
		return SessionState{}, fmt.Errorf("session %s: the state its workflow ended with: %w", id, err)
	}
	return st, nil
}
