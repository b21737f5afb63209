package temporal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

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
	path := writeConfig(t, replies...)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(extra)
	f.Close()
	cfg, err := config.Load(path)
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
	rt, err := cfg.Open(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
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
	if res.State != want.State || !slices.Equal(res.Path, want.Path) || res.FailedNode != want.FailedNode ||
		res.FailureReason != want.FailureReason || res.Usage.TotalTokens != want.Usage.TotalTokens {
		t.Fatalf("temporal: %s %v %s %q tokens %d\nlocal: %s %v %s %q tokens %d", res.State, res.Path, res.FailedNode, res.FailureReason,
			res.Usage.TotalTokens, want.State, want.Path, want.FailedNode, want.FailureReason, want.Usage.TotalTokens)
	}
	for id, w := range want.Nodes {
		if n := res.Nodes[id]; n == nil || n.Status != w.Status || n.Attempts != w.Attempts || n.FailureReason != w.FailureReason {
			t.Errorf("node %s: %+v, local %+v", id, n, w)
		}
	}
	if a, b := j(got.State.Checkpoint.Context), j(want.Context); a != b {
		t.Errorf("context:\n%s\nlocal:\n%s", a, b)
	}
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
			return p, p.Questions[0]
		}
	}
	t.Fatal("no question came")
	return PipelineProgress{}, pipeline.Question{}
}

// A pipeline of every kind of stage completes on Temporal with the local
// run's result, through two workers: the first runs it up to the human
// gate and stops; the second, with nothing cached, replays the history
// (the agent, the tools, the branches) and goes on. The gate is answered
// by a signal, after two it refuses (an unknown node, an unknown choice):
// it keeps waiting, then routes as the answer says.
func TestPipelineMatchesLocalRunOnTwoWorkers(t *testing.T) {
	c := dev(t)
	queue := fmt.Sprint("pipe-", time.Now().UnixNano())
	iv := pipeline.NewQueueInterviewer()
	iv.Push(pipeline.Answer{Choice: "S", Text: "ship it"})
	want := runLocalPipeline(t, loadConfig(t, "", planReplies...), durablePipeline, iv)
	if want.State != pipeline.RunSuccess || want.Nodes["b2"] == nil || want.Path[len(want.Path)-2] != "gate" {
		t.Fatalf("the local run: %s %v %s", want.State, want.Path, want.FailureReason)
	}

	first := startWorker(t, c, loadConfig(t, "", planReplies...), queue)
	run := startPipeline(t, c, queue, durablePipeline, PipelineInput{})
	progress, q := waitQuestion(t, c, run)
	if q.NodeID != "gate" || q.Text != "Ship a?" || len(q.Choices) != 2 {
		t.Errorf("question %+v", q)
	}
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
	startWorker(t, c, loadConfig(t, "", planReplies...), queue)
	ctx := context.Background()
	for _, a := range []AnswerSignal{{Node: "nowhere", Choice: "S"}, {Node: "gate", Choice: "maybe"}, {Node: "gate", Choice: "S", Text: "ship it"}} {
		if err := c.SignalWorkflow(ctx, run.GetID(), "", SignalAnswer, a); err != nil {
			t.Fatal(err)
		}
	}
	got := pipelineResult(t, run)
	samePipelineAsLocal(t, got, want)
	if got.State.Checkpoint.Context["human.text"] != "ship it" {
		t.Errorf("the answer's text: %v", got.State.Checkpoint.Context["human.text"])
	}
}
