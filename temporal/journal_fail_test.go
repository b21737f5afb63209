package temporal

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// loseFirst is a worker that dies after its first attempt of each call has
// ended, before Temporal records how: that attempt is lost.
type loseFirst struct {
	interceptor.WorkerInterceptorBase
}

func (*loseFirst) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &lostReport{interceptor.ActivityInboundInterceptorBase{Next: next}}
}

type lostReport struct {
	interceptor.ActivityInboundInterceptorBase
}

func (l *lostReport) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	out, err := l.Next.ExecuteActivity(ctx, in)
	if activity.GetInfo(ctx).Attempt == 1 {
		return nil, temporal.NewApplicationError("the worker died before reporting", AttemptLost)
	}
	return out, err
}

// A call's own failure, and its panic, is recorded as its answer: the
// attempt after a worker died before Temporal recorded that failure
// answers it again, non-retryable, without calling again.
func TestJournalRecordsFailures(t *testing.T) {
	for _, c := range []struct {
		name string
		call func() (ToolResult, error)
		msg  string
	}{
		{"a failure", func() (ToolResult, error) {
			return ToolResult{}, nonRetryable("tool call", errors.New("this worker has no tool"))
		}, "this worker has no tool"},
		{"a panic", func() (ToolResult, error) { panic("boom") }, "CallTool panicked: boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, _ := testJournal(t, 1<<20)
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			log := slog.New(slog.DiscardHandler)
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&loseFirst{},
				&attempts{every: time.Hour, log: log}, &journalInterceptor{j: j, log: log}}})
			calls := 0
			env.RegisterActivityWithOptions(func(context.Context, ToolCall) (ToolResult, error) {
				calls++
				return c.call()
			}, activity.RegisterOptions{Name: "CallTool"})
			env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
				var res ToolResult
				return call(context.Background(), ctx, time.Minute, "CallTool", &res, ToolCall{Tool: "ledger"})
			}, workflow.RegisterOptions{Name: "tool"})
			env.ExecuteWorkflow("tool")
			err := env.GetWorkflowError()
			if err == nil || !strings.HasSuffix(err.Error(), c.msg) || calls != 1 {
				t.Errorf("%v after %d calls: want the failure %q after one", err, calls, c.msg)
			}
		})
	}
}
