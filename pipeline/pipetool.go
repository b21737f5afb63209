package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/safetext"
)

// Defaults of ToolOptions.
const (
	// DefaultRunTimeout bounds one call of a pipeline tool: long enough for
	// a multi-stage run on a real model, short enough that a client gone
	// quiet does not hold a run for ever.
	DefaultRunTimeout = 30 * time.Minute
	// DefaultMaxRuns bounds the pipeline runs of a ToolSet at once: each
	// holds model calls and a run directory.
	DefaultMaxRuns = 4
)

// ErrTooManyRuns marks a pipeline tool call refused because its ToolSet
// runs ToolOptions.MaxRuns already; the call is an error naming the limit,
// counted (ToolSet.Refused).
var ErrTooManyRuns = errors.New("pipeline: too many pipeline runs at once")

// ErrRunTimeout is the cause of a pipeline tool call's context once
// ToolOptions.Timeout has passed: the run stops with a checkpoint.
var ErrRunTimeout = errors.New("pipeline: the call's time limit passed")

// ErrToolClash marks a pipeline tool whose name another tool has.
var ErrToolClash = errors.New("pipeline: tool name taken")

// ToolOptions are the settings of the pipelines a ToolSet serves as tools.
type ToolOptions struct {
	// RunsDir is where each call gets its run directory (default "runs").
	RunsDir string
	// Timeout bounds one call (default DefaultRunTimeout).
	Timeout time.Duration
	// MaxRuns bounds the calls running at once across the set's tools
	// (default DefaultMaxRuns); one more is refused at once.
	MaxRuns int
}

// ToolSet serves pipelines as tools (engine.ResultTool) on one Runner: an
// MCP client's call of one runs the pipeline, its stages reported as
// progress, its human gates asked through the caller's elicitation.
type ToolSet struct {
	runner  *Runner
	opts    ToolOptions
	slots   chan struct{}
	refused atomic.Int64
}

// NewToolSet returns a set running its pipelines on r (a copy of it per
// call, with the call's Interviewer and progress); r's OnEvent is still
// called.
func NewToolSet(r *Runner, opts ToolOptions) *ToolSet {
	if opts.RunsDir == "" {
		opts.RunsDir = "runs"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultRunTimeout
	}
	if opts.MaxRuns <= 0 {
		opts.MaxRuns = DefaultMaxRuns
	}
	return &ToolSet{runner: r, opts: opts, slots: make(chan struct{}, opts.MaxRuns)}
}

// Refused is how many calls were refused for ToolOptions.MaxRuns.
func (s *ToolSet) Refused() int64 { return s.refused.Load() }

// Running is how many calls are running now.
func (s *ToolSet) Running() int { return len(s.slots) }

// Tool is a pipeline served as a tool. Its name is the graph's name, else
// its file's stem; its description the graph's label, else its goal; its
// parameters task, the run's goal, and resume, the run_id of a run that
// stopped, to continue.
type Tool struct {
	set  *ToolSet
	file string
	src  []byte
	g    *Graph
	name string
	desc string
}

// maxToolDescription caps a pipeline tool's description: the DOT file's
// label or goal, which a client shows its model.
const maxToolDescription = 1024

// Load reads the pipeline in file and checks it as a run would (Runner.
// Prepare: its errors name the file, line and node), as a tool.
func (s *ToolSet) Load(file string) (*Tool, error) {
	src, g, err := ReadDOTFile(file)
	if err != nil {
		return nil, err
	}
	if _, err := s.runner.Prepare(g.Clone()); err != nil {
		return nil, err
	}
	name := g.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	if err := engine.CheckToolName(name); err != nil {
		return nil, fmt.Errorf("%s: %w (a pipeline tool is named by its digraph's name, else its file's stem)", file, err)
	}
	about := g.Attrs["label"]
	if about == "" {
		about = g.Goal()
	}
	desc := fmt.Sprintf("Runs the pipeline %s (%d nodes)", filepath.Base(file), len(g.Nodes))
	if about != "" {
		desc += ": " + about
	}
	desc += ". The result is the run's outcome as JSON: its status, the last agent stage's answer and the stages that ran."
	return &Tool{set: s, file: file, src: src, g: g, name: name, desc: safetext.Truncate(desc, maxToolDescription)}, nil
}

// RegisterTools registers tools in reg as the embedding host's, refusing
// (ErrToolClash, naming both) a name that reg or another of them has
// already.
func RegisterTools(reg *engine.Registry, tools []*Tool) error {
	seen := map[string]*Tool{}
	for _, t := range tools {
		if o := seen[t.name]; o != nil {
			return fmt.Errorf("%w: pipelines %s and %s are both tool %s: rename one digraph", ErrToolClash, o.file, t.file, t.name)
		}
		if src, ok := reg.Source(t.name); ok {
			return fmt.Errorf("%w: pipeline %s is tool %s, which %s has already: rename the digraph", ErrToolClash, t.file, t.name, src)
		}
		seen[t.name] = t
	}
	for _, t := range tools {
		reg.Register(t)
	}
	return nil
}

// Name is the tool's name.
func (t *Tool) Name() string { return t.name }

// Description says what the pipeline does.
func (t *Tool) Description() string { return t.desc }

// ParameterSchema is an object with the run's task (required unless the
// graph has a goal, which it replaces) and resume, a run_id.
func (t *Tool) ParameterSchema() string {
	task := map[string]any{"type": "string", "description": "The run's goal ($goal in the stages' prompts)."}
	resume := map[string]any{"type": "string", "pattern": runIDPattern.String(),
		"description": "The run_id of a run of this pipeline that stopped (canceled, past its time limit or a budget): the call continues it from its checkpoint; a stage that was running runs again."}
	schema := map[string]any{"type": "object", "properties": map[string]any{"task": task, "resume": resume}, "additionalProperties": false}
	if goal := t.g.Goal(); goal != "" {
		task["description"] = "The run's goal ($goal in the stages' prompts), in place of the pipeline's: " + safetext.Truncate(goal, 200)
	} else {
		schema["required"] = []string{"task"}
	}
	b, _ := json.Marshal(schema) // maps of strings
	return string(b)
}

// Execute runs the pipeline; see ExecuteResult.
func (t *Tool) Execute(ctx context.Context, params map[string]any) (string, error) {
	res, err := t.ExecuteResult(ctx, params)
	return res.Output, err
}

// ToolOutcome is a pipeline tool call's result, as JSON.
type ToolOutcome struct {
	Status string `json:"status"`
	// Answer is the last agent stage's output (LastStage), cut as the
	// context keeps it.
	Answer        string   `json:"answer,omitempty"`
	LastStage     string   `json:"last_stage,omitempty"`
	FailedNode    string   `json:"failed_node,omitempty"`
	FailureReason string   `json:"failure_reason,omitempty"`
	NextNode      string   `json:"next_node,omitempty"`
	Path          []string `json:"path"`
	RunID         string   `json:"run_id"`
	RunDir        string   `json:"run_dir"`
	TotalTokens   int      `json:"total_tokens"`
	CostUSD       float64  `json:"cost_usd"`
	DurationMS    int64    `json:"duration_ms"`
}

// ExecuteResult runs the pipeline with params' task as its goal, in a new
// run directory under ToolOptions.RunsDir, within ToolOptions.Timeout.
// Each stage's start, end and retry is a progress report to ctx's
// engine.CallNotifier; a human gate asks through it when it is an
// engine.CallElicitor (else, or when that fails, the gate takes its
// human.default_choice, or fails). With params' resume (a run_id), it
// continues that run from its checkpoint instead (Runner.Resume: a run
// that is over runs nothing and answers its outcome again). A run that
// succeeds is the outcome; one that fails or stops is an error naming the
// node and saying how to resume, followed by the outcome.
func (t *Tool) ExecuteResult(ctx context.Context, params map[string]any) (abi.ToolCallOutput, error) {
	s := t.set
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		s.refused.Add(1)
		err := fmt.Errorf("%w: %d are running, the most at once ([mcp] max_pipeline_runs); retry once one has ended", ErrTooManyRuns, s.opts.MaxRuns)
		s.runner.logger().WarnContext(ctx, "pipeline tool call refused", "tool", t.name, "error", err)
		return abi.ToolCallOutput{}, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.opts.Timeout, fmt.Errorf("%w (%s, [mcp] pipeline_timeout)", ErrRunTimeout, s.opts.Timeout))
	defer cancel()
	task, _ := params["task"].(string)

	r := *s.runner // the call's Interviewer, OnEvent and backend on the set's runner
	n := engine.CallNotifierOf(ctx)
	r.Interviewer = callInterviewer{n}
	p := &progress{n: n}
	onEvent := s.runner.OnEvent
	r.OnEvent = func(ev Event) {
		if onEvent != nil {
			onEvent(ev)
		}
		p.event(ev)
	}
	if b, ok := r.Backend.(*EngineBackend); ok { // one per run: it keeps the run's threads
		own := b.fork()
		defer func() {
			if err := own.Close(context.WithoutCancel(ctx)); err != nil {
				r.logger().WarnContext(ctx, "pipeline tool: ending the run's threads", "tool", t.name, "error", err)
			}
		}()
		r.Backend = own
		if r.Tools == ToolRunner(b) {
			r.Tools = own
		}
	}
	var res *Result
	var err error
	if id, _ := params["resume"].(string); id != "" {
		if !runIDPattern.MatchString(id) { // the schema says so; a path must not come from a client unchecked
			return abi.ToolCallOutput{}, fmt.Errorf("resume %q is not a run_id", safetext.Line(id, 100))
		}
		res, err = r.Resume(ctx, t.g, RunConfig{RunDir: t.runDir(id), Goal: task, Source: t.src, DotFile: t.file})
	} else {
		id := newRunID(r.clock().Now())
		res, err = r.Run(ctx, t.g, RunConfig{RunDir: t.runDir(id), RunID: id, Goal: task, Source: t.src, DotFile: t.file})
	}
	if err != nil {
		return abi.ToolCallOutput{}, fmt.Errorf("pipeline %s: %w", t.file, err)
	}
	out := ToolOutcome{Status: res.State, FailedNode: res.FailedNode, FailureReason: res.FailureReason, NextNode: res.NextNode,
		Path: res.Path, RunID: res.RunID, RunDir: res.RunDir, TotalTokens: res.Usage.TotalTokens, CostUSD: res.Usage.CostUSD,
		DurationMS: res.Duration.Milliseconds()}
	out.Answer, _ = res.Context[KeyLastResponse].(string)
	out.LastStage, _ = res.Context[KeyLastStage].(string)
	if out.Path == nil {
		out.Path = []string{}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return abi.ToolCallOutput{}, err
	}
	switch res.State {
	case RunSuccess:
		return abi.ToolCallOutput{Output: string(b), Structured: b}, nil
	case RunFail:
		return abi.ToolCallOutput{}, fmt.Errorf("pipeline %s failed at node %s: %s\n%s", t.name, res.FailedNode, res.FailureReason, b)
	}
	why := res.FailureReason
	if cause := context.Cause(ctx); errors.Is(cause, ErrRunTimeout) {
		why = cause.Error()
	}
	return abi.ToolCallOutput{}, fmt.Errorf("pipeline %s stopped before node %s (%s): %s; its run directory keeps a checkpoint: a call with resume %q continues it (or morph pipeline resume %s)\n%s",
		t.name, res.NextNode, res.State, why, res.RunID, res.RunDir, b)
}

// runIDPattern is what newRunID makes: a call's resume must match it.
var runIDPattern = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}$`)

// runDir is the run directory of the call with run id.
func (t *Tool) runDir(id string) string {
	return filepath.Join(t.set.opts.RunsDir, RunDirName(t.g, t.file)+"-"+id)
}

// fork is a backend on b's engines with no threads of its own yet.
func (b *EngineBackend) fork() *EngineBackend {
	return &EngineBackend{Engine: b.Engine, Options: b.Options, ForEndpoint: b.ForEndpoint, SessionID: b.SessionID}
}

// RunDirName is the start of a run directory's name: the graph's name,
// else file's stem, with what is not a letter, digit, '-' or '_' as '_'.
func RunDirName(g *Graph, file string) string {
	name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	if g.Name != "" {
		name = g.Name
	}
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// progress reports a call's stages (their start, end and retries) and
// gates (the question, the answer taken) to its notifier, numbered in the
// order they happen (parallel branches report at once; MCP's progress
// must increase).
type progress struct {
	n    engine.CallNotifier
	mu   sync.Mutex
	done float64
}

func (p *progress) event(ev Event) {
	if p.n == nil || p.n.ProgressToken() == nil {
		return
	}
	who := safetext.Line(ev.NodeID, 100)
	if ev.Branch != "" {
		who += " (branch " + safetext.Line(ev.Branch, 100) + ")"
	}
	var msg string
	switch ev.Kind {
	case EventStageStarted:
		msg = "stage " + who + " started"
	case EventStageCompleted, EventStageFailed:
		msg = fmt.Sprintf("stage %s %s", who, ev.Status)
		if ev.Message != "" {
			msg += ": " + safetext.Line(ev.Message, 500)
		}
	case EventStageRetrying:
		msg = fmt.Sprintf("stage %s retrying (attempt %d)", who, ev.Attempt)
	case EventInterviewStarted:
		msg = "stage " + who + " asks: " + safetext.Line(ev.Message, 500)
	case EventInterviewDone:
		msg = "stage " + who + " chose " + safetext.Line(ev.Message, 500)
	case EventInterviewTimeout:
		msg = "stage " + who + ": " + safetext.Line(ev.Message, 500)
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.n.Progress(p.done, 0, msg)
}

// callInterviewer asks a human gate's question through the call's
// elicitation, in the form of its type: a multiple-choice question's
// choices as an enum (property choice), a yes/no or confirmation
// question as a boolean (property yes), a freeform question as a string
// of at most maxAnswerBytes (property text). A caller that cannot be
// asked (no notifier, no elicitation, the client refusing) gets the
// gate's default choice, else the gate fails; a user who declines fails
// it.
type callInterviewer struct{ n engine.CallNotifier }

// Ask elicits the answer.
func (c callInterviewer) Ask(ctx context.Context, q Question) (Answer, error) {
	el, ok := c.n.(engine.CallElicitor)
	if !ok {
		return orDefault(q, errors.New("the caller cannot be asked (no elicitation)"))
	}
	key := "choice"
	var prop map[string]any
	switch q.Kind() {
	case QuestionYesNo, QuestionConfirmation:
		key = "yes"
		prop = map[string]any{"type": "boolean", "title": "Yes", "description": "yes (true) or no (false)"}
	case QuestionFreeform:
		key = "text"
		prop = map[string]any{"type": "string", "title": "Answer", "maxLength": maxAnswerBytes}
	default:
		labels := make([]string, len(q.Choices))
		for i, ch := range q.Choices {
			labels[i] = ch.Label
		}
		prop = map[string]any{"type": "string", "title": "Choice", "enum": labels}
	}
	params, err := json.Marshal(map[string]any{
		"message": fmt.Sprintf("Pipeline gate %s: %s", q.NodeID, q.Text),
		"requestedSchema": map[string]any{"type": "object", "required": []string{key},
			"properties": map[string]any{key: prop}},
	})
	if err != nil {
		return Answer{}, err
	}
	raw, err := el.Elicit(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return Answer{}, ctx.Err() // the gate's timeout (its default), or the run's end
		}
		return orDefault(q, fmt.Errorf("the client could not be asked: %w", err))
	}
	var res struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return Answer{}, fmt.Errorf("the client's answer: %w", err)
	}
	if res.Action != "accept" {
		return Answer{}, fmt.Errorf("the client's user did not choose (%s)", safetext.Line(res.Action, 40))
	}
	switch v := res.Content[key].(type) {
	case bool:
		if v {
			return Answer{Value: AnswerYes}, nil
		}
		return Answer{Value: AnswerNo}, nil
	case string:
		if key == "text" {
			return Answer{Text: safetext.Truncate(v, maxAnswerBytes)}, nil
		}
		return Answer{Choice: v}, nil
	}
	return Answer{}, fmt.Errorf("the client's answer has no %s of the type asked", key)
}

// orDefault is the gate's default choice when it has one, else why it
// cannot be answered.
func orDefault(q Question, why error) (Answer, error) {
	if q.Default != "" {
		return Answer{Choice: q.Default}, nil
	}
	return Answer{}, fmt.Errorf("%w, and the gate has no human.default_choice", why)
}
