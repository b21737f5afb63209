package temporal

import (
	"context"
	"time"

	"go.temporal.io/sdk/workflow"
)

// workflowKey is the key of the workflow context a Go context's code runs
// in (see scope).
type workflowKey struct{}

// withWorkflow is gctx, whose code runs in the workflow coroutine of w.
func withWorkflow(gctx context.Context, w workflow.Context) context.Context {
	return context.WithValue(gctx, workflowKey{}, w)
}

// scope is the workflow context gctx's code runs in, else def. A blocking
// workflow call (an activity's Get, a timer) must be made with the context
// of the coroutine that makes it, and is canceled with it: the engine and
// the pipeline runner pass Go contexts down to the stand-ins of the
// model, tools and hooks, which find theirs here.
func scope(gctx context.Context, def workflow.Context) workflow.Context {
	if w, ok := gctx.Value(workflowKey{}).(workflow.Context); ok {
		return w
	}
	return def
}

// executor is pipeline.Executor in workflow code: time is the workflow's,
// a timeout a workflow timer, a parallel branch a workflow coroutine.
// Every Go context it makes is paired with a workflow context, canceled
// with it, so that ending a stage (its timeout, a first_success join, the
// run's end) cancels the activities and timers it waits on; and no code
// of it blocks on a Go channel, which workflow code may not.
type executor struct{ ctx workflow.Context }

// Now is the workflow's time.
func (e executor) Now() time.Time { return workflow.Now(e.ctx) }

// Sleep is a workflow timer, ended early by gctx's end.
func (e executor) Sleep(gctx context.Context, d time.Duration) error {
	if err := workflow.Sleep(scope(gctx, e.ctx), d); err != nil && gctx.Err() == nil {
		return err
	}
	return gctx.Err()
}

// pair makes a Go context under gctx and a workflow context under gctx's,
// and the function that ends both, the Go one with a cause.
func (e executor) pair(gctx context.Context) (context.Context, workflow.Context, func(cause error)) {
	w, wcancel := workflow.WithCancel(scope(gctx, e.ctx))
	c, cancel := context.WithCancelCause(gctx)
	return withWorkflow(c, w), w, func(cause error) { cancel(cause); wcancel() }
}

// WithCancel is context.WithCancel, the workflow's context included.
func (e executor) WithCancel(gctx context.Context) (context.Context, context.CancelFunc) {
	c, _, end := e.pair(gctx)
	return c, func() { end(context.Canceled) }
}

// WithTimeout is context.WithTimeout on a workflow timer: at d, the
// context ends with the cause context.DeadlineExceeded.
func (e executor) WithTimeout(gctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c, w, end := e.pair(gctx)
	if d <= 0 {
		end(context.DeadlineExceeded)
	} else {
		workflow.Go(w, func(t workflow.Context) {
			if workflow.NewTimer(t, d).Get(t, nil) == nil {
				end(context.DeadlineExceeded)
			}
		})
	}
	return c, func() { end(context.Canceled) }
}

// ForEach runs fn for each i in a workflow coroutine of its own, at most
// limit at once. A call whose turn never came because gctx ended runs
// with the ended context (fn tells it so).
func (e executor) ForEach(gctx context.Context, n, limit int, fn func(context.Context, int)) {
	w := scope(gctx, e.ctx)
	slots := workflow.NewSemaphore(w, int64(max(limit, 1)))
	wg := workflow.NewWaitGroup(w)
	for i := range n {
		wg.Add(1)
		workflow.Go(w, func(b workflow.Context) {
			defer wg.Done()
			if slots.Acquire(b, 1) == nil {
				defer slots.Release(1)
			}
			fn(withWorkflow(gctx, b), i)
		})
	}
	wg.Wait(w)
}
