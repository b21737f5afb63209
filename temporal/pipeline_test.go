package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/pipeline"
)

// durablePipeline has an agent stage that calls a tool, a tool node, a
// diamond routing on a condition, a fan-out of two branches with their
// fan-in, and a human gate whose first choice is not the one answered.
const durablePipeline = `digraph durable {
  goal = "six times seven"
  start   [shape=Mdiamond]
  plan    [prompt="Compute $goal"]
  compute [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"6*7\"}"]
  check   [shape=diamond]
  fan     [shape=component]
  a       [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"1+1\"}"]
  b       [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"${tool.output}+1\"}"]
  b2      [shape=diamond]
  join    [shape=tripleoctagon]
  gate    [shape=hexagon, prompt="Ship ${parallel.fan_in.best}?"]
  done    [shape=Msquare]
  start -> plan -> compute -> check
  check -> fan  [condition="outcome=success"]
  check -> done [condition="outcome=fail"]
  fan -> a -> join
  fan -> b -> b2 -> join
  join -> gate
  gate -> plan [label="[R] Redo"]
  gate -> done [label="[S] Ship"]
}`

// planReplies are the plan stage's model replies: a tool call, a final.
var planReplies = []string{
	`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"calc","tool_params":{"expression":"6*7"}}}`,
	`{"type":"final","final":{"thought":"done","output":"42"}}`,
}

// loadConfig loads a config writeConfig wrote, with extra appended.
func loadConfig(t *testing.T, extra string, replies ...string) *config.Config {
	t.Helper()
	cfg, err := config.Load(appendConfig(t, writeConfig(t, replies...), extra))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runLocalPipeline runs src with cfg as morph pipeline run does: the
// engine's backend and tools, its plugins' stage handlers.
func runLocalPipeline(t *testing.T, cfg *config.Config, src string, iv pipeline.Interviewer) *pipeline.Result {
	t.Helper()
	ctx := context.Background()
	rt := openLocal(t, cfg)
	backend := &pipeline.EngineBackend{Engine: rt.Engine, Options: cfg.RunOptions()}
	handlers := pipeline.DefaultHandlerRegistry()
	for _, h := range rt.StageHandlers() {
		handlers.Register(h)
	}
	r := &pipeline.Runner{Handlers: handlers, Backend: backend, Tools: backend, Interviewer: iv, Limits: cfg.Pipeline.Limits()}
	g, err := pipeline.ParseDOTNamed("p.dot", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(ctx, g, pipeline.RunConfig{RunDir: t.TempDir(), Source: []byte(src)})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// startPipeline starts src as a PipelineWorkflow on queue.
func startPipeline(t *testing.T, c client.Client, queue, src string, in PipelineInput) client.WorkflowRun {
	t.Helper()
	in.Source, in.DotFile = []byte(src), "p.dot"
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: queue}, PipelineWorkflow, in)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// pipelineResult waits for run's end.
func pipelineResult(t *testing.T, run client.WorkflowRun) PipelineResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got PipelineResult
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// samePipelineAsLocal fails t unless got ended as the local run did: its
// state, path, failure, each node's status, attempts and reason, the
// tokens, and the final context.
func samePipelineAsLocal(t *testing.T, got PipelineResult, want *pipeline.Result) {
	t.Helper()
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if got.Result == nil || got.State == nil {
		t.Fatalf("no result: %s", j(got))
	}
	res := got.Result
	checkFields(t, "temporal, against local", eq("State", res.State, want.State),
		eq("FailedNode", res.FailedNode, want.FailedNode), eq("FailureReason", res.FailureReason, want.FailureReason),
		eq("Usage.TotalTokens", res.Usage.TotalTokens, want.Usage.TotalTokens))
	if !slices.Equal(res.Path, want.Path) {
		t.Fatalf("temporal: Path = %v, want the local %v", res.Path, want.Path)
	}
	for id, w := range want.Nodes {
		n := res.Nodes[id]
		if n == nil {
			t.Errorf("node %s: no result, local %+v", id, w)
			continue
		}
		checkFields(t, "node "+id+", against local", eq("Status", n.Status, w.Status), eq("Attempts", n.Attempts, w.Attempts),
			eq("FailureReason", n.FailureReason, w.FailureReason))
	}
	if a, b := j(got.State.Checkpoint.Context), j(want.Context); a != b {
		t.Errorf("context:\n%s\nlocal:\n%s", a, b)
	}
}

// checkPath checks that got, of what, ran through the node through, and
// through none of avoid.
func checkPath(t *testing.T, what string, got PipelineResult, through string, avoid ...string) {
	t.Helper()
	if got.Result == nil {
		t.Fatalf("%s: no result: %+v", what, got)
	}
	if !slices.Contains(got.Result.Path, through) {
		t.Errorf("%s: path %v, want it through %s", what, got.Result.Path, through)
	}
	for _, node := range avoid {
		if slices.Contains(got.Result.Path, node) {
			t.Errorf("%s: path %v, through %s; want it not", what, got.Result.Path, node)
		}
	}
}

// checkHumanText checks that got, of what, ended with the gate's answer's
// text, text, in its context.
func checkHumanText(t *testing.T, what string, got PipelineResult, text string) {
	t.Helper()
	if got.State == nil {
		t.Fatalf("%s: no state: %+v", what, got)
	}
	if human := got.State.Checkpoint.Context["human.text"]; human != text {
		t.Errorf("%s: human.text = %v, want %q", what, human, text)
	}
}

// tooLarge returns err's *TooLargeError, failing t (naming what) when
// there is none.
func tooLarge(t *testing.T, what string, err error) *TooLargeError {
	t.Helper()
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Errorf("%s: %v, want a TooLargeError", what, err)
	}
	return tl
}

// waitQuestion queries run's progress until a question waits, and
// returns it.
func waitQuestion(t *testing.T, c client.Client, run client.WorkflowRun) (PipelineProgress, pipeline.Question) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		q, err := c.QueryWorkflow(context.Background(), run.GetID(), "", QueryPipelineProgress)
		if err != nil {
			continue // not started yet
		}
		var p PipelineProgress
		if err := q.Get(&p); err != nil {
			t.Fatal(err)
		}
		if len(p.Questions) > 0 {
			return p, p.Questions[0].Question
		}
	}
	t.Fatal("no question came")
	return PipelineProgress{}, pipeline.Question{}
}

// A pipeline of every kind of stage completes on Temporal with the local
// run's result, through two workers: the first runs it up to the human
// gate and stops; the second, with nothing cached, replays the history
// (the agent, the tools, the branches) and goes on. The gate is answered
// by an update (which the second worker validates after its replay), after
// one it refuses (an unknown choice): it keeps waiting, then routes as the
// answer says, its text the answer's.
func TestPipelineMatchesLocalRunOnTwoWorkers(t *testing.T) {
	c := dev(t)
	queue := "q-" + t.Name()
	iv := pipeline.NewQueueInterviewer()
	iv.Push(pipeline.Answer{Choice: "S", Text: "ship it"})
	want := runLocalPipeline(t, loadConfig(t, "", planReplies...), durablePipeline, iv)
	if want.State != pipeline.RunSuccess {
		t.Fatalf("the local run: %s, want %s: %s", want.State, pipeline.RunSuccess, want.FailureReason)
	}
	if want.Nodes["b2"] == nil {
		t.Fatalf("the local run did not run b2: %v", want.Path)
	}
	if len(want.Path) < 2 || want.Path[len(want.Path)-2] != "gate" {
		t.Fatalf("the local run's path %v, want gate before the end", want.Path)
	}

	first := startWorkerOn(t, c, loadConfig(t, "", planReplies...), queue)
	run := startPipeline(t, c, queue, durablePipeline, PipelineInput{})
	progress, q := waitQuestion(t, c, run)
	checkFields(t, "the question", eq("NodeID", q.NodeID, "gate"), eq("Text", q.Text, "Ship a?"), eq("choices", len(q.Choices), 2))
	var kinds []string
	for _, ev := range progress.Events {
		if ev.Kind == pipeline.EventStageCompleted {
			kinds = append(kinds, ev.NodeID)
		}
	}
	if !slices.Contains(kinds, "plan") || !slices.Contains(kinds, "b2") {
		t.Errorf("the progress tells the stages done: %v", kinds)
	}
	first.Stop()
	worker.PurgeStickyWorkflowCache()
	startWorkerOn(t, c, loadConfig(t, "", planReplies...), queue)
	ctx := context.Background()
	if err := AnswerGate(ctx, c, run.GetID(), 0, AnswerSignal{Node: "gate", Choice: "maybe"}); !errors.Is(err, ErrNoChoice) {
		t.Errorf("an answer naming no choice: %v; want ErrNoChoice", err)
	}
	if err := AnswerGate(ctx, c, run.GetID(), 0, AnswerSignal{Node: "gate", Choice: "S", Text: "ship it"}); err != nil {
		t.Fatal(err)
	}
	got := pipelineResult(t, run)
	samePipelineAsLocal(t, got, want)
	if got.State.Checkpoint.Context["human.text"] != "ship it" {
		t.Errorf("the answer's text: %v", got.State.Checkpoint.Context["human.text"])
	}
}

// A workflow that continues as new at its checkpoints (ContinueAfter: after
// every second one) resumes each time from the checkpoint, and finishes
// with the local run's path and context. Its human gate, unanswered, takes
// its default at human.timeout on a workflow timer, as locally.
func TestPipelineContinuesAsNew(t *testing.T) {
	c := dev(t)
	src := `digraph long {
	  start [shape=Mdiamond]
	  one   [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"1+1\"}"]
	  two   [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"${tool.output}*3\"}"]
	  gate  [shape=hexagon, human.timeout="300ms", human.default_choice="Later"]
	  three [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"${tool.output}+1\"}"]
	  later [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"${tool.output}-1\"}"]
	  done  [shape=Msquare]
	  start -> one -> two -> gate
	  gate -> three [label="Now"]
	  gate -> later [label="Later"]
	  three -> done
	  later -> done
	}`
	want := runLocalPipeline(t, loadConfig(t, "", planReplies...), src, pipeline.NewQueueInterviewer())
	if !slices.Contains(want.Path, "later") || want.Context["tool.output"] != "5" {
		t.Fatalf("the local run: %v %v", want.Path, want.Context["tool.output"])
	}
	queue := startWorker(t, c, loadConfig(t, "", planReplies...))
	run := startPipeline(t, c, queue, src, PipelineInput{ContinueAfter: 2})
	got := pipelineResult(t, run)
	samePipelineAsLocal(t, got, want)
	q, err := c.QueryWorkflow(context.Background(), run.GetID(), "", QueryPipelineProgress)
	if err != nil {
		t.Fatal(err)
	}
	var p PipelineProgress
	if err := q.Get(&p); err != nil || p.Run != 2 {
		t.Errorf("the last run is the %d-th continuation (%v); want 2 (5 checkpoints before the exit, 2 a run)", p.Run, err)
	}
}

// A WebAssembly stage handler runs as an activity: the verify plugin
// (examples/pipelines/verify) fails the first implementation and passes
// the second, and a plugin whose handle_stage traps fails its stage with
// the reason the local run gives.
func TestPipelineStageHandlers(t *testing.T) {
	c := dev(t)
	src := `digraph wasm {
	  goal = "Make the failing unit tests pass"
	  start     [shape=Mdiamond]
	  implement [prompt="Fix the code: $goal"]
	  verify    [type="wasm:verify"]
	  trap      [type="wasm:stage_trap"]
	  done      [shape=Msquare]
	  start -> implement -> verify
	  verify -> trap      [condition="outcome=success"]
	  verify -> implement [condition="outcome=fail", label="fix"]
	  trap -> done        [condition="outcome=fail"]
	}`
	plugins := fmt.Sprintf("\n[[plugins]]\nname = \"verify\"\npath = %q\n\n[[plugins]]\nname = \"stage_trap\"\npath = %q\n",
		plugin(t, "examples/pipelines/verify/verify.wasm"), plugin(t, "guests/testdata/stage_trap.wasm"))
	replies := []string{
		`{"type":"final","final":{"thought":"t","output":"Changed it. Test run: 12 passed, 2 failed."}}`,
		`{"type":"final","final":{"thought":"t","output":"Fixed. Test run: ok, tests pass."}}`,
	}
	want := runLocalPipeline(t, loadConfig(t, plugins, replies...), src, nil)
	if want.State != pipeline.RunSuccess {
		t.Fatalf("the local run: %s, want %s: %s", want.State, pipeline.RunSuccess, want.FailureReason)
	}
	if n := want.Nodes["verify"].Visits; n != 2 {
		t.Fatalf("the local run visited verify %d times, want 2: %v", n, want.Path)
	}
	r := want.Nodes["trap"]
	if r == nil {
		t.Fatalf("the local run did not run trap: %v", want.Path)
	}
	if !strings.Contains(r.FailureReason, "trap") {
		t.Fatalf("the local run's trap failed for %q, want its trap", r.FailureReason)
	}
	queue := startWorker(t, c, loadConfig(t, plugins, replies...))
	samePipelineAsLocal(t, pipelineResult(t, startPipeline(t, c, queue, src, PipelineInput{})), want)
}

// What a workflow cannot run durably yet is refused before the run, an
// ERROR naming each node and what to do.
func TestPipelineRefusesWhatIsNotDurable(t *testing.T) {
	c := dev(t)
	src := `digraph nope {
	  start [shape=Mdiamond]
	  sh    [shape=parallelogram, tool_command="make test"]
	  boss  [shape=house, stack.child_dotfile="child.dot"]
	  other [prompt="hi", llm_provider="anthropic"]
	  done  [shape=Msquare]
	  start -> sh -> boss -> other -> done
	}`
	queue := startWorker(t, c, loadConfig(t, "", planReplies...))
	got := pipelineResult(t, startPipeline(t, c, queue, src, PipelineInput{}))
	if got.Result != nil || !strings.Contains(got.Error, "p.dot") {
		t.Fatalf("ran, or the error names not the file: %+v", got)
	}
	refused := map[string]string{}
	for _, d := range got.Diagnostics {
		if d.Rule == RuleDurable && d.Severity == pipeline.SeverityError {
			refused[d.NodeID] = d.Message + " fix: " + d.Fix
		}
	}
	for node, says := range map[string]string{"sh": "runs a shell command (tool_command)", "boss": "supervises a child pipeline",
		"other": "model endpoint of its own"} {
		for _, part := range []string{says, "not durable on Temporal yet", "without --temporal"} {
			if !strings.Contains(refused[node], part) {
				t.Errorf("node %s: %q, want it to say %q", node, refused[node], part)
			}
		}
	}
}

// Two parallel branches whose agents continue one full-fidelity thread
// take turns on it, as locally, instead of blocking the workflow: the
// engine's session is one conversation at a time.
func TestPipelineParallelBranchesShareAThread(t *testing.T) {
	c := dev(t)
	src := `digraph thread {
	  start [shape=Mdiamond]
	  fan   [shape=component]
	  x     [prompt="one", fidelity="full", thread_id="shared"]
	  y     [prompt="two", fidelity="full", thread_id="shared"]
	  join  [shape=tripleoctagon]
	  done  [shape=Msquare]
	  start -> fan
	  fan -> x -> join
	  fan -> y -> join
	  join -> done
	}`
	// Fixed token counts: which branch's turn comes first is the local
	// run's goroutines' race, and the counts would tell it.
	final := `{"type":"final","final":{"thought":"t","output":"ok"}},"input_tokens":10,"output_tokens":5`
	want := runLocalPipeline(t, loadConfig(t, "", final, final), src, nil)
	if want.State != pipeline.RunSuccess {
		t.Fatalf("the local run: %s %s", want.State, want.FailureReason)
	}
	queue := startWorker(t, c, loadConfig(t, "", final, final))
	got := pipelineResult(t, startPipeline(t, c, queue, src, PipelineInput{}))
	samePipelineAsLocal(t, got, want)
	if len(got.State.Threads["shared"]) == 0 {
		t.Errorf("the thread is not in the state: %v", got.State.Threads)
	}
}

// gatePipeline waits at a human gate, then runs the branch answered.
const gatePipeline = `digraph gated {
  start [shape=Mdiamond]
  gate  [shape=hexagon, prompt="Ship?"]
  ship  [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"1+1\"}"]
  redo  [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"2+2\"}"]
  done  [shape=Msquare]
  start -> gate
  gate -> ship [label="[S] Ship"]
  gate -> redo [label="[R] Redo"]
  ship -> done
  redo -> done
}`

// answerEvents counts the events of run's history that hold answers: its
// updates' and its signals'.
func answerEvents(t *testing.T, c client.Client, run client.WorkflowRun) (updates, signals int) {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			signals++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
			updates++
		}
	}
	return updates, signals
}

// A gate's answer is an update whose validator refuses, to the sender
// with its typed error, an answer larger than the workflow's cap, one for
// no gate waiting at its node, and one naming none of the gate's choices:
// none of them leaves an event in the history. An answer larger than the
// sender's own cap is refused before it is sent. A good answer returns
// once the gate took it, and routes.
func TestGateAnswerRefusedLeavesNoHistory(t *testing.T) {
	c := dev(t)
	queue := startWorker(t, c, loadConfig(t, "", planReplies...))
	run := startPipeline(t, c, queue, gatePipeline, PipelineInput{MaxAnswerBytes: 1 << 10})
	if _, q := waitQuestion(t, c, run); q.NodeID != "gate" {
		t.Fatalf("question %+v", q)
	}
	ctx := context.Background()
	var tl *TooLargeError
	// 2 KB: under the sender's cap (the default 64 KB), over the workflow's
	err := AnswerGate(ctx, c, run.GetID(), 0, AnswerSignal{Node: "gate", Choice: "S", Text: strings.Repeat("x", 2<<10)})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("an answer over the workflow's cap: %v, want ErrTooLarge", err)
	}
	if tl := tooLarge(t, "an answer over the workflow's cap", err); tl != nil {
		checkFields(t, "an answer over the workflow's cap", eq("Max", tl.Max, 1<<10), eq("Key", tl.Key, "temporal.answer_max_kb"))
	}
	err = AnswerGate(ctx, c, run.GetID(), 0, AnswerSignal{Node: "gate", Choice: "S", Text: strings.Repeat("x", 100<<10)})
	if !errors.As(err, &tl) || tl.Max != AnswerMaxBytes(config.Temporal{}) {
		t.Errorf("an answer over the sender's cap: %v; want the sender's TooLargeError", err)
	}
	for _, bad := range []struct {
		a    AnswerSignal
		want error
	}{{AnswerSignal{Node: "nowhere\x1b[2J", Choice: "S"}, ErrNoGate}, {AnswerSignal{Node: "gate", Choice: "maybe"}, ErrNoChoice}} {
		if err := AnswerGate(ctx, c, run.GetID(), 0, bad.a); !errors.Is(err, bad.want) || strings.Contains(err.Error(), "\x1b") {
			t.Errorf("answer %q: %v; want %v, the node escaped", bad.a, err, bad.want)
		}
	}
	if updates, signals := answerEvents(t, c, run); updates+signals != 0 {
		t.Errorf("the refused answers left %d update and %d signal events in the history; want none", updates, signals)
	}

	if err := AnswerGate(ctx, c, run.GetID(), 0, AnswerSignal{Node: "gate", Choice: "R", Text: "again"}); err != nil {
		t.Fatal(err)
	}
	got := pipelineResult(t, run)
	checkPath(t, "the answered run", got, "redo", "ship")
	checkHumanText(t, "the answered run", got, "again")
	if updates, signals := answerEvents(t, c, run); updates == 0 || signals != 0 {
		t.Errorf("the history has %d update and %d signal events; want the answer's update", updates, signals)
	}
}

// The gate_answer validator's cap is on the answer's node, choice and text
// together, in bytes (not runes, not its JSON): an answer of exactly
// answer_max_kb is taken, one byte more is refused with a TooLargeError
// naming the key; a cap of 0 is answer_max_kb's default. (AnswerGate
// checks the same before sending.)
func TestGateAnswerCapBoundary(t *testing.T) {
	for _, max := range []int{1 << 10, 0} {
		g := &gates{max: max, waiting: []*gate{{q: pipeline.Question{NodeID: "gate", Choices: []pipeline.Choice{{Key: "S", To: "ship"}}}}}}
		limit := max
		if max == 0 {
			limit = config.DefaultAnswerMaxKB << 10
		}
		n := limit - len("gate") - len("S")
		at := AnswerSignal{Node: "gate", Choice: "S", Text: strings.Repeat("é", n/2) + strings.Repeat("x", n%2)} // "é" is 2 bytes
		if w, err := g.check(at); w == nil || err != nil {
			t.Errorf("cap %d: an answer of %d bytes: %v; want it taken", max, limit, err)
		}
		over := at
		over.Text += "x"
		what := fmt.Sprintf("cap %d: an answer of %d bytes", max, limit+1)
		_, err := g.check(over)
		if tl := tooLarge(t, what, err); tl != nil {
			checkFields(t, what, eq("Size", tl.Size, limit+1), eq("Max", tl.Max, limit), eq("Key", tl.Key, "temporal.answer_max_kb"))
		}
	}
}

// The deprecated answer signal, which workflows started before the update
// wait on, is still taken with the same checks: one over the cap and one
// for no gate are dropped (though Temporal keeps them in the history), and
// a good one routes.
func TestGateAnswerSignal(t *testing.T) {
	c := dev(t)
	queue := startWorker(t, c, loadConfig(t, "", planReplies...))
	run := startPipeline(t, c, queue, gatePipeline, PipelineInput{MaxAnswerBytes: 1 << 10})
	waitQuestion(t, c, run)
	ctx := context.Background()
	for _, a := range []AnswerSignal{{Node: "gate", Choice: "R", Text: strings.Repeat("x", 2<<10)}, {Node: "nowhere", Choice: "R"}, {Node: "gate", Choice: "S"}} {
		if err := c.SignalWorkflow(ctx, run.GetID(), "", SignalAnswer, a); err != nil {
			t.Fatal(err)
		}
	}
	got := pipelineResult(t, run)
	checkPath(t, "the signalled run", got, "ship", "redo")
	if updates, signals := answerEvents(t, c, run); updates != 0 || signals != 3 {
		t.Errorf("the history has %d update and %d signal events; want the 3 signals", updates, signals)
	}
}

// A workflow started before the answer update, its gate answered by
// signals (one over its 1 KB cap, one for no gate, the good one), replays
// on this version without a nondeterminism error: the history
// (testdata/gate-signal-history.json) was written by the version before
// the update, running gatePipeline as TestGateAnswerSignal does.
func TestGateAnswerSignalHistoryReplays(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(PipelineWorkflow)
	if err := r.ReplayWorkflowHistoryFromJSONFile(nil, "testdata/gate-signal-history.json"); err != nil {
		t.Fatal(err)
	}
}
