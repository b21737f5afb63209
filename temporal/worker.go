package temporal

import (
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// NewWorker is a worker of taskQueue that runs TurnWorkflow,
// SessionWorkflow and PipelineWorkflow, and their activities with a: start
// it with Run or Start.
func NewWorker(c client.Client, taskQueue string, a *Activities) worker.Worker {
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(TurnWorkflow)
	w.RegisterWorkflow(SessionWorkflow)
	w.RegisterWorkflow(PipelineWorkflow)
	w.RegisterActivity(a)
	return w
}
