package temporal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/pipeline"
)

// modelServer is an OpenAI-compatible server that answers the n-th model
// call it completes with replies[n-1]: a call whose client goes away before
// the answer (a killed worker's) is aborted, not completed, and does not
// count. With hold set, the call that would complete second waits until
// its client goes away, after sending on arrived.
type modelServer struct {
	*httptest.Server
	mu                 sync.Mutex
	completed, aborted int
	hold               bool
	arrived            chan struct{}
}

func newModelServer(t *testing.T, replies ...string) *modelServer {
	s := &modelServer{arrived: make(chan struct{}, 1)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		n := s.completed + 1
		hold := s.hold && n == 2
		if hold {
			s.hold = false
		}
		s.mu.Unlock()
		if hold {
			s.arrived <- struct{}{}
			<-r.Context().Done()
			s.mu.Lock()
			s.aborted++
			s.mu.Unlock()
			return
		}
		if n > len(replies) {
			http.Error(w, `{"error":{"message":"no more replies"}}`, http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.completed++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, replies[n-1])
	}))
	t.Cleanup(s.Close)
	return s
}

// calls are the model calls completed and aborted.
func (s *modelServer) calls() (completed, aborted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.completed, s.aborted
}

// buildBin builds morph-temporal and morph, side by side as make build
// puts them, once, and returns their directory.
var buildBin = sync.OnceValues(func() (string, error) {
	buildBinUsed.Store(true)
	dir, err := os.MkdirTemp("", "morph-temporal-test")
	if err != nil {
		return "", err
	}
	for _, pkg := range []string{"./cmd/morph-temporal", "../cmd/morph"} {
		if out, err := exec.Command("go", "build", "-o", dir+"/", pkg).CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	return dir, nil
})

// bin is the path of a program buildBin built.
func bin(t testing.TB, name string) string {
	t.Helper()
	dir, err := buildBin()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// workers are worker processes (morph-temporal worker) of a morph.toml
// on a model server, with calc, on a queue of their own of the dev
// server; their output is in logs.
type workers struct {
	t     *testing.T
	cfg   string
	queue string
	args  []string
	logs  testenv.Buffer
}

// newWorkers writes the workers' morph.toml on model, extra appended;
// args are the workers' flags.
func newWorkers(t *testing.T, model *modelServer, extra string, args ...string) *workers {
	srv, _ := devServer()
	w := &workers{t: t, cfg: filepath.Join(t.TempDir(), "morph.toml"), queue: "kill-" + fmt.Sprint(time.Now().UnixNano()), args: args}
	os.WriteFile(w.cfg, []byte(fmt.Sprintf("[llm]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = %q\napi_key_env = \"\"\nmax_retries = 0\n\n"+
		"[tools]\nbuiltin = [\"calc\"]\n\n[discovery]\nproject = false\nuser = false\n\n[temporal]\nhost_port = %q\ntask_queue = %q\n%s",
		model.URL+"/v1", srv.FrontendHostPort(), w.queue, extra)), 0o644)
	return w
}

// start starts a worker; the test's end kills it.
func (w *workers) start() *exec.Cmd {
	cmd := exec.Command(bin(w.t, "morph-temporal"), append([]string{"worker", "--config", w.cfg}, w.args...)...)
	cmd.Stdout, cmd.Stderr = &w.logs, &w.logs
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// killMid starts a workflow with start on a worker, which it kills with
// SIGKILL once held has returned (the call to kill it in is in flight),
// and starts another, which finishes the workflow: it decodes the
// workflow's result into result and returns its run and how long after
// the kill it ended.
func (w *workers) killMid(c client.Client, start func(context.Context, client.StartWorkflowOptions) (client.WorkflowRun, error),
	held func(context.Context, client.WorkflowRun) error, result any) (client.WorkflowRun, time.Duration) {
	t := w.t
	a := w.start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := start(ctx, client.StartWorkflowOptions{TaskQueue: w.queue})
	if err != nil {
		t.Fatal(err)
	}
	if err := held(ctx, run); err != nil {
		t.Fatalf("%v:\n%s", err, w.logs.String())
	}
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	killed := time.Now()
	w.start()
	if err := run.Get(ctx, result); err != nil {
		t.Fatalf("%v\n%s", err, w.logs.String())
	}
	return run, time.Since(killed)
}

// killMidTurn is killMid of task as a turn.
func (w *workers) killMidTurn(c client.Client, task string, held func(context.Context, client.WorkflowRun) error) (TurnResult, client.WorkflowRun, time.Duration) {
	var res TurnResult
	run, took := w.killMid(c, func(ctx context.Context, o client.StartWorkflowOptions) (client.WorkflowRun, error) {
		return c.ExecuteWorkflow(ctx, o, TurnWorkflow, TurnInput{SessionID: "s", Task: task})
	}, held, &res)
	return res, run, took
}

// secondModelCall returns once the model's second call is in flight, held
// (model.hold): the first model call and tool call are done.
func secondModelCall(model *modelServer) func(context.Context, client.WorkflowRun) error {
	return func(ctx context.Context, _ client.WorkflowRun) error {
		select {
		case <-model.arrived:
			return nil
		case <-ctx.Done():
			return errors.New("the second model call never came")
		}
	}
}

// killReplies are a turn of two calc calls and a final.
var killReplies = []string{
	`{"type":"tool_call","tool_call":{"thought":"a","tool_name":"calc","tool_params":{"expression":"6*7"}}}`,
	`{"type":"tool_call","tool_call":{"thought":"b","tool_name":"calc","tool_params":{"expression":"1+1"}}}`,
	`{"type":"final","final":{"thought":"done","output":42}}`,
}

// nothingRepeated fails t unless the model answered 3 calls (none
// repeated) and aborted 1 (the one in flight at the kill, made again), and
// the tool ran twice (none repeated).
func nothingRepeated(t *testing.T, model *modelServer, w *workers) {
	t.Helper()
	if completed, aborted := model.calls(); completed != 3 || aborted != 1 {
		t.Errorf("%d model calls answered, %d aborted; want 3 (none repeated) and 1 (the one in flight)", completed, aborted)
	}
	if n := w.toolCalls(); n != 2 {
		t.Errorf("%d tool executions, want 2 (none repeated):\n%s", n, w.logs.String())
	}
}

// toolCalls counts the workers' tool executions.
func (w *workers) toolCalls() int { return strings.Count(w.logs.String(), "msg=\"tool called\"") }

// A worker killed with SIGKILL in the middle of a turn, after the turn's
// first model call and tool call, while its second model call waits for the
// model: a second worker finishes the turn. Nothing that finished runs
// again (the model answered 3 calls, the tool ran twice); the call in
// flight at the kill, which never answered, is made again (after
// --activity-timeout, 3 s, shorter than the model client's bound).
func TestWorkerKilledMidTurn(t *testing.T) {
	c := dev(t)
	model := newModelServer(t, killReplies...)
	model.hold = true
	w := newWorkers(t, model, "", "--activity-timeout", "3s")
	res, _, _ := w.killMidTurn(c, "6*7?", secondModelCall(model))
	checkTurn(t, "the turn", res, "42", 3, "42", "2")
	nothingRepeated(t, model, w)
}

// The same kill in the middle of a pipeline's agent stage, after the
// stage's first model call and tool call: a second worker finishes the
// stage and the run, repeating nothing that finished, and the stage ends
// once, with the turn's one final.
func TestWorkerKilledMidStage(t *testing.T) {
	c := dev(t)
	model := newModelServer(t, killReplies...)
	model.hold = true
	w := newWorkers(t, model, "", "--activity-timeout", "3s")
	src := []byte(`digraph p { start [shape=Mdiamond]; work [prompt="what is 6*7?"]; done [shape=Msquare]; start -> work -> done }`)
	var res PipelineResult
	w.killMid(c, func(ctx context.Context, o client.StartWorkflowOptions) (client.WorkflowRun, error) {
		return c.ExecuteWorkflow(ctx, o, PipelineWorkflow, PipelineInput{Source: src, DotFile: "p.dot"})
	}, secondModelCall(model), &res)
	if res.Error != "" {
		t.Errorf("result Error = %q, want none", res.Error)
	}
	if res.Result == nil {
		t.Fatalf("result %+v, want the run's", res)
	}
	checkFields(t, "the run", eq("State", res.Result.State, pipeline.RunSuccess), eq("Path", fmt.Sprint(res.Result.Path), "[start work done]"))
	if nr := res.Result.Nodes["work"]; nr == nil {
		t.Errorf("no result of the stage: %+v", res.Result.Nodes)
	} else {
		checkFields(t, "the stage", eq("Status", nr.Status, pipeline.StatusSuccess), eq("Attempts", nr.Attempts, 1), eq("Visits", nr.Visits, 1))
	}
	if out := res.State.Checkpoint.Context["work.output"]; fmt.Sprint(out) != "42" {
		t.Errorf("the stage's output %v, want the final's 42", out)
	}
	nothingRepeated(t, model, w)
}

func TestWorkerKilledInHook(t *testing.T) {
	c := dev(t)
	model := newModelServer(t,
		`{"type":"tool_call","tool_call":{"thought":"a","tool_name":"calc","tool_params":{"expression":"6*7"}}}`,
		`{"type":"final","final":{"thought":"done","output":42}}`)
	w := newWorkers(t, model, fmt.Sprintf("\n[[plugins]]\nname = \"spin\"\npath = %q\ntimeout = \"250ms\"\n",
		plugin(t, "guests/testdata/spin_success.wasm")))
	res, run, took := w.killMidTurn(c, "6*7?", func(ctx context.Context, run client.WorkflowRun) error {
		for ctx.Err() == nil { // until the hook's activity has started on the worker
			d, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
			if err != nil {
				return err
			}
			for _, a := range d.GetPendingActivities() {
				if a.GetActivityType().GetName() == "OnToolSuccess" && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
					return nil
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		return errors.New("the on_tool_success hook never started")
	})
	t.Logf("the second worker ended the turn %s after the kill", took.Round(10*time.Millisecond))
	checkTurn(t, "the turn", res, "42", 2, "42")
	if took > 30*time.Second {
		t.Errorf("the turn ended %s after the kill; want seconds (the hook's timeout is 1.75 s, the sticky queue's 2 s)", took)
	}
	if completed, aborted := model.calls(); completed != 2 || aborted != 0 {
		t.Errorf("%d model calls answered, %d aborted; want 2 and 0 (none repeated)", completed, aborted)
	}
	if n := w.toolCalls(); n != 1 {
		t.Errorf("%d tool executions, want 1 (none repeated):\n%s", n, w.logs.String())
	}
	it := c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hook, attempt := int64(0), int32(0)       // the hook's scheduled event, and the attempt that started
	timeouts := map[string][2]time.Duration{} // the activities' StartToCloseTimeout and HeartbeatTimeout, by type
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			timeouts[a.GetActivityType().GetName()] = [2]time.Duration{a.GetStartToCloseTimeout().AsDuration(), a.GetHeartbeatTimeout().AsDuration()}
			if a.GetActivityType().GetName() == "OnToolSuccess" {
				hook = ev.GetEventId()
			}
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetScheduledEventId() == hook {
			attempt = a.GetAttempt()
		}
	}
	if attempt != 2 {
		t.Errorf("the hook's activity started at attempt %d, want 2 (the killed worker's timed out)", attempt)
	}
	// The model client's timeout (60 s, no retries), the hook's three
	// deadlines, calc's bound; each and a second; and the heartbeat timeout
	// of each that is longer than it (Setup's is asked before the worker
	// tells it).
	hb := config.DefaultHeartbeatTimeout
	want := map[string][2]time.Duration{"Setup": {setupTimeout}, "Chat": {61 * time.Second, hb},
		"OnToolSuccess": {1750 * time.Millisecond}, "CallTool": {builtinToolBound + activityMargin, hb}}
	if !maps.Equal(timeouts, want) {
		t.Errorf("activity timeouts (start to close, heartbeat) %v, want %v", timeouts, want)
	}
}
