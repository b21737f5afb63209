package pipeline

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/morphhost/morph/internal/safetext"
)

func (r *Runner) handlers() *HandlerRegistry {
	if r.Handlers == nil {
		return DefaultHandlerRegistry()
	}
	return r.Handlers
}

func (r *Runner) clock() Clock {
	if r == nil || r.Clock == nil {
		return realClock{}
	}
	return r.Clock
}

// executor is the runner's Clock as an Executor: itself when it is one,
// else Go's around it.
func (r *Runner) executor() Executor {
	c := r.clock()
	if e, ok := c.(Executor); ok {
		return e
	}
	return goExecutor{c}
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// Prepare applies the transforms to g (the default ones, then
// r.Transforms) and validates it with what the runner has: its handler
// types, the stage-handler plugins registered (type wasm:<plugin>), its
// tools and shell setting, the default rules and r.Rules. A ToolRunner
// that also lists its tools (ToolNames() []string, as EngineBackend does)
// gets a misspelled tool node the closest name. It returns the
// diagnostics, and a *ValidationError when any is an ERROR.
func (r *Runner) Prepare(g *Graph) ([]Diagnostic, error) {
	handlers := r.handlers()
	opts := ValidateOptions{KnownTypes: handlers.Types(), AllowShell: r.AllowShell,
		Plugins: func(name string) bool { return handlers.Get(TypeWasmPrefix+name) != nil }}
	if r.Tools != nil {
		opts.Tools = r.Tools.HasTool
		if n, ok := r.Tools.(interface{ ToolNames() []string }); ok {
			opts.ToolNames = n.ToolNames
		}
	}
	return transformAndValidate(g, opts, r.Transforms, r.Rules)
}

// ValidateGraph applies the default transforms to g and validates the
// graph alone: with the built-in handler types, and neither plugins nor
// tools nor the shell setting checked, which are a runner's (see
// Prepare). It returns the diagnostics, and a *ValidationError when any
// is an ERROR.
func ValidateGraph(g *Graph) ([]Diagnostic, error) {
	return transformAndValidate(g, ValidateOptions{AllowShell: true}, nil, nil)
}

// transformAndValidate is Prepare and ValidateGraph: the transforms, then
// validation with opts.
func transformAndValidate(g *Graph, opts ValidateOptions, transforms []Transform, rules []Rule) ([]Diagnostic, error) {
	if err := ApplyTransformsWith(g, transforms...); err != nil {
		return nil, err
	}
	diags := Validate(g, opts, rules...)
	if HasErrors(diags) {
		return diags, &ValidationError{File: g.File, Diagnostics: diags}
	}
	return diags, nil
}

// ErrRunDir is the error of a run directory a run cannot start in: none
// given, one that holds a run already, or one that holds other files.
var ErrRunDir = errors.New("run directory")

// prepare is Prepare for a run: on a copy of g, with the goal set.
func (r *Runner) prepare(g *Graph, goal string) (*Graph, []Diagnostic, error) {
	g = g.Clone()
	if goal != "" {
		g.Attrs["goal"] = goal
	}
	diags, err := r.Prepare(g)
	return g, diags, err
}

// warn reports the validation warnings as events.
func (x *run) warn(diags []Diagnostic) {
	for _, d := range diags {
		if d.Severity == SeverityWarning {
			x.emit(Event{Kind: EventWarning, NodeID: d.NodeID, Message: fmt.Sprintf("%s: %s: %s", x.g.Where(d.Line), d.Rule, d.Message)})
		}
	}
}

// Run runs g from its start node. It works on a copy of g, to which it
// applies the transforms, and validates it first (see Prepare): a graph
// with an ERROR is not run; its warnings are EventWarning events. The
// returned error is for what kept the run from running or recording
// (validation, the run directory); how the pipeline itself ended is the
// Result's State.
func (r *Runner) Run(ctx context.Context, g *Graph, cfg RunConfig) (*Result, error) {
	g, diags, err := r.prepare(g, cfg.Goal)
	if err != nil {
		return nil, err
	}
	if cfg.RunDir == "" {
		return nil, fmt.Errorf("%w: RunConfig.RunDir is required", ErrRunDir)
	}
	if err := os.MkdirAll(cfg.RunDir, 0o755); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	release, err := lockRunDir(cfg.RunDir)
	if err != nil {
		return nil, err
	}
	defer release()
	if _, err := os.Stat(filepath.Join(cfg.RunDir, CheckpointFile)); err == nil {
		return nil, fmt.Errorf("%w: %s already holds a run: resume it (--resume %s) if it stopped, or choose another run directory", ErrRunDir, cfg.RunDir, cfg.RunDir)
	}
	if entries, err := os.ReadDir(cfg.RunDir); err == nil && slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() != LockFile }) {
		return nil, fmt.Errorf("%w: %s is not empty and holds no run: choose a new or empty run directory", ErrRunDir, cfg.RunDir)
	}
	start := g.StartNode()
	id := cfg.RunID
	if id == "" {
		id = newRunID(r.clock().Now())
	}
	hash := sourceHash(cfg.Source)
	dotFile := cfg.DotFile
	if dotFile != "" {
		if abs, err := filepath.Abs(dotFile); err == nil {
			dotFile = abs // a resume from another directory finds the child pipelines
		}
	}
	man := Manifest{RunID: id, Name: g.Name, Goal: g.Goal(), DotFile: dotFile, GraphHash: hash, StartedAt: r.clock().Now().UTC()}
	if err := SaveManifest(cfg.RunDir, &man); err != nil {
		return nil, err
	}
	if cfg.Source != nil {
		if err := writeFileAtomic(filepath.Join(cfg.RunDir, SourceFile), cfg.Source); err != nil {
			return nil, fmt.Errorf("run directory: %w", err)
		}
	}
	pctx := NewContext()
	pctx.Set(KeyGoal, g.Goal())
	cp := &Checkpoint{RunID: id, GraphHash: hash, State: RunRunning, NextNode: start.ID,
		Outcomes: map[string]*Outcome{}, RetryCounts: map[string]int{}, Visits: map[string]int{}, Nodes: map[string]*NodeResult{}}
	x := r.newRun(g, cfg, pctx, cp, 0, dotFile)
	// checkpoint.json from the start: the directory holds a run.
	if err := x.startJournal(); err != nil {
		return nil, err
	}
	defer x.jr.close()
	x.emit(Event{Kind: EventPipelineStarted, Message: g.Goal()})
	x.warn(diags)
	return x.tracedLoop(ctx, start.ID, nil, nil)
}

// Resume continues the run in cfg.RunDir from the node its checkpoint
// names next, with the goal it started with unless cfg.Goal is set. g must
// be the pipeline it ran (the checkpoint's source hash is compared with
// cfg.Source's unless cfg.Force). A node that was running when the run
// stopped runs again: its effects inside the node are not durable across
// a crash. A run that is over (success or fail) does not run again: its
// Result is the one its checkpoint keeps, with Over set. Temporary files
// that a process killed mid-write left in the run directory are removed
// (and logged) first.
func (r *Runner) Resume(ctx context.Context, g *Graph, cfg RunConfig) (*Result, error) {
	// The lock of a directory that holds a run (LoadCheckpoint says what
	// is wrong with one that does not).
	if _, err := os.Stat(filepath.Join(cfg.RunDir, CheckpointFile)); err == nil {
		release, err := lockRunDir(cfg.RunDir)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	cp, torn, err := loadCheckpoint(cfg.RunDir)
	if err != nil {
		return nil, err
	}
	if torn > 0 {
		r.logger().Warn("left out the torn last record of a stopped run's journal: its node runs again", "path", safetext.Escape(filepath.Join(cfg.RunDir, JournalFile)), "bytes", torn)
	}
	// Under the lock no process writes here: a temporary file is one a
	// process killed between creating and renaming it left behind.
	removed, err := removeOrphanTemps(cfg.RunDir)
	for _, path := range removed {
		r.logger().Warn("removed a temporary file a stopped run left", "path", safetext.Escape(path))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: removing the temporary files a stopped run left: %w", cfg.RunDir, err)
	}
	if cp.State == RunSuccess || cp.State == RunFail {
		return cp.endResult(cfg.RunDir), nil
	}
	man, err := LoadManifest(cfg.RunDir)
	if err != nil {
		return nil, err
	}
	if cfg.Source != nil && cp.GraphHash != "" && sourceHash(cfg.Source) != cp.GraphHash && !cfg.Force {
		return nil, fmt.Errorf("%s: the pipeline source differs from the one the run started with (resume with the run's %s, or force it)", cfg.RunDir, SourceFile)
	}
	goal := cfg.Goal
	if goal == "" {
		goal = man.Goal
	}
	g, diags, err := r.prepare(g, goal)
	if err != nil {
		return nil, err
	}
	if cp.NextNode == "" || g.Node(cp.NextNode) == nil {
		return nil, fmt.Errorf("%s: the checkpoint's next node %q is not in the graph", cfg.RunDir, cp.NextNode)
	}
	pctx := NewContext()
	pctx.restore(cp.Context, cp.Log)
	for _, m := range []*map[string]int{&cp.RetryCounts, &cp.Visits} {
		if *m == nil {
			*m = map[string]int{}
		}
	}
	if cp.Outcomes == nil {
		cp.Outcomes = map[string]*Outcome{}
	}
	if cp.Nodes == nil {
		cp.Nodes = map[string]*NodeResult{}
	}
	cp.State = RunRunning
	x := r.newRun(g, cfg, pctx, cp, cp.Elapsed, man.DotFile)
	// The folded state becomes checkpoint.json and the journal starts
	// empty.
	if err := x.startJournal(); err != nil {
		return nil, err
	}
	defer x.jr.close()
	x.emit(Event{Kind: EventPipelineStarted, NodeID: cp.NextNode, Message: "resumed"})
	x.warn(diags)
	var prev *Outcome
	if cp.CurrentNode != "" {
		prev = cp.Outcomes[cp.CurrentNode]
	}
	return x.tracedLoop(ctx, cp.NextNode, prev, nil)
}

func (r *Runner) newRun(g *Graph, cfg RunConfig, pctx *Context, cp *Checkpoint, prior time.Duration, dotFile string) *run {
	store := NewArtifactStore(filepath.Join(cfg.RunDir, "artifacts"))
	x := &run{r: r, g: g, cfg: cfg, lim: r.limits(), handlers: r.handlers(), store: store, pctx: pctx, cp: cp,
		started: r.clock().Now(), prior: prior, nodes: cp.Nodes, touched: map[string]struct{}{}}
	if x.lim.MaxSteps <= 0 { // [pipeline] max_steps wins, then the graph's
		x.lim.MaxSteps = x.graphInt("max_steps", 0)
	}
	if x.lim.MaxSteps <= 0 {
		x.lim.MaxSteps = scaledMaxSteps(g)
	}
	x.attrs = make(map[string]nodeAttrs, len(g.Nodes))
	for _, n := range g.Nodes {
		x.attrs[n.ID] = x.attrsOf(n)
	}
	for _, e := range g.Edges { // g is the run's copy (prepare): its weights do not change
		e.weight = e.Weight()
		e.weighed = true
	}
	if dotFile != "" {
		x.baseDir = filepath.Dir(dotFile)
	} else if g.File != "" {
		x.baseDir = filepath.Dir(g.File)
	}
	if cfg.OnContext != nil {
		cfg.OnContext(pctx)
	}
	return x
}

// scaledMaxSteps is the step limit of a run of g when none is set: every
// node four runs on average, so a long chain is not taken for a loop
// (max_node_visits still bounds each node).
func scaledMaxSteps(g *Graph) int { return max(DefaultMaxSteps, 4*len(g.Nodes)) }

func (x *run) emit(ev Event) {
	if x.r.OnEvent == nil {
		return
	}
	ev.RunID = x.cp.RunID
	if ev.Time.IsZero() {
		ev.Time = x.r.clock().Now()
	}
	x.r.OnEvent(ev)
}

func (x *run) elapsed() time.Duration { return x.prior + x.r.clock().Now().Sub(x.started) }

// loop walks the graph from cur until an exit, a failure, a budget or the
// context ends it.
func (x *run) loop(ctx context.Context, cur string, prev *Outcome, via *Edge) (*Result, error) {
	// The wall-time budget also ends a stage in progress (a human gate
	// waiting, a long agent): it is the stages' context's deadline.
	wctx := ctx
	if x.lim.MaxWallTime > 0 {
		var cancel context.CancelFunc
		wctx, cancel = x.r.executor().WithTimeout(ctx, x.lim.MaxWallTime-x.elapsed())
		defer cancel()
	}
	for {
		if err := ctx.Err(); err != nil {
			return x.stop(RunCanceled, cur, "", "interrupted: "+err.Error())
		}
		if reason := x.overBudget(); reason != "" {
			return x.stop(RunBudget, cur, "", reason)
		}
		node := x.g.Node(cur)
		attrs := x.attrsOf(node)
		if len(x.cp.Completed) >= x.lim.MaxSteps {
			return x.stop(RunFail, "", cur, fmt.Sprintf("the run took %d stages, its limit: a loop that never ends? (raise [pipeline] max_steps in morph.toml, or the graph's max_steps, if not; with neither, it is max(%d, 4 x the graph's %d nodes))",
				x.lim.MaxSteps, DefaultMaxSteps, len(x.g.Nodes)))
		}
		if attrs.typ == TypeExit {
			if gate, target := x.goalGates(); gate != "" {
				if target == "" {
					return x.stop(RunFail, "", gate, fmt.Sprintf("goal gate %s is not satisfied (%s) and it has no retry_target", gate, x.gateStatus(gate)))
				}
				x.cp.GoalGateRetries++
				if x.cp.GoalGateRetries > x.lim.MaxGoalGateRetries {
					return x.stop(RunFail, "", gate, fmt.Sprintf("goal gate %s is still not satisfied after %d retries", gate, x.lim.MaxGoalGateRetries))
				}
				x.pctx.AppendLog(fmt.Sprintf("%s: goal gate %s not satisfied, back to %s", cur, gate, target))
				cur, via = target, nil
				continue
			}
		}
		maxVisits := attrs.maxVisits
		if x.cp.Visits[cur] >= maxVisits {
			return x.stop(RunFail, "", cur, fmt.Sprintf("node %s would run a %d%s time, past max_node_visits=%d", cur, maxVisits+1, ordinal(maxVisits+1), maxVisits))
		}
		x.cp.Visits[cur]++
		x.takeSteer()

		out, err := x.execute(wctx, node, x.pctx, prev, via, "")
		if err != nil { // ended inside the stage: it runs again on resume
			x.cp.Visits[cur]--
			if ctx.Err() == nil {
				return x.stop(RunBudget, cur, "", fmt.Sprintf("wall-time budget spent in stage %s: %s (--max-wall-time)", cur, x.lim.MaxWallTime))
			}
			return x.stop(RunCanceled, cur, "", "interrupted in stage "+cur+": "+err.Error())
		}
		x.record(node, out)

		if attrs.typ == TypeExit {
			x.cp.CurrentNode, x.cp.NextNode = cur, ""
			return x.stop(RunSuccess, "", "", "")
		}
		next, edge, reason := x.next(node, out)
		if next == "" {
			x.cp.CurrentNode = cur
			return x.stop(RunFail, "", cur, reason)
		}
		if edge != nil {
			x.mu.Lock()
			x.nodes[cur].took(edgeIndex(x.g, edge))
			x.mu.Unlock()
		}
		restart, past := x.restart(edge, cur, next)
		if past != "" {
			x.cp.CurrentNode = cur
			return x.stop(RunFail, "", cur, past)
		}
		if err := x.appendRecord(cur, next, restart); err != nil {
			return nil, err
		}
		prev, via, cur = out, edge, next
		if restart > 0 { // a fresh loop starts at next, as a resume would
			prev, via = nil, nil
		}
	}
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

// next picks the node after node: a jump, else SelectEdge, else for a FAIL
// the retry targets. An empty next comes with the reason the run fails.
func (x *run) next(node *Node, out *Outcome) (string, *Edge, string) {
	if out.JumpTo != "" && out.Status != StatusFail && x.g.Node(out.JumpTo) != nil {
		return out.JumpTo, nil, "" // a FAIL routes as any other: its edges, then the retry targets
	}
	if e := SelectEdge(node, out, x.pctx, x.g); e != nil {
		return e.To, e, ""
	}
	if out.Status == StatusFail {
		for _, t := range []string{node.Attrs["retry_target"], node.Attrs["fallback_retry_target"], x.g.Attrs["retry_target"], x.g.Attrs["fallback_retry_target"]} {
			if t = strings.TrimSpace(t); t != "" && x.g.Node(t) != nil {
				return t, nil, ""
			}
		}
		reason := out.FailureReason
		if reason == "" {
			reason = "no reason given"
		}
		return "", nil, fmt.Sprintf("stage %s failed (%s), and no edge condition matches the failure and no retry_target is set", node.ID, reason)
	}
	return "", nil, fmt.Sprintf("no edge leaves %s for its outcome %s", node.ID, out.Status)
}

// nodeAttrs are the attributes the runner reads at every visit of a
// node, parsed once per run (a bad value is the default: validation
// reported it).
type nodeAttrs struct {
	typ          string // Node.Type
	maxRetries   int
	allowPartial bool
	timeout      time.Duration
	maxVisits    int
}

// parseAttrs reads node's nodeAttrs, with the graph's default_max_retries
// and max_node_visits (else the limit's) as defaults.
func (x *run) parseAttrs(node *Node, graphRetries, graphVisits int) nodeAttrs {
	a := nodeAttrs{typ: node.Type()}
	var err error
	if a.maxRetries, err = node.Int("max_retries", graphRetries); err != nil || a.maxRetries < 0 {
		a.maxRetries = 0
	}
	a.allowPartial, _ = node.Bool("allow_partial", false)
	a.timeout, _ = node.Duration("timeout", 0)
	if a.typ == TypeTool || a.typ == TypeHuman {
		a.timeout = 0 // the handler applies it: a tool's says so, a gate's takes its default choice
	}
	if a.maxVisits, err = node.Int("max_node_visits", graphVisits); err != nil || a.maxVisits <= 0 {
		a.maxVisits = x.lim.MaxNodeVisits
	}
	return a
}

// maxVisits is how often node may run: its max_node_visits, else the
// graph's, else the limit's.
func (x *run) maxVisits(node *Node) int { return x.attrsOf(node).maxVisits }

// attrsOf is node's nodeAttrs: parsed at the run's start, or now for a
// node the graph had not then.
func (x *run) attrsOf(node *Node) nodeAttrs {
	if a, ok := x.attrs[node.ID]; ok {
		return a
	}
	return x.parseAttrs(node, x.graphInt("default_max_retries", 0), x.graphInt("max_node_visits", x.lim.MaxNodeVisits))
}

func (x *run) graphInt(key string, def int) int {
	v, err := intAttr(x.g.Attrs, key, def, "graph")
	if err != nil {
		return def
	}
	return v
}

// execute runs a node's handler with its retries, in the main walk or a
// parallel branch, and returns its final outcome; an error only when ctx
// ended.
func (x *run) execute(ctx context.Context, node *Node, pctx *Context, prev *Outcome, via *Edge, branch string) (*Outcome, error) {
	a := x.attrsOf(node)
	h := x.handlers.Get(a.typ)
	if h == nil && !strings.HasPrefix(a.typ, TypeWasmPrefix) {
		// Spec 4.2: an explicit type no handler runs falls back to the
		// shape's handler (type_known warns); a missing plugin stays a FAIL.
		h = x.handlers.Get(node.ShapeType())
	}
	maxRetries, allowPartial, timeout := a.maxRetries, a.allowPartial, a.timeout
	pctx.Set(KeyCurrentNode, node.ID)
	nr := x.nodeResult(node.ID)
	var out *Outcome
	worked := false // some attempt wrote a stage file: status.json goes beside it
	for attempt := 1; ; attempt++ {
		ex := &Execution{Graph: x.g, RunID: x.cp.RunID, RunDir: x.cfg.RunDir, BaseDir: x.baseDir, Previous: prev, Edge: via, Branch: branch, Attempt: attempt, Runner: x.r,
			run: x, node: node.ID}
		x.emit(Event{Kind: EventStageStarted, NodeID: node.ID, Branch: branch, Attempt: attempt})
		began := x.r.clock().Now()
		out = x.call(ctx, h, node, pctx, ex, timeout)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		d := x.r.clock().Now().Sub(began)
		worked = worked || ex.wrote.Load()
		x.mu.Lock()
		nr.Attempts++
		nr.Duration += d
		nr.Usage.Add(out.Usage)
		x.mu.Unlock()
		if out.Status != StatusRetry {
			kind := EventStageCompleted
			if out.Status == StatusFail {
				kind = EventStageFailed
			}
			x.emit(Event{Kind: kind, NodeID: node.ID, Branch: branch, Attempt: attempt, Status: out.Status, Message: out.FailureReason, Duration: d, Usage: out.Usage})
			if worked {
				writeStatusFile(ex, node.ID, out)
			}
			return out, nil
		}
		if attempt > maxRetries {
			if allowPartial {
				out.Status = StatusPartialSuccess
			} else {
				out.Status = StatusFail
				if out.FailureReason == "" {
					out.FailureReason = fmt.Sprintf("still asking to retry after %d attempts", attempt)
				}
			}
			x.emit(Event{Kind: EventStageFailed, NodeID: node.ID, Branch: branch, Attempt: attempt, Status: out.Status, Message: out.FailureReason, Duration: d, Usage: out.Usage})
			if worked {
				writeStatusFile(ex, node.ID, out)
			}
			return out, nil
		}
		wait := x.backoff(attempt)
		pctx.Set(keyRetryPrefix+node.ID, attempt)
		x.mu.Lock()
		x.cp.RetryCounts[node.ID] = attempt
		x.mu.Unlock()
		x.emit(Event{Kind: EventStageRetrying, NodeID: node.ID, Branch: branch, Attempt: attempt, Status: StatusRetry, Message: fmt.Sprintf("retrying in %s", wait.Round(time.Millisecond)), Duration: d})
		if err := x.r.clock().Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// Backoff: 200 ms doubling, at most 60 s, times a jitter in [0.5, 1.5).
const (
	backoffBase = 200 * time.Millisecond
	backoffMax  = 60 * time.Second
)

func (x *run) backoff(attempt int) time.Duration {
	d := backoffBase
	for i := 1; i < attempt && d < backoffMax; i++ {
		d *= 2
	}
	d = min(d, backoffMax)
	j := 0.5
	if x.r.Rand != nil {
		j = x.r.Rand()
	} else {
		j = rand.Float64()
	}
	return time.Duration(float64(d) * (0.5 + j))
}

// call runs the handler once, turning an error, a panic, a nil outcome and
// an unknown status into FAIL.
func (x *run) call(ctx context.Context, h Handler, node *Node, pctx *Context, ex *Execution, timeout time.Duration) (out *Outcome) {
	if h == nil {
		return Fail("no handler for type %q of node %s", node.Type(), node.ID)
	}
	hctx, span := x.startStage(withExecution(ctx, ex), node, ex)
	defer func() { span.end(out) }() // after the recovery below: the outcome is final
	if timeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = x.r.executor().WithTimeout(hctx, timeout)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			x.r.logger().Error("pipeline handler panicked", "node", node.ID, "type", node.Type(), "panic", p, "stack", string(debug.Stack()))
			out = Fail("handler %s panicked on node %s: %v", h.Type(), node.ID, p)
		}
	}()
	o, err := h.Execute(hctx, node, pctx, x.store)
	switch {
	case err != nil && timeout > 0 && ctx.Err() == nil && timedOut(hctx):
		return Fail("node %s timed out after %s (its timeout attribute)", node.ID, timeout)
	case errors.Is(err, ErrTransient): // retried as a RETRY is, within max_retries
		return &Outcome{Status: StatusRetry, FailureReason: safetext.Truncate(err.Error(), 4000)}
	case err != nil:
		return Fail("%s", safetext.Truncate(err.Error(), 4000))
	case o == nil:
		return Fail("handler %s returned no outcome for node %s", h.Type(), node.ID)
	}
	st, perr := ParseStageStatus(string(o.Status))
	if perr != nil {
		return Fail("handler %s on node %s: %v", h.Type(), node.ID, perr)
	}
	o.Status = st
	return o
}

func (x *run) nodeResult(id string) *NodeResult {
	x.mu.Lock()
	defer x.mu.Unlock()
	nr := x.nodes[id]
	if nr == nil {
		nr = &NodeResult{}
		x.nodes[id] = nr
	}
	x.touched[id] = struct{}{} // the caller changes it: the next record holds it
	return nr
}

// record applies a node's outcome to the run: context, usage, path, log.
func (x *run) record(node *Node, out *Outcome) {
	x.pctx.Apply(out.ContextUpdates)
	x.pctx.Set(KeyOutcome, string(out.Status))
	x.pctx.Set(KeyPreferredLabel, out.PreferredLabel)
	line := node.ID + ": " + string(out.Status)
	if out.FailureReason != "" {
		line += " (" + safetext.Truncate(out.FailureReason, 300) + ")"
	} else if out.Notes != "" {
		line += " (" + safetext.Truncate(out.Notes, 300) + ")"
	}
	x.pctx.AppendLog(line)
	x.cp.Completed = append(x.cp.Completed, node.ID)
	x.cp.Outcomes[node.ID] = out
	x.mu.Lock()
	x.cp.Usage.Add(out.Usage)
	x.mu.Unlock()
	x.warnCostUnknown(node, out.Usage)
	nr := x.nodeResult(node.ID)
	x.mu.Lock()
	nr.Status, nr.FailureReason, nr.Notes, nr.Visits = out.Status, out.FailureReason, out.Notes, x.cp.Visits[node.ID]
	nr.visited(out.Status)
	x.mu.Unlock()
}

// goalGates returns the first goal gate that is not satisfied (never
// reached, or not ended success or partial_success) and where to go back
// to ("" when nowhere).
func (x *run) goalGates() (gate, target string) {
	for _, n := range x.g.Nodes {
		if on, _ := n.Bool("goal_gate", false); !on {
			continue
		}
		if o := x.cp.Outcomes[n.ID]; o != nil && o.Status.Succeeded() {
			continue
		}
		for _, t := range []string{n.Attrs["retry_target"], n.Attrs["fallback_retry_target"], x.g.Attrs["retry_target"], x.g.Attrs["fallback_retry_target"]} {
			if t = strings.TrimSpace(t); t != "" && x.g.Node(t) != nil {
				return n.ID, t
			}
		}
		return n.ID, ""
	}
	return "", ""
}

func (x *run) gateStatus(id string) string {
	if o := x.cp.Outcomes[id]; o != nil {
		return "it ended " + string(o.Status)
	}
	return "it never ran"
}

// CostUnknownMessage opens the warning (event and log) of a run with a cost
// budget whose stage called a model without a price.
const CostUnknownMessage = "cost budget cannot be enforced"

// warnCostUnknown warns, once a run, when a stage's calls were of a model
// without a price while a cost budget is set: they count as $0, so the
// budget could never trip on them. It warns rather than refuses at start
// because which model a stage calls is known only as it runs (llm_model,
// the stylesheet, a provider's endpoint), and the budget still holds the
// priced calls.
func (x *run) warnCostUnknown(node *Node, u Usage) {
	if !u.CostUnknown || x.lim.MaxCostUSD <= 0 {
		return
	}
	x.costWarned.Do(func() {
		model := "the configured llm.model"
		if m := node.Attrs["llm_model"]; m != "" {
			model = strconv.Quote(m)
		}
		msg := fmt.Sprintf("%s: stage %s called %s, which has no price in [llm.pricing]; its calls count as $0 against the $%.4f budget (--max-cost, [pipeline] max_cost_usd). Add the model to [llm.pricing], or bound the run with --max-tokens",
			CostUnknownMessage, node.ID, model, x.lim.MaxCostUSD)
		x.r.logger().Warn(msg, "node", node.ID)
		x.emit(Event{Kind: EventWarning, NodeID: node.ID, Message: msg})
	})
}

// overBudget says which budget the run has spent, or "".
func (x *run) overBudget() string {
	u := x.cp.Usage
	switch {
	case x.lim.MaxTokens > 0 && u.TotalTokens >= x.lim.MaxTokens:
		return fmt.Sprintf("token budget spent: %d of %d (--max-tokens)", u.TotalTokens, x.lim.MaxTokens)
	case x.lim.MaxCostUSD > 0 && u.CostUSD >= x.lim.MaxCostUSD:
		return fmt.Sprintf("cost budget spent: $%.4f of $%.4f (--max-cost)", u.CostUSD, x.lim.MaxCostUSD)
	case x.lim.MaxWallTime > 0 && x.elapsed() >= x.lim.MaxWallTime:
		return fmt.Sprintf("wall-time budget spent: %s of %s (--max-wall-time)", x.elapsed().Round(time.Millisecond), x.lim.MaxWallTime)
	}
	return ""
}

// stop ends the run in state, saving the checkpoint; next is where a
// resume starts.
func (x *run) stop(state, next, failed, reason string) (*Result, error) {
	x.cp.State = state
	if state == RunCanceled || state == RunBudget {
		x.cp.NextNode = next
	} else {
		x.cp.NextNode = ""
	}
	x.cp.FailedNode, x.cp.FailureReason = failed, reason
	if err := x.compact(); err != nil {
		return nil, err
	}
	x.emit(Event{Kind: EventCheckpointSaved, NodeID: x.cp.CurrentNode})
	res := &Result{RunID: x.cp.RunID, RunDir: x.cfg.RunDir, State: state, FailedNode: failed, FailureReason: reason,
		Path: append([]string(nil), x.cp.Completed...), Nodes: x.nodes, Usage: x.cp.Usage, Duration: x.cp.Elapsed,
		NextNode: x.cp.NextNode, Context: x.pctx.Snapshot()}
	kind := EventPipelineCompleted
	if state != RunSuccess {
		kind = EventPipelineFailed
	}
	x.emit(Event{Kind: kind, NodeID: failed, Message: reason, Duration: res.Duration, Usage: res.Usage})
	return res, nil
}

// newRunID is a run's default id: its start time and random bytes.
func newRunID(now time.Time) string {
	var b [6]byte
	_, _ = crand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

func sourceHash(src []byte) string {
	if src == nil {
		return ""
	}
	h := sha256.Sum256(src)
	return hex.EncodeToString(h[:])
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}
