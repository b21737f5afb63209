package temporal

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/morphhost/morph/internal/safetext"
)

// NewWorker is a worker of taskQueue that runs TurnWorkflow,
// SessionWorkflow and PipelineWorkflow, and their activities with a: start
// it with Run or Start. Its options are a's [temporal] table's: every
// activity heartbeats every heartbeat_interval while it runs (the SDK
// sends each, rather than batching them to most of the heartbeat
// timeout), its failures are classified by attempts, its results go
// through a's result journal (journalInterceptor, inside attempts, so that
// the heartbeats go on while a record is written), and a workflow's next
// step waits sticky_timeout for this worker before another takes it. It
// also serves a task queue of its own, where workflows send it the end of
// their sessions (EndSession; see sessionend.go).
func NewWorker(c client.Client, taskQueue string, a *Activities) worker.Worker {
	t := a.cfg.Temporal.WithDefaults()
	a.tc, a.queue = c, taskQueue
	id := workerIdentity()
	w := worker.New(c, taskQueue, worker.Options{
		Identity:                         id,
		StickyScheduleToStartTimeout:     t.StickyTimeout,
		DefaultHeartbeatThrottleInterval: t.HeartbeatInterval,
		MaxHeartbeatThrottleInterval:     t.HeartbeatInterval,
		Interceptors: []interceptor.WorkerInterceptor{&attempts{every: t.HeartbeatInterval, log: a.log},
			&journalInterceptor{j: a.journal, log: a.log}},
	})
	w.RegisterWorkflow(TurnWorkflow)
	w.RegisterWorkflow(SessionWorkflow)
	w.RegisterWorkflow(PipelineWorkflow)
	w.RegisterActivity(a)
	q, _ := workerQueue(taskQueue, id)
	own := worker.New(c, q, worker.Options{Identity: id, DisableWorkflowWorker: true})
	own.RegisterActivityWithOptions(a.EndSession, activity.RegisterOptions{Name: "EndSession"})
	return &queueWorker{Worker: w, own: own}
}

// attempts is what a worker does around each activity attempt: it
// heartbeats every every while the attempt runs, so that a lost worker is
// seen after the heartbeat timeout, and it tells a lost attempt from the
// call's own failure (lostAttempt), and a panic from either (recovered).
type attempts struct {
	interceptor.WorkerInterceptorBase
	every time.Duration
	log   *slog.Logger
}

// InterceptActivity wraps each activity attempt.
func (a *attempts) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &attempt{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, every: a.every, log: a.log}
}

// attempt is one activity attempt (see attempts).
type attempt struct {
	interceptor.ActivityInboundInterceptorBase
	every time.Duration
	log   *slog.Logger
}

// ExecuteActivity runs the attempt, heartbeating.
func (a *attempt) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	defer heartbeat(ctx, a.every)()
	out, err := recovered(ctx, a.log, func() (any, error) { return a.Next.ExecuteActivity(ctx, in) })
	return out, lostAttempt(ctx, err)
}

// recovered runs fn, an activity's attempt or the call in it, and turns
// its panic into a failure, its stack logged (escaped): the call's own
// failure, not retried, while the attempt's context ctx lives (the SDK's
// default, a retryable PanicError, would make the call again); a lost
// attempt once ctx has ended (what panicked then may be the end itself).
// The journal records the former (journalActivity), as any failure of
// the call's own.
func recovered(ctx context.Context, log *slog.Logger, fn func() (any, error)) (out any, err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		name := activity.GetInfo(ctx).ActivityType.Name
		log.ErrorContext(ctx, "activity panicked", "activity", name, "panic", safetext.Escape(fmt.Sprint(p)), "stack", safetext.Escape(string(debug.Stack())))
		out, err = nil, lostAttempt(ctx, nonRetryable("panic", fmt.Errorf("%s panicked: %v", name, p)))
	}()
	return fn()
}

// AttemptLost is the type (temporal.ApplicationError's Type) of the
// failure of an activity attempt that ended before its call did: its
// context ended (its start-to-close timeout passed, Temporal canceled it
// after a missed heartbeat or for the workflow, its worker is stopping),
// and what the call returned then is not its answer.
const AttemptLost = "AttemptLost"

// lostAttempt is err, an activity attempt's failure, as Temporal should
// take it. When the attempt's context ctx ended, the attempt was lost (a
// starved worker past its timeout, a lost heartbeat, a stopping worker)
// and the failure is retryable, whatever the call returned: Temporal gives
// the call to a worker again (or records the cancel the workflow asked
// for). Otherwise err is the call's own failure, its answer, which the
// activity returned non-retryable (nonRetryable). The test is the
// activity's context, not err: a model client's own deadline on a call
// (context.DeadlineExceeded in err while ctx is live) is the call's
// answer.
//
// A failure of the result journal is left as it is, non-retryable: the
// call may have been made, and its result is not recorded (journalFailed).
func lostAttempt(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || journalFailed(err) {
		return err
	}
	return temporal.NewApplicationErrorWithCause("the activity's attempt ended before its call did: "+safetext.Truncate(err.Error(), failureMessage),
		AttemptLost, context.Cause(ctx))
}

// failureMessage is the most of an error's text an activity's failure
// carries (safetext.Truncate): the failure is in the workflow's history as
// it is, and a model server's or a plugin's error could be any size.
const failureMessage = 4 << 10
