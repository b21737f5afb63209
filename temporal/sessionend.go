package temporal

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// A session's end reaches every worker of its task queue. A worker's
// plugins in session isolation keep an instance per session, which a
// local engine releases when its session ends (engine.Session.Close). A
// workflow's sessions end in workflow code, and any worker may hold an
// instance of one: each worker served some of its calls. So each worker
// also polls a task queue of its own (workerQueue), which its identity
// names; when the workflow's engine closes a session, the workflow asks
// one worker for the workers polling the queue lately (Workers) and sends
// EndSession to each one's queue. A worker that died meanwhile has no
// instance left; its EndSession waits endScheduleTimeout, then is given
// up. Without it, a worker's instances of ended sessions would stay until
// session_idle, and count against its plugins' max_sessions meanwhile.

const (
	// sessionEndVersion marks, in a workflow's history, the code that ends
	// sessions on the workers: a workflow that started before it replays
	// without (workflow.GetVersion).
	sessionEndVersion = "morph.session-end"
	// endScheduleTimeout is how long an EndSession waits for its worker to
	// take it: a live worker polls its queue all the time and takes it in
	// milliseconds; one that died does not, and costs the session's end
	// this long.
	endScheduleTimeout = 5 * time.Second
	// endSessionTimeout bounds an EndSession on its worker: the session's
	// instances are released, each plugin's morph_destroy bounded by its
	// timeout.
	endSessionTimeout = 10 * time.Second
	// pollerFresh is how recently a worker must have polled the task
	// queue to be sent a session's end. A live worker polls at least once
	// a minute (a long poll lasts about a minute when no task comes).
	pollerFresh = 90 * time.Second
	// identityMark is what a morph worker's identity has before its
	// nonce: a poller whose identity has none (another program, a worker
	// of a morph from before workerQueue) has no queue of its own.
	identityMark = "@morph-worker-"
)

// workerIdentity is a new worker's identity: the SDK's default (process
// ID and host name) and a nonce, which tell apart two workers of one
// process, as the tests start them.
func workerIdentity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s%s%s", os.Getpid(), host, identityMark, rand.Text()[:10])
}

// workerQueue is the task queue of its own of the worker of taskQueue
// whose identity is id, or false when that worker has none.
func workerQueue(taskQueue, id string) (string, bool) {
	if !strings.Contains(id, identityMark) {
		return "", false
	}
	return taskQueue + "/" + id, true
}

// Workers are the task queues of their own (workerQueue) of the workers
// that polled the worker's task queue for activities in the last
// pollerFresh, sorted.
//
// A failure to ask Temporal is retried (the service may be restarting);
// a worker not made by NewWorker (an embedder's, registering a) cannot
// ask, and says so.
func (a *Activities) Workers(ctx context.Context) ([]string, error) {
	if a.tc == nil {
		return nil, nonRetryable("workers", errors.New("this worker was not made by temporal.NewWorker, and serves no queue of its own"))
	}
	resp, err := a.tc.DescribeTaskQueue(ctx, a.queue, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil {
		return nil, fmt.Errorf("describe task queue %s: %w", a.queue, err)
	}
	var out []string
	for _, p := range resp.GetPollers() {
		if time.Since(p.GetLastAccessTime().AsTime()) > pollerFresh {
			continue
		}
		if q, ok := workerQueue(a.queue, p.GetIdentity()); ok {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// EndSession ends session id on the worker's engine, as a local engine's
// Session.Close does: its plugins in session isolation release their
// instances of it.
func (a *Activities) EndSession(ctx context.Context, id string) error {
	return nonRetryable("end session", a.rt.Engine.ResumeSession(id, nil).Close(ctx))
}

// endSessions is the SessionEnd of one of the workflow engine's
// middleware (stubMiddleware): it ends the session on every worker (see
// the top of this file), in ctx's workflow, or in the one the call's Go
// context carries (scope), unless the session called no plugin (calls
// counts its calls): no worker holds anything of it then. The session's
// counts go with it, so that a long run's ended sessions do not pile up
// in the workflow's state. It runs in a disconnected workflow context: a
// session ends as its stage or turn does, canceled or not. A failure is
// logged, not the session's: its instances expire.
func endSessions(ctx workflow.Context, calls sessionCalls) func(context.Context, string) error {
	return func(gctx context.Context, id string) error {
		if len(calls[id]) == 0 {
			return nil
		}
		delete(calls, id)
		wctx, _ := workflow.NewDisconnectedContext(scope(gctx, ctx))
		if workflow.GetVersion(wctx, sessionEndVersion, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return nil
		}
		log := workflow.GetLogger(wctx)
		var queues []string
		lctx := withTimeout(wctx, setupTimeout)
		if err := workflow.ExecuteActivity(lctx, acts.Workers).Get(lctx, &queues); err != nil {
			log.Warn("a session did not end on the workers: their instances of it expire after session_idle", "session", id, "error", err)
			return fmt.Errorf("session %s did not end on the workers, whose instances of it expire after session_idle: %w", id, err)
		}
		futures := make([]workflow.Future, len(queues))
		for i, q := range queues {
			qctx := workflow.WithActivityOptions(wctx, workflow.ActivityOptions{TaskQueue: q, ScheduleToStartTimeout: endScheduleTimeout,
				StartToCloseTimeout: endSessionTimeout, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
			futures[i] = workflow.ExecuteActivity(qctx, acts.EndSession, id)
		}
		var errs []error
		for i, f := range futures {
			if err := f.Get(wctx, nil); err != nil {
				log.Warn("a worker did not end a session: its instances of it expire after session_idle", "session", id, "queue", queues[i], "error", err)
				errs = append(errs, fmt.Errorf("worker queue %s: %w", queues[i], err))
			}
		}
		return errors.Join(errs...)
	}
}

// queueWorker is a worker of a task queue and of its own queue
// (workerQueue), which serves EndSession: started and stopped together.
type queueWorker struct {
	worker.Worker
	own worker.Worker
}

// Start starts both workers.
func (w *queueWorker) Start() error {
	if err := w.own.Start(); err != nil {
		return err
	}
	if err := w.Worker.Start(); err != nil {
		w.own.Stop()
		return err
	}
	return nil
}

// Run starts the worker of its own queue, runs the task queue's until
// interruptCh says, and stops both.
func (w *queueWorker) Run(interruptCh <-chan any) error {
	if err := w.own.Start(); err != nil {
		return err
	}
	defer w.own.Stop()
	return w.Worker.Run(interruptCh)
}

// Stop stops both workers: the task queue's first, so that no call of a
// session starts once its end can no longer be heard.
func (w *queueWorker) Stop() {
	w.Worker.Stop()
	w.own.Stop()
}
