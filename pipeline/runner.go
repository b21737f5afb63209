package pipeline

import (
	"context"
	"errors"
	"go.opentelemetry.io/otel/metric"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/morphhost/morph/engine"
)

// Defaults of Limits.
const (
	DefaultMaxNodeVisits      = 25
	DefaultMaxSteps           = 1000
	DefaultMaxGoalGateRetries = 5
	DefaultMaxRestarts        = 5
	DefaultMaxToolOutputBytes = 1 << 20
	DefaultToolTimeout        = 5 * time.Minute
	DefaultMaxParallel        = 4
	// DefaultMaxChildDepth bounds how deeply manager loops may nest child
	// pipelines (a child that names its parent would recurse for ever).
	DefaultMaxChildDepth = 4
)

// Limits bound a run. Zero fields take the defaults; budgets at zero are
// unlimited.
type Limits struct {
	// MaxNodeVisits bounds how often one node runs (the graph's
	// max_node_visits attribute overrides it, a node's its own).
	MaxNodeVisits int
	// MaxSteps bounds the stages a run executes in all; 0 scales it with
	// the graph: max(DefaultMaxSteps, 4 x its nodes).
	MaxSteps int
	// MaxGoalGateRetries bounds the jumps unsatisfied goal gates cause.
	MaxGoalGateRetries int
	// MaxRestarts bounds the loop_restart edges a run takes (0: the
	// graph's max_restarts attribute, else 5; set, it wins over the graph's).
	MaxRestarts int
	// MaxTokens, MaxCostUSD and MaxWallTime are the run's budgets: past
	// one, the run stops after the current stage with a checkpoint
	// (state budget_exceeded) and can be resumed with a larger budget.
	MaxTokens   int
	MaxCostUSD  float64
	MaxWallTime time.Duration
	// MaxChildDepth bounds the nesting of manager loops' child pipelines.
	MaxChildDepth int
	// MaxToolOutputBytes bounds a tool node's output; ToolTimeout is a tool
	// node's timeout when it sets none.
	MaxToolOutputBytes int
	ToolTimeout        time.Duration
}

// Clock is the runner's time: retries' backoff sleeps through it, so tests
// inject one that does not wait.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends, returning ctx.Err() then.
	Sleep(ctx context.Context, d time.Duration) error
}

// Executor is a Clock that also decides how the runner waits and runs
// stages side by side. A Runner whose Clock implements it makes every
// context with a deadline or a cancel through it (the run's wall-time
// budget, a node's timeout, a human gate's, a tool's, the parallel
// handler's cancel of its branches) and runs parallel branches with
// ForEach. The default is Go's: context.WithTimeout, goroutines.
//
// It is the seam for a runner whose stages are not the process's to time
// and schedule: a Temporal workflow runs the runner in workflow code,
// where a deadline must be a durable timer, a branch a workflow coroutine,
// and nothing may block on a Go channel; its Executor provides that
// without the runner knowing Temporal (package temporal).
type Executor interface {
	Clock
	// WithCancel and WithTimeout are context.WithCancel and
	// context.WithTimeout. When the timeout ends the context,
	// context.Cause(ctx) is context.DeadlineExceeded (ctx.Err() may be
	// context.Canceled): the runner tells a timeout by the cause.
	WithCancel(ctx context.Context) (context.Context, context.CancelFunc)
	WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc)
	// ForEach calls fn(ctx, i) for i in [0, n), at most limit at once, and
	// returns when all have returned. fn must use the context it is given,
	// which may carry what the executor needs to run a call beside others.
	ForEach(ctx context.Context, n, limit int, fn func(ctx context.Context, i int))
}

// goExecutor is Go's Executor, around a Clock.
type goExecutor struct{ Clock }

func (goExecutor) WithCancel(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}

func (goExecutor) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

func (goExecutor) ForEach(ctx context.Context, n, limit int, fn func(ctx context.Context, i int)) {
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(ctx, i)
		}()
	}
	wg.Wait()
}

// timedOut reports whether ctx ended by its deadline (its cause, so that
// an Executor may end it by a timer of its own).
func timedOut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), context.DeadlineExceeded)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ToolRunner runs the tools tool nodes name: a morph engine's registry,
// where plugin tools run in their sandbox (see EngineBackend).
type ToolRunner interface {
	// RunTool validates input against the tool's schema and runs it.
	RunTool(ctx context.Context, name string, input map[string]any) (string, error)
	// HasTool reports whether the tool exists.
	HasTool(name string) bool
}

// Runner runs pipelines. Its zero value runs with the default handlers, no
// agent backend (agent stages fail, saying how to configure one), an
// auto-approving interviewer and no tools. A Runner may run several
// pipelines at once.
type Runner struct {
	// Handlers maps handler types to handlers (nil: DefaultHandlerRegistry).
	Handlers *HandlerRegistry
	// Backend runs agent stages.
	Backend CodergenBackend
	// Interviewer answers human gates (nil: AutoApprove).
	Interviewer Interviewer
	// Tools runs tool nodes' tools.
	Tools ToolRunner
	// AllowShell lets tool nodes run tool_command in a shell, outside any
	// sandbox; off unless the operator enables it ([pipeline] allow_shell).
	AllowShell bool
	Limits     Limits
	// OnEvent receives the run's events, on the goroutine of the stage; it
	// must be quick.
	OnEvent func(Event)
	Logger  *slog.Logger
	// Clock is the runner's time (nil: the system's); when it is an
	// Executor, it also makes the run's contexts and runs parallel
	// branches. Rand is a number in [0,1) for the backoff's jitter (nil:
	// math/rand). A host that replays runs (a Temporal workflow) gives
	// both deterministic ones.
	Clock Clock
	Rand  func() float64
	// Rules and Transforms are the host's own validation rules and graph
	// transforms, after the default ones (see Prepare).
	Rules      []Rule
	Transforms []Transform
	// Telemetry records a span for the run and for each stage attempt,
	// and the stages' durations (see telemetry.go); zero: nothing.
	Telemetry engine.Telemetry

	depth int // of a manager loop's child runner: its parent's plus one
	// steer hands a manager loop's steers to its child's run.
	steer *steerBox
}

func (r *Runner) limits() Limits {
	var l Limits
	if r != nil {
		l = r.Limits
	}
	if l.MaxNodeVisits <= 0 {
		l.MaxNodeVisits = DefaultMaxNodeVisits
	}
	if l.MaxGoalGateRetries <= 0 {
		l.MaxGoalGateRetries = DefaultMaxGoalGateRetries
	}
	if l.MaxRestarts <= 0 {
		l.MaxRestarts = DefaultMaxRestarts
	}
	if l.MaxToolOutputBytes <= 0 {
		l.MaxToolOutputBytes = DefaultMaxToolOutputBytes
	}
	if l.ToolTimeout <= 0 {
		l.ToolTimeout = DefaultToolTimeout
	}
	if l.MaxChildDepth <= 0 {
		l.MaxChildDepth = DefaultMaxChildDepth
	}
	return l
}

// run is one run in progress.
type run struct {
	r   *Runner
	g   *Graph
	cfg RunConfig
	lim Limits
	// stageTime is the stage-duration histogram, made once a run (with
	// Runner.Telemetry; see telemetry.go), not at every stage attempt.
	stageTime     metric.Float64Histogram
	stageTimeOnce sync.Once
	// handlers is the runner's registry, resolved once: a Runner without
	// one would otherwise build the default registry at every stage.
	handlers *HandlerRegistry
	store    *ArtifactStore
	pctx     *Context
	cp       *Checkpoint
	started  time.Time
	prior    time.Duration // elapsed before this process (resumes)

	// baseDir is where the pipeline file was: child pipelines' paths are
	// relative to it.
	baseDir string

	// mu guards nodes (the checkpoint's) and the checkpoint's counters that
	// parallel branches update.
	mu    sync.Mutex
	nodes map[string]*NodeResult
	// touched are the nodes whose results changed since the last journal
	// record (under mu).
	touched map[string]struct{}

	jr *journal // the run's journal, open while it runs
	// attrs are each node's run-time attributes, parsed once (newRun).
	attrs map[string]nodeAttrs
	// costWarned: the run has warned that its cost budget cannot hold an
	// unpriced model (warnCostUnknown), once.
	costWarned sync.Once
}

// RunConfig is one run's settings.
type RunConfig struct {
	// RunDir is the run directory: checkpoint, manifest, stage files,
	// artifacts. Required.
	RunDir string
	// Goal, if set, replaces the graph's goal attribute.
	Goal string
	// Source is the pipeline's DOT source: its hash goes into the
	// checkpoint, and a copy into the run directory (pipeline.dot) for
	// resume and render. DotFile is where it came from.
	Source  []byte
	DotFile string
	// Force resumes a run whose checkpoint was made from another source.
	Force bool
	// RunID names a new run (default: its start time and random bytes);
	// a resume keeps its checkpoint's.
	RunID string
	// OnContext, when set, is given the run's context once, before its
	// first stage, so that a host can show it while the run goes on
	// (Context.Snapshot; it is safe for concurrent use). It must not
	// block or change the context.
	OnContext func(*Context)
}

// SourceFile is the copy of the pipeline source in a run directory.
const SourceFile = "pipeline.dot"

// NodeResult is one node's part in a run.
type NodeResult struct {
	Status        StageStatus   `json:"status"`
	Visits        int           `json:"visits"`
	Attempts      int           `json:"attempts"`
	FailureReason string        `json:"failure_reason,omitempty"`
	Notes         string        `json:"notes,omitempty"`
	Duration      time.Duration `json:"duration_ns"`
	Usage         Usage         `json:"usage,omitzero"`
	// History is the status of each of the node's last HistoryMax visits,
	// oldest first; HistoryDropped counts the older ones left out, so a
	// loop's node keeps a bounded record.
	History        []StageStatus `json:"history,omitempty"`
	HistoryDropped int           `json:"history_dropped,omitempty"`
	// EdgesTaken counts the times the run left the node by each of its
	// outgoing edges, keyed by the edge's index among them (Graph.Outgoing,
	// source order). Jumps and retry targets take no edge.
	EdgesTaken map[int]int `json:"edges_taken,omitempty"`
}

// HistoryMax is how many visits' statuses a NodeResult's History keeps.
const HistoryMax = 20

// visited adds a visit that ended in st to the history, dropping the
// oldest past HistoryMax.
func (nr *NodeResult) visited(st StageStatus) {
	if len(nr.History) == HistoryMax {
		copy(nr.History, nr.History[1:])
		nr.History = nr.History[:HistoryMax-1]
		nr.HistoryDropped++
	}
	nr.History = append(nr.History, st)
}

// took counts a departure by the outgoing edge of index i.
func (nr *NodeResult) took(i int) {
	if i < 0 {
		return
	}
	if nr.EdgesTaken == nil {
		nr.EdgesTaken = map[int]int{}
	}
	nr.EdgesTaken[i]++
}

// edgeIndex is e's index among g.Outgoing(e.From), or -1.
func edgeIndex(g *Graph, e *Edge) int {
	if e == nil {
		return -1
	}
	return slices.Index(g.Outgoing(e.From), e)
}

// Result is how a run ended.
type Result struct {
	RunID  string `json:"run_id"`
	RunDir string `json:"run_dir"`
	// State is one of RunSuccess, RunFail, RunCanceled, RunBudget.
	State         string                 `json:"state"`
	FailedNode    string                 `json:"failed_node,omitempty"`
	FailureReason string                 `json:"failure_reason,omitempty"`
	Path          []string               `json:"path"`
	Nodes         map[string]*NodeResult `json:"nodes"`
	Usage         Usage                  `json:"usage"`
	Duration      time.Duration          `json:"duration_ns"`
	// NextNode is where a resume would start (canceled and budget runs).
	NextNode string `json:"next_node,omitempty"`
	// Context is the run's final context.
	Context map[string]any `json:"-"`
	// Over says the run had ended before the Resume that returned this:
	// nothing ran, the Result is the one its checkpoint keeps.
	Over bool `json:"-"`
}

// usedTokens is what the run has spent so far (stages of parallel branches
// in progress not yet counted).
func (x *run) usedTokens() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.cp.Usage.TotalTokens
}
