package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm/scripted"
	"github.com/morphhost/morph/mcp"
	"github.com/morphhost/morph/pipeline"
)

// twoStages is the fixture: two agent stages, the second reading the
// first's output.
const twoStages = `digraph two_stages {
  label = "Plan a change, then review the plan"
  start  [shape=Mdiamond]
  plan   [prompt="Plan: $goal"]
  review [prompt="Review the plan for $goal"]
  done   [shape=Msquare]
  start -> plan -> review -> done
}`

// final is a scripted model reply that ends its run with output.
func final(output string) string {
	b, _ := json.Marshal(map[string]any{"type": "final", "final": map[string]any{"thought": "t", "output": output}})
	return string(b)
}

// served is a pipeline served as a tool over MCP to an in-memory client.
type served struct {
	cs   *sdk.ClientSession
	set  *pipeline.ToolSet
	runs string

	mu       sync.Mutex
	progress []string
}

// serve serves the pipeline dot (in a file named name.dot) as a tool of an
// mcp.Server, run on backend, to a client with copts (its progress
// handler is served's).
func serve(t *testing.T, name, dot string, backend pipeline.CodergenBackend, opts pipeline.ToolOptions, copts sdk.ClientOptions) *served {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, name+".dot")
	if err := os.WriteFile(file, []byte(dot), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &served{runs: filepath.Join(dir, "runs")}
	opts.RunsDir = s.runs
	r := &pipeline.Runner{Backend: backend}
	if b, ok := backend.(*pipeline.EngineBackend); ok {
		r.Tools = b
	}
	s.set = pipeline.NewToolSet(r, opts)
	tool, err := s.set.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry()
	if err := pipeline.RegisterTools(reg, []*pipeline.Tool{tool}); err != nil {
		t.Fatal(err)
	}
	srv, err := mcp.NewServer(context.Background(), engine.New(nil, reg), mcp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	copts.ProgressNotificationHandler = func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.progress = append(s.progress, req.Params.Message)
	}
	st, ct := sdk.NewInMemoryTransports()
	ended := make(chan struct{})
	go func() { _ = srv.Serve(context.Background(), st); close(ended) }()
	s.cs, err = sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &copts).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cs.Close()
		select {
		case <-ended:
		case <-time.After(time.Minute):
			t.Error("Serve did not return within a minute of the client closing")
		}
	})
	return s
}

// call calls the tool with task and a progress token.
func (s *served) call(ctx context.Context, t *testing.T, tool, task string) *sdk.CallToolResult {
	t.Helper()
	p := &sdk.CallToolParams{Name: tool, Arguments: map[string]any{"task": task}}
	p.SetProgressToken("tok")
	res, err := s.cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("calling %s: protocol error %v, want a result", tool, err)
	}
	return res
}

// waitProgress waits (a minute at most) for n progress messages, and
// returns those received.
func (s *served) waitProgress(n int) []string {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		got := append([]string(nil), s.progress...)
		s.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
	}
}

func resultText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// outcome decodes a result's structured outcome.
func outcome(t *testing.T, res *sdk.CallToolResult) pipeline.ToolOutcome {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out pipeline.ToolOutcome
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return out
}

// A pipeline served as a tool is listed with its task parameter; a call
// runs it on the model with the task as its goal, reports each stage's
// start and end as progress in order, and returns the outcome.
func TestPipelineToolRun(t *testing.T) {
	model := scripted.New(scripted.Texts(final("step one, step two"), final("the plan holds")))
	s := serve(t, "file-stem", twoStages, &pipeline.EngineBackend{Engine: engine.New(model, engine.NewRegistry())}, pipeline.ToolOptions{}, sdk.ClientOptions{})

	list, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != "two_stages" {
		t.Fatalf("tools %+v, want two_stages (the digraph's name, not the file's)", list.Tools)
	}
	tool := list.Tools[0]
	if !strings.Contains(tool.Description, "Plan a change, then review the plan") {
		t.Errorf("description %q lacks the graph's label", tool.Description)
	}
	schema, _ := json.Marshal(tool.InputSchema)
	var sch struct {
		Properties map[string]struct{ Type string } `json:"properties"`
		Required   []string                         `json:"required"`
	}
	if err := json.Unmarshal(schema, &sch); err != nil || sch.Properties["task"].Type != "string" || !reflect.DeepEqual(sch.Required, []string{"task"}) {
		t.Errorf("input schema %s, want a required string task (the graph has no goal)", schema)
	}

	res := s.call(context.Background(), t, "two_stages", "ship 1.4")
	if res.IsError {
		t.Fatalf("isError: %s", resultText(res))
	}
	out := outcome(t, res)
	if out.Status != pipeline.RunSuccess || out.Answer != "the plan holds" || out.LastStage != "review" ||
		!reflect.DeepEqual(out.Path, []string{"start", "plan", "review", "done"}) || out.RunDir == "" {
		t.Errorf("outcome %+v, want success, review's answer and the path through both stages", out)
	}
	if !strings.HasPrefix(out.RunDir, s.runs) {
		t.Errorf("run directory %s, want one under %s", out.RunDir, s.runs)
	}
	if reqs := model.Requests(); len(reqs) != 2 || !strings.Contains(reqs[0].Messages[len(reqs[0].Messages)-1].Content, "Plan: ship 1.4") {
		t.Errorf("the model was asked %d times, first %+v; want the task as the plan's $goal", len(reqs), reqs)
	}
	want := []string{
		"stage start started", "stage start success",
		"stage plan started", "stage plan success",
		"stage review started", "stage review success",
		"stage done started", "stage done success",
	}
	if got := s.waitProgress(len(want)); !reflect.DeepEqual(got, want) {
		t.Errorf("progress\n%q\nwant\n%q", got, want)
	}
}

// A stage that fails fails the call: isError, naming the node, with the
// outcome.
func TestPipelineToolFailingStage(t *testing.T) {
	model := scripted.New(scripted.Texts(final("step one"))) // none left for review
	s := serve(t, "two", twoStages, &pipeline.EngineBackend{Engine: engine.New(model, engine.NewRegistry())}, pipeline.ToolOptions{}, sdk.ClientOptions{})
	res := s.call(context.Background(), t, "two_stages", "ship 1.4")
	text := resultText(res)
	if !res.IsError || !strings.Contains(text, "failed at node review") || !strings.Contains(text, `"failed_node":"review"`) {
		t.Errorf("isError %v, %s; want isError naming review, with the outcome", res.IsError, text)
	}
}

// gate routes on a human gate's answer: hold or ship.
const gate = `digraph gate {
  goal = "release 1.4"
  start [shape=Mdiamond]
  ask   [shape=hexagon, label="Ship it?" %s]
  ship  [prompt="Ship $goal"]
  hold  [prompt="Hold $goal"]
  done  [shape=Msquare]
  start -> ask
  ask -> ship [label="[S] Ship"]
  ask -> hold [label="[H] Hold"]
  ship -> done
  hold -> done
}`

// A human gate asks the client's user through elicitation, the choices an
// enum, and takes the edge chosen. A client without elicitation gets the
// gate's default choice, or a failure naming the gate when it has none; a
// user who declines fails the gate, default or not.
func TestPipelineToolGate(t *testing.T) {
	for _, tc := range []struct {
		name, attrs string
		answer      string // "": the client has no elicitation; "decline": the user declines
		path        []string
		failure     string
		why         string
		chose       string // the progress message of the answer
	}{
		{name: "elicited", answer: "[H] Hold", path: []string{"start", "ask", "hold", "done"}, chose: "[H] Hold"},
		{name: "elicited over the default", attrs: `, human.default_choice="[S] Ship"`, answer: "[H] Hold", path: []string{"start", "ask", "hold", "done"}, chose: "[H] Hold"},
		{name: "default", attrs: `, human.default_choice="[S] Ship"`, path: []string{"start", "ask", "ship", "done"}, chose: "[S] Ship"},
		{name: "no default", failure: "failed at node ask", why: "no human.default_choice"},
		{name: "declined", attrs: `, human.default_choice="[S] Ship"`, answer: "decline", failure: "failed at node ask", why: "did not choose (decline)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := scripted.New(scripted.Texts(final("done")))
			var (
				mu    sync.Mutex
				asked []*sdk.ElicitParams
			)
			var copts sdk.ClientOptions
			if tc.answer != "" {
				copts.ElicitationHandler = func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params)
					mu.Unlock()
					if tc.answer == "decline" {
						return &sdk.ElicitResult{Action: "decline"}, nil
					}
					return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"choice": tc.answer}}, nil
				}
			}
			dot := strings.Replace(gate, "%s", tc.attrs, 1)
			s := serve(t, "gate", dot, &pipeline.EngineBackend{Engine: engine.New(model, engine.NewRegistry())}, pipeline.ToolOptions{}, copts)
			res := s.call(context.Background(), t, "gate", "")
			if tc.failure != "" {
				if text := resultText(res); !res.IsError || !strings.Contains(text, tc.failure) || !strings.Contains(text, tc.why) {
					t.Errorf("isError %v, %s; want isError: %s, saying %s", res.IsError, text, tc.failure, tc.why)
				}
				return
			}
			if res.IsError {
				t.Fatalf("isError: %s", resultText(res))
			}
			if out := outcome(t, res); !reflect.DeepEqual(out.Path, tc.path) {
				t.Errorf("path %v, want %v", out.Path, tc.path)
			}
			// start's 2, ask's start, question, answer
			if got := s.waitProgress(5); len(got) < 5 || got[3] != "stage ask asks: Ship it?" || got[4] != "stage ask chose "+tc.chose {
				t.Errorf("progress %q, want the gate's question and %s", got, tc.chose)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.answer == "" {
				return
			}
			if len(asked) != 1 {
				t.Fatalf("the client was asked %d times, want once", len(asked))
			}
			schema, _ := json.Marshal(asked[0].RequestedSchema)
			if !strings.Contains(asked[0].Message, "Ship it?") || !strings.Contains(string(schema), `"enum":["[S] Ship","[H] Hold"]`) {
				t.Errorf("asked %q with schema %s; want the gate's label and its choices as an enum", asked[0].Message, schema)
			}
		})
	}
}

// blocking is a backend whose first agent runs until its context ends;
// the others answer their node's id.
type blocking struct {
	started chan struct{}
	ended   chan error
	calls   atomic.Int32
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 8), ended: make(chan error, 8)}
}

func (b *blocking) RunAgent(ctx context.Context, cfg pipeline.AgentRunConfig) (*pipeline.AgentRunResult, error) {
	if b.calls.Add(1) > 1 {
		return &pipeline.AgentRunResult{Output: cfg.NodeID, Success: true}, nil
	}
	b.started <- struct{}{}
	<-ctx.Done()
	b.ended <- ctx.Err()
	return nil, ctx.Err()
}

// waitFor receives from ch within a minute.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s: not within a minute", what)
	}
	var zero T
	return zero
}

// A client's cancel ends the run, which stops with a checkpoint; a call
// with its run_id as resume continues it to its end. While it ran, a call
// past max_pipeline_runs was refused at once.
func TestPipelineToolCancel(t *testing.T) {
	b := newBlocking()
	s := serve(t, "two", twoStages, b, pipeline.ToolOptions{MaxRuns: 1}, sdk.ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	called := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, _ := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: "two_stages", Arguments: map[string]any{"task": "x"}})
		called <- res
	}()
	waitFor(t, b.started, "the plan stage starting")

	res := s.call(context.Background(), t, "two_stages", "y")
	if text := resultText(res); !res.IsError || !strings.Contains(text, "max_pipeline_runs") {
		t.Errorf("a second run at once: isError %v, %s; want refused naming max_pipeline_runs", res.IsError, text)
	}
	if n, running := s.set.Refused(), s.set.Running(); n != 1 || running != 1 {
		t.Errorf("Refused() = %d, Running() = %d, want 1 and 1", n, running)
	}

	cancel()
	if err := waitFor(t, b.ended, "the stage ending on the cancel"); !errors.Is(err, context.Canceled) {
		t.Errorf("the stage's context ended with %v, want canceled", err)
	}
	waitFor(t, called, "the call returning")
	var runID string
	// The run stopped with a checkpoint naming plan next.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		cps, _ := filepath.Glob(filepath.Join(s.runs, "*", pipeline.CheckpointFile))
		var cp *pipeline.Checkpoint
		if len(cps) == 1 {
			cp, _ = pipeline.LoadCheckpoint(filepath.Dir(cps[0]))
		}
		if cp != nil && cp.State == pipeline.RunCanceled {
			if cp.NextNode != "plan" {
				t.Errorf("checkpoint's next node %q, want plan", cp.NextNode)
			}
			runID = cp.RunID
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no canceled checkpoint under %s within a minute (%v)", s.runs, cps)
		}
	}

	// The client stopped waiting at its cancel; the run lets go of its slot
	// and its directory once it has saved the checkpoint.
	for deadline := time.Now().Add(time.Minute); s.set.Running() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the canceled run still running after a minute")
		}
	}
	p := &sdk.CallToolParams{Name: "two_stages", Arguments: map[string]any{"task": "x", "resume": runID}}
	res, err := s.cs.CallTool(context.Background(), p)
	if err != nil || res.IsError {
		t.Fatalf("resume %s: %v, %s", runID, err, resultText(res))
	}
	if out := outcome(t, res); out.RunID != runID || out.Status != pipeline.RunSuccess || out.Answer != "review" || !reflect.DeepEqual(out.Path, []string{"start", "plan", "review", "done"}) {
		t.Errorf("resumed: %+v, want run %s through plan and review to done", out, runID)
	}
	p.Arguments = map[string]any{"task": "x", "resume": "../../etc"}
	if res, err := s.cs.CallTool(context.Background(), p); err != nil || !res.IsError || !strings.Contains(resultText(res), "resume") {
		t.Errorf("resume of a path: %v, %+v; want isError", err, res)
	}
}

// Past pipeline_timeout the run stops, with a checkpoint; the call says
// so and how to resume.
func TestPipelineToolTimeout(t *testing.T) {
	s := serve(t, "two", twoStages, newBlocking(), pipeline.ToolOptions{Timeout: 50 * time.Millisecond}, sdk.ClientOptions{})
	res := s.call(context.Background(), t, "two_stages", "x")
	if text := resultText(res); !res.IsError || !strings.Contains(text, "pipeline_timeout") || !strings.Contains(text, "morph pipeline resume") || !strings.Contains(text, `"status":"canceled"`) {
		t.Errorf("isError %v, %s; want isError naming pipeline_timeout and how to resume", res.IsError, text)
	}
}

// A pipeline that does not validate is refused when loaded, naming the
// file and the problem; two tools of one name are refused, naming both.
func TestPipelineToolLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, dot string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(dot), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	set := pipeline.NewToolSet(&pipeline.Runner{}, pipeline.ToolOptions{})
	bad := write("bad.dot", `digraph bad { start [shape=Mdiamond]; work [prompt="x"]; start -> work }`)
	var ve *pipeline.ValidationError
	if _, err := set.Load(bad); !errors.As(err, &ve) || !strings.Contains(err.Error(), "bad.dot") || !strings.Contains(err.Error(), "terminal_node") {
		t.Errorf("Load(bad.dot) = %v, want a ValidationError naming the file and the rule", err)
	}
	a, err := set.Load(write("a.dot", twoStages))
	if err != nil {
		t.Fatal(err)
	}
	b, err := set.Load(write("b.dot", twoStages))
	if err != nil {
		t.Fatal(err)
	}
	if err := pipeline.RegisterTools(engine.NewRegistry(), []*pipeline.Tool{a, b}); !errors.Is(err, pipeline.ErrToolClash) || !strings.Contains(err.Error(), "a.dot") || !strings.Contains(err.Error(), "b.dot") {
		t.Errorf("two pipelines named two_stages: %v, want ErrToolClash naming both files", err)
	}
	reg := engine.NewRegistry()
	reg.RegisterFrom(engine.PluginSource("p"), a)
	if err := pipeline.RegisterTools(reg, []*pipeline.Tool{b}); !errors.Is(err, pipeline.ErrToolClash) || !strings.Contains(err.Error(), "plugin:p") {
		t.Errorf("a pipeline named as a plugin's tool: %v, want ErrToolClash naming the plugin", err)
	}
}
