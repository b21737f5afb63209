package temporal

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/morphhost/morph/config"
)

// faults fails the first pollFails polls of an update's outcome and the
// first historyFails long polls of a workflow's history (poll), as one
// long poll that ends without an answer does (the SDK makes the first a
// WorkflowUpdateServiceTimeoutOrCanceledError), and, a client interceptor,
// the first startFails
// update-with-starts, after sending them, with a deadline, as a busy
// worker that accepts the update after the RPC's deadline does.
type faults struct {
	interceptor.ClientInterceptorBase
	pollFails, startFails, historyFails int32
	polls, starts, histories            atomic.Int32
	// answerLost answers to a gate are sent, then reported failed with a
	// deadline, as a reply lost by a busy service; answers counts them all
	answerLost int32
	answers    atomic.Int32
	updateIDs  chan string // of each update-with-start sent
	// lost, when set, is called with the handle of an update-with-start
	// before its failure is injected
	lost func(context.Context, client.WorkflowUpdateHandle)
}

func (f *faults) InterceptClient(next interceptor.ClientOutboundInterceptor) interceptor.ClientOutboundInterceptor {
	return &faultsOut{ClientOutboundInterceptorBase: interceptor.ClientOutboundInterceptorBase{Next: next}, f: f}
}

type faultsOut struct {
	interceptor.ClientOutboundInterceptorBase
	f *faults
}

// poll is a gRPC interceptor that fails the first pollFails polls of an
// update's outcome and historyFails long polls of a history with a
// deadline, before sending them: the SDK's interceptors do not expose
// PollWorkflowUpdate's input.
func (f *faults) poll(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == workflowservice.WorkflowService_PollWorkflowExecutionUpdate_FullMethodName && f.polls.Add(1) <= f.pollFails {
		return status.Error(codes.DeadlineExceeded, "injected: the long poll's deadline")
	}
	if r, ok := req.(*workflowservice.GetWorkflowExecutionHistoryRequest); ok && r.GetWaitNewEvent() && f.histories.Add(1) <= f.historyFails {
		return status.Error(codes.DeadlineExceeded, "injected: the long poll's deadline")
	}
	if r, ok := req.(*workflowservice.UpdateWorkflowExecutionRequest); ok && r.GetRequest().GetInput().GetName() == UpdateAnswer {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if f.answers.Add(1) <= f.answerLost {
			return status.Error(codes.DeadlineExceeded, "injected: the reply's deadline")
		}
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (o *faultsOut) UpdateWithStartWorkflow(ctx context.Context, in *interceptor.ClientUpdateWithStartWorkflowInput) (client.WorkflowUpdateHandle, error) {
	o.f.updateIDs <- in.UpdateOptions.UpdateID
	h, err := o.Next.UpdateWithStartWorkflow(ctx, in)
	if err == nil && o.f.starts.Add(1) <= o.f.startFails {
		if o.f.lost != nil {
			o.f.lost(ctx, h)
		}
		return nil, fmt.Errorf("failed workflow update: %w", serviceerror.NewDeadlineExceeded("injected: context deadline exceeded"))
	}
	return h, err
}

// calcQueue starts a worker of c whose scripted model answers replies
// (calcTurns: a turn asks calc for 6*7, then answers 42), and returns its
// queue.
func calcQueue(t *testing.T, c client.Client, replies []string) string {
	t.Helper()
	cfg, err := config.Load(writeConfig(t, replies...))
	if err != nil {
		t.Fatal(err)
	}
	return startWorker(t, c, cfg)
}

// want42 fails t unless res is a calc turn's answer, 42.
func want42(t *testing.T, res TurnResult) {
	t.Helper()
	if res.Final == nil || fmt.Sprint(res.Final.Output) != "42" {
		t.Errorf("turn result %+v, want the output 42", res)
	}
}

// faultyClient is a client of the dev server whose requests f fails.
func faultyClient(t *testing.T, f *faults) client.Client {
	t.Helper()
	dev(t)
	srv, _ := devServer()
	f.updateIDs = make(chan string, 16)
	c, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Logger: quiet, Interceptors: []interceptor.ClientInterceptor{f},
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(f.poll)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A wait for a turn's result whose long poll ends without it (the SDK's
// WorkflowUpdateServiceTimeoutOrCanceledError, the caller's context alive)
// polls again: WaitTurn answers the turn's result.
func TestWaitTurnPollsAgain(t *testing.T) {
	f := &faults{pollFails: 2}
	c := faultyClient(t, f)
	queue := calcQueue(t, c, calcTurns[:2])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := StartTurn(ctx, c, queue, "poll-"+t.Name(), SessionLimits{}, SessionTurn{Task: "what is 6*7?"})
	if err != nil {
		t.Fatal(err)
	}
	var res TurnResult
	if err := WaitTurn(ctx, h, &res); err != nil {
		t.Fatalf("WaitTurn after %d polls: %v", f.polls.Load(), err)
	}
	want42(t, res)
	if n := f.polls.Load(); n != 3 {
		t.Errorf("%d polls of the update, want 3 (two failed)", n)
	}
	// the caller's own end is not waited past
	gone, stop := context.WithCancel(ctx)
	stop()
	f.polls.Store(0)
	var timeout *client.WorkflowUpdateServiceTimeoutOrCanceledError
	if err := WaitTurn(gone, h, &res); !errors.As(err, &timeout) || f.polls.Load() != 1 {
		t.Errorf("WaitTurn with its context ended: %v after %d polls; want the first poll's error", err, f.polls.Load())
	}
}

// A wait for a workflow's result whose long poll of its history fails
// with a deadline (the SDK's retries leave DeadlineExceeded to the caller)
// polls again: WaitRun answers the result.
func TestWaitRunPollsAgain(t *testing.T) {
	f := &faults{historyFails: 1}
	c := faultyClient(t, f)
	queue := calcQueue(t, c, calcTurns[:2])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, TurnWorkflow, TurnInput{SessionID: "s", Task: "what is 6*7?"})
	if err != nil {
		t.Fatal(err)
	}
	var res TurnResult
	if err := WaitRun(ctx, run, &res); err != nil {
		t.Fatalf("WaitRun after %d long polls: %v", f.histories.Load(), err)
	}
	want42(t, res)
	if n := f.histories.Load(); n < 2 {
		t.Errorf("%d long polls of the history, want the failed one and more", n)
	}
}

// An update-with-start of a turn that Temporal admitted, but whose answer
// the client did not get (a deadline: a busy worker accepts it late), is
// sent again with the same update ID, and Temporal answers it with the
// update already admitted: the turn runs once, and its result arrives.
func TestStartTurnRetriedRunsOnce(t *testing.T) {
	f := &faults{startFails: 1}
	c := faultyClient(t, f)
	queue := calcQueue(t, c, calcTurns) // enough replies for a second run of the turn, were there one
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "retry-" + t.Name()
	h, err := StartTurn(ctx, c, queue, id, SessionLimits{}, SessionTurn{Task: "what is 6*7?"})
	if err != nil {
		t.Fatal(err)
	}
	var res TurnResult
	if err := WaitTurn(ctx, h, &res); err != nil {
		t.Fatal(err)
	}
	want42(t, res)
	first, second := <-f.updateIDs, <-f.updateIDs
	if n := f.starts.Load(); n != 2 {
		t.Errorf("%d update-with-starts, want 2", n)
	}
	if first == "" {
		t.Errorf("the update-with-start had no update ID")
	}
	if second != first {
		t.Errorf("the retried update-with-start's update ID %q, want the first's, %q", second, first)
	}
	if h.UpdateID() != first {
		t.Errorf("the handle's update ID %q, want the requests', %q", h.UpdateID(), first)
	}
	if state := sessionState(ctx, t, c, id); state.Turns != 1 || state.ModelCalls != 2 {
		t.Errorf("the session ran %d turns, %d model calls; want the turn once: 1 turn, 2 calls", state.Turns, state.ModelCalls)
	}
	// a turn's own update ID is kept
	h, err = StartTurn(ctx, c, queue, id, SessionLimits{}, SessionTurn{Task: "and plus one?", UpdateID: "mine-" + t.Name()})
	if err != nil || h.UpdateID() != "mine-"+t.Name() {
		t.Fatalf("StartTurn with an update ID: %v, update %q", err, h.UpdateID())
	}
	if err := WaitTurn(ctx, h, &res); err != nil {
		t.Fatalf("the second turn: %v", err)
	}
	if res.Final == nil {
		t.Fatalf("the second turn: %+v, want the output 43", res)
	}
	if out := fmt.Sprint(res.Final.Output); out != "43" {
		t.Errorf("the second turn's output %s, want 43", out)
	}
}

// A retried update-with-start whose first request's turn ran, and whose
// run then continued as new (session_max_turns = 1), all before the retry,
// finds the turn in the run that ended and answers its result: the new
// run, which does not know the update, does not run the turn again.
func TestStartTurnRetriedAfterItsRunEnded(t *testing.T) {
	f := &faults{startFails: 1}
	c := faultyClient(t, f)
	f.lost = func(ctx context.Context, h client.WorkflowUpdateHandle) {
		if err := WaitTurn(ctx, h, &TurnResult{}); err != nil || h.RunID() == "" {
			t.Errorf("the lost turn of run %q: %v", h.RunID(), err)
			return
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			desc, err := c.DescribeWorkflowExecution(ctx, h.WorkflowID(), "")
			if err == nil && desc.GetWorkflowExecutionInfo().GetExecution().GetRunId() != h.RunID() {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("run %s did not continue as new: %v", h.RunID(), err)
				return
			}
		}
	}
	queue := calcQueue(t, c, calcTurns) // enough replies for a second run of the turn, were there one
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "ended-" + t.Name()
	h, err := StartTurn(ctx, c, queue, id, SessionLimits{MaxTurns: 1}, SessionTurn{Task: "what is 6*7?"})
	if err != nil {
		t.Fatal(err)
	}
	var res TurnResult
	if err := WaitTurn(ctx, h, &res); err != nil {
		t.Fatal(err)
	}
	want42(t, res)
	if n, first := f.starts.Load(), <-f.updateIDs; n != 1 || first != h.UpdateID() {
		t.Errorf("%d update-with-starts, of update %q (the handle's %q); want the lost one alone", n, first, h.UpdateID())
	}
	if state := sessionState(ctx, t, c, id); state.Turns != 1 || state.ModelCalls != 2 {
		t.Errorf("the session ran %d turns, %d model calls; want the turn once: 1 turn, 2 calls", state.Turns, state.ModelCalls)
	}
}

// sessionState is session id's state as its workflow's current run
// answers it, once that run has started (a run just continued as new
// knows no query before its first workflow task).
func sessionState(ctx context.Context, t *testing.T, c client.Client, id string) SessionState {
	t.Helper()
	for {
		q, err := c.QueryWorkflow(ctx, SessionWorkflowID(id), "", QuerySession)
		var state SessionState
		if err == nil {
			err = q.Get(&state)
		}
		if err == nil {
			return state
		}
		if ctx.Err() != nil {
			t.Fatalf("session %s's state: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An answer to a human gate whose request reached the workflow, and whose
// reply was lost (a deadline on a busy service), is sent again with the
// same update ID: the workflow dedupes it, so the gate takes the answer
// once and the sender hears it did, not that the gate was answered
// already.
func TestAnswerGateRetriedOnce(t *testing.T) {
	f := &faults{answerLost: 1}
	c := faultyClient(t, f)
	queue := startWorker(t, c, loadConfig(t, "", planReplies...))
	run := startPipeline(t, c, queue, gatePipeline, PipelineInput{})
	if _, q := waitQuestion(t, c, run); q.NodeID != "gate" {
		t.Fatalf("question %+v", q)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := AnswerGate(ctx, c, run.GetID(), 0, AnswerSignal{Node: "gate", Choice: "R", Text: "again"}); err != nil {
		t.Fatalf("AnswerGate after %d sends: %v", f.answers.Load(), err)
	}
	if n := f.answers.Load(); n < 2 {
		t.Errorf("the answer was sent %d times; want the lost one and its retry", n)
	}
	got := pipelineResult(t, run)
	checkPath(t, "the answered run", got, "redo")
	checkHumanText(t, "the answered run", got, "again")
}
