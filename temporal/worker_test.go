package temporal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/morphhost/morph/llm"
)

// retryable says whether Temporal would run an activity again after err:
// nil for no failure.
func retryable(err error) *bool {
	if err == nil {
		return nil
	}
	var appErr *temporal.ApplicationError
	r := !errors.As(err, &appErr) || !appErr.NonRetryable()
	return &r
}

// A failure is the call's answer (non-retryable) while the attempt's
// context lives, its deadline errors included (the model client's own
// timeout); once the attempt's context has ended (its timeout, a cancel
// after a missed heartbeat, a stopping worker), it is a lost attempt,
// retried, whatever the call returned, but for the journal's failure (the
// call may have been made, its result not recorded). Either failure's message, kept in
// the history as it is, is at most failureMessage bytes and a note.
func TestLostAttemptIsRetried(t *testing.T) {
	live := context.Background()
	timedOut, cancel := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer cancel()
	stopping, stop := context.WithCancelCause(live)
	stop(errors.New("worker is shutting down"))
	ownDeadline := fmt.Errorf("chat stopped after 1 attempt: %w", context.DeadlineExceeded)
	for _, c := range []struct {
		name  string
		ctx   context.Context
		err   error
		retry *bool
	}{
		{"no failure", live, nil, nil},
		{"the client's own timeout", live, nonRetryable("model call", ownDeadline), new(bool)},
		{"a tool's failure", live, nonRetryable("tool call", errors.New("no such file")), new(bool)},
		{"the attempt timed out", timedOut, nonRetryable("model call", ownDeadline), ptr(true)},
		{"the worker stops", stopping, nonRetryable("model call", context.Canceled), ptr(true)},
		{"the worker stops, a plain error", stopping, errors.New("read: connection reset"), ptr(true)},
		{"a huge error", live, nonRetryable("model call", errors.New(strings.Repeat("x", 100<<10))), new(bool)},
		{"a huge error, the worker stops", stopping, errors.New(strings.Repeat("x", 100<<10)), ptr(true)},
		{"the journal failed, then the worker stops", stopping, temporal.NewNonRetryableApplicationError("result journal: disk full", journalFailure, nil), new(bool)},
	} {
		err := lostAttempt(c.ctx, c.err)
		if got, want := deref(retryable(err)), deref(c.retry); got != want {
			t.Errorf("%s: %v: retryable %v, want %v", c.name, err, got, want)
		}
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && len(appErr.Message()) > failureMessage+200 {
			t.Errorf("%s: the failure's message is %d bytes, more than %d and its note", c.name, len(appErr.Message()), failureMessage)
		}
		if c.retry == nil || !*c.retry {
			continue
		}
		if !errors.As(err, &appErr) {
			t.Errorf("%s: %v (%T), want an application error", c.name, err, err)
		} else if appErr.Type() != AttemptLost {
			t.Errorf("%s: a failure of type %q, want %s", c.name, appErr.Type(), AttemptLost)
		}
		if cause := context.Cause(c.ctx); !errors.Is(err, cause) {
			t.Errorf("%s: %v, want it caused by %v", c.name, err, cause)
		}
	}
}

func ptr(b bool) *bool { return &b }

func deref(b *bool) string {
	if b == nil {
		return "(no failure)"
	}
	return fmt.Sprint(*b)
}

// timingOut is a model client whose own deadline on a call has passed.
type timingOut struct{}

func (timingOut) Chat(context.Context, llm.Request) (llm.Result, error) {
	return llm.Result{}, fmt.Errorf("chat stopped after 1 attempt: %w", context.DeadlineExceeded)
}

// slowModel is a model client that answers a final after 100 ms.
type slowModel struct{}

func (slowModel) Chat(context.Context, llm.Request) (llm.Result, error) {
	time.Sleep(100 * time.Millisecond)
	return llm.Result{Text: `{"type":"final","final":{"thought":"t","output":1}}`}, nil
}

// slowTool is an embedding host's tool that answers after 100 ms.
type slowTool struct{}

func (slowTool) Name() string            { return "slow" }
func (slowTool) Description() string     { return "Takes its time." }
func (slowTool) ParameterSchema() string { return `{"type":"object"}` }
func (slowTool) Execute(context.Context, map[string]any) (string, error) {
	time.Sleep(100 * time.Millisecond)
	return "done", nil
}

// activityEnv is an activity environment with a worker's attempts
// (heartbeats every 10 ms) and a's activities, counting heartbeats.
func activityEnv(a *Activities, beats *atomic.Int32) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quiet)
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&attempts{every: 10 * time.Millisecond}}})
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats.Add(1) })
	env.RegisterActivity(a)
	return env
}

// Every activity heartbeats while it runs (a model call, a tool call:
// neither does by itself), and a model call that the client's own
// deadline ended, on a worker whose attempt lives, is the call's answer.
func TestActivitiesHeartbeat(t *testing.T) {
	a := newActivities(t, finalConfig(t))
	a.client = slowModel{}
	a.rt.Engine.Registry().Register(slowTool{})
	for _, c := range []struct {
		name string
		run  func(*testsuite.TestActivityEnvironment) (converter.EncodedValue, error)
	}{
		{"Chat", func(env *testsuite.TestActivityEnvironment) (converter.EncodedValue, error) {
			return env.ExecuteActivity(a.Chat, ChatRequest{})
		}},
		{"CallTool", func(env *testsuite.TestActivityEnvironment) (converter.EncodedValue, error) {
			return env.ExecuteActivity(a.CallTool, ToolCall{Tool: "slow"})
		}},
	} {
		var beats atomic.Int32
		if _, err := c.run(activityEnv(a, &beats)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if beats.Load() == 0 {
			t.Errorf("%s, 100 ms long, recorded no heartbeat", c.name)
		}
	}

	a.client = timingOut{}
	var beats atomic.Int32
	_, err := activityEnv(a, &beats).ExecuteActivity(a.Chat, ChatRequest{})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("the client's own timeout: %v (%T), want an application error", err, err)
	}
	if !appErr.NonRetryable() {
		t.Errorf("the client's own timeout: %v, retryable; want it non-retryable", err)
	}
	if want := "chat stopped after 1 attempt"; !strings.Contains(appErr.Message(), want) {
		t.Errorf("the client's own timeout: message %q, want it to say %q", appErr.Message(), want)
	}
}

// blocking is an embedding host's tool whose first call waits for its
// context's end, and whose later calls answer at once.
type blocking struct {
	calls   *atomic.Int32
	started chan struct{}
}

func (blocking) Name() string            { return "wait" }
func (blocking) Description() string     { return "Waits." }
func (blocking) ParameterSchema() string { return `{"type":"object"}` }
func (b blocking) Execute(ctx context.Context, _ map[string]any) (string, error) {
	if b.calls.Add(1) == 1 {
		close(b.started)
		<-ctx.Done()
		return "", ctx.Err()
	}
	return "done", nil
}

// A worker stopped while a tool call of the embedding host's runs, a call
// nothing bounds (its timeout is ActivityTimeout, 10 minutes): the call's
// heartbeats stop, and another worker makes it again after the heartbeat
// timeout, seconds; its answer is the turn's observation, not the first
// attempt's "context canceled".
func TestStoppedWorkersCallIsTakenUp(t *testing.T) {
	c := dev(t)
	var calls atomic.Int32
	tool := blocking{calls: &calls, started: make(chan struct{})}
	queue := "q-" + t.Name()
	start := func() worker.Worker {
		a := newActivities(t, loadConfig(t, "",
			`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"wait","tool_params":{}}}`,
			`{"type":"final","final":{"thought":"done","output":1}}`))
		a.rt.Engine.Registry().Register(tool)
		w := NewWorker(c, queue, a)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		return w
	}
	first := start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, TurnWorkflow, TurnInput{SessionID: "s", Task: "wait"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-tool.started:
	case <-ctx.Done():
		t.Fatal("the tool was never called")
	}
	start()
	first.Stop()
	var res TurnResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Final == nil {
		t.Errorf("no final: %+v", res)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d tool calls, want 2", n)
	}
	if len(res.Steps) != 2 {
		t.Fatalf("steps %+v, want 2", res.Steps)
	}
	if obs := res.Steps[0].Observation; obs != "done" {
		t.Errorf("step 1's observation %q, want the second call's, done", obs)
	}
}

// A worker killed with SIGKILL while a model call waits for the model,
// the call's timeout a minute (the client's): Temporal sees the worker
// lost by its missed heartbeats, not by the call's timeout, and another
// worker makes the call again (its attempt 2, after a heartbeat timeout)
// and finishes the turn, repeating nothing that finished.
func TestKilledWorkerSeenByHeartbeat(t *testing.T) {
	c := dev(t)
	model := newModelServer(t, killReplies...)
	model.hold = true
	w := newWorkers(t, model, "")
	res, run, took := w.killMidTurn(c, "6*7?", secondModelCall(model))
	t.Logf("the second worker ended the turn %s after the kill", took.Round(10*time.Millisecond))
	checkTurn(t, "the turn", res, "42", 3)
	nothingRepeated(t, model, w)
	var retried *historypb.ActivityTaskStartedEventAttributes
	for _, ev := range workflowEvents(t, c, run.GetID(), run.GetRunID()) {
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
			retried = a
		}
	}
	if tf := retried.GetLastFailure().GetTimeoutFailureInfo(); retried.GetAttempt() != 2 || tf.GetTimeoutType() != enumspb.TIMEOUT_TYPE_HEARTBEAT {
		t.Errorf("the call's retry: attempt %d after %v; want attempt 2 after a heartbeat timeout", retried.GetAttempt(), retried.GetLastFailure())
	}
}
