package temporal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
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
			if err == nil || !strings.HasSuffix(err.Error(), c.msg) {
				t.Errorf("workflow error %v, want the failure %q", err, c.msg)
			}
			if calls != 1 {
				t.Errorf("%d calls, want one", calls)
			}
		})
	}
}

// flakyStore is a journal store whose reads fail with an I/O error
// (a shared volume's) the first failures times.
type flakyStore struct {
	PayloadStore
	failures int
	reads    int
}

func (s *flakyStore) Get(key string, max int64) ([]byte, error) {
	if s.reads++; s.reads <= s.failures {
		return nil, fmt.Errorf("%w %s: blob %s: %w", ErrPayload, s, key, syscall.EIO)
	}
	return s.PayloadStore.Get(key, max)
}

// A journal that cannot be read before the call (an I/O error) fails the
// attempt, not the call: no call was made, so the attempt is retried, and
// the call made once the journal reads again; a journal that never reads
// leaves the call without an answer (a *CallError of the journal's) after
// its attempts, never the tool's observation.
func TestJournalUnreadIsRetried(t *testing.T) {
	for _, c := range []struct {
		name     string
		failures int
		calls    int
		want     string
	}{{"once", 1, 1, "appended"}, {"always", 1 << 30, 0, "no answer: journal true, 3 attempts"}} {
		t.Run(c.name, func(t *testing.T) {
			j, _ := testJournal(t, 1<<20)
			j.Store = &flakyStore{PayloadStore: j.Store, failures: c.failures}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			log := slog.New(slog.DiscardHandler)
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{
				&attempts{every: time.Hour, log: log}, &journalInterceptor{j: j, log: log}}})
			calls := 0
			env.RegisterActivityWithOptions(func(context.Context, ToolCall) (ToolResult, error) {
				calls++
				return ToolResult{Output: "appended"}, nil
			}, activity.RegisterOptions{Name: "CallTool"})
			env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (string, error) {
				var res ToolResult
				err := call(context.Background(), workflow.WithRetryPolicy(ctx, retryPolicy(3)), time.Minute, "CallTool", &res, ToolCall{Tool: "ledger"})
				if ce := (*CallError)(nil); errors.As(err, &ce) {
					return fmt.Sprintf("no answer: journal %v, %d attempts", ce.Journal, ce.Attempts), nil
				}
				return res.Output, err
			}, workflow.RegisterOptions{Name: "tool"})
			env.ExecuteWorkflow("tool")
			var got string
			if err := env.GetWorkflowResult(&got); err != nil {
				t.Fatal(err)
			}
			if calls != c.calls || got != c.want {
				t.Errorf("%d calls, %q; want %d, %q", calls, got, c.calls, c.want)
			}
		})
	}
}
