package temporal

import (
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// NewWorker is a worker of taskQueue that runs TurnWorkflow,
// SessionWorkflow and PipelineWorkflow, and their activities with a,
// through a's result journal: start it with Run or Start.
func NewWorker(c client.Client, taskQueue string, a *Activities) worker.Worker {
	return newWorker(c, taskQueue, a, worker.Options{})
}

// newWorker is NewWorker with opts (the tests' shorten the sticky
// queue's timeout).
func newWorker(c client.Client, taskQueue string, a *Activities, opts worker.Options) worker.Worker {
	opts.Interceptors = append(opts.Interceptors, &journalInterceptor{j: a.journal, log: a.log})
	w := worker.New(c, taskQueue, opts)
	w.RegisterWorkflow(TurnWorkflow)
	w.RegisterWorkflow(SessionWorkflow)
	w.RegisterWorkflow(PipelineWorkflow)
	w.RegisterActivity(a)
	return w
}
