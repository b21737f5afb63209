package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/morphhost/morph/internal/safetext"
)

// Defaults of the manager loop's attributes.
const (
	// DefaultManagerPollInterval is manager.poll_interval's default
	// (attractor 4.11).
	DefaultManagerPollInterval = 45 * time.Second
	// DefaultManagerMaxCycles is manager.max_cycles' default: the polls
	// of the child before the manager gives up (attractor 4.11).
	DefaultManagerMaxCycles = 1000
	// DefaultManagerChildRuns is manager.max_child_runs' default: a failed
	// child is not run again.
	DefaultManagerChildRuns = 1
	// DefaultManagerSteerCooldown is manager.steer_cooldown's default: the
	// polls between two steers.
	DefaultManagerSteerCooldown = 2
	// maxSteerBytes bounds a steer's text (after escaping): it goes into
	// every prompt of a stage and into the child's context.
	maxSteerBytes = 16 << 10
)

// Context keys the manager loop keeps of its child in the parent's
// context at every poll, and the one it steers the child through.
const (
	KeyChildStatus    = "stack.child.status"       // running, completed, failed or stopped
	KeyChildOutcome   = "stack.child.outcome"      // the child's last stage's status; success or fail once it ended
	KeyChildActive    = "stack.child.active_stage" // the child's stage running or last run
	KeyChildCompleted = "stack.child.completed"    // the child's stages finished
	KeyChildRetries   = "stack.child.retries"      // the child's retries so far
	// KeySteer is the manager's steer in the child's context: the child's
	// next agent (codergen) stage reads it into its preamble once.
	KeySteer = "stack.steer"
)

// The child's states in stack.child.status.
const (
	childRunning   = "running"
	childCompleted = "completed"
	childFailed    = "failed"
	childStopped   = "stopped"
)

// SteerFile is the manager's steer, written into the child's active stage
// directory (attractor 4.11) for people and tools to read.
const SteerFile = "steer.md"

// ManagerLoopHandler supervises a child pipeline (house, attractor 4.11):
// it runs the DOT file stack.child_dotfile (the node's, else the graph's;
// relative to the parent's file) as a run of its own under
// <stage dir>/cycle-<n> (<stage dir>/visit-<v>/cycle-<n> when the node runs
// again), with the parent's runner settings, and observes it
// while it runs: every manager.poll_interval (default 45s) it copies the
// child's progress into the parent's context (stack.child.status,
// .outcome, .active_stage, .completed, .retries), evaluates
// manager.stop_condition against that context (true: the child is
// canceled, resumable, and the stage succeeds), and, with steer in
// manager.actions, writes manager.steer_prompt (expanded against the
// parent's context) as steer.md into the child's active stage directory and
// hands it to the child's next agent stage. The child's success is the
// stage's; its failure is a FAIL, unless manager.max_child_runs (default
// 1) allows another run, whose goal carries the failure. After
// manager.max_cycles polls (default 1000) the child is canceled and the
// stage fails. The child's budgets count against the parent's: its usage
// is the stage's.
type ManagerLoopHandler struct{}

// Type returns "stack.manager_loop".
func (ManagerLoopHandler) Type() string { return TypeManagerLoop }

// manager is one manager stage's settings and state.
type manager struct {
	x        *Execution
	node     *Node
	pctx     *Context
	file     string // the child's DOT file
	interval time.Duration
	maxPolls int
	runs     int
	stop     string
	steer    bool
	cooldown int
	polls    int // over all the child's runs in this visit, resumes included
	// pollsFile keeps polls for a resume (managerStateFile).
	pollsFile string
}

// managerStateFile, beside the visit's child runs, holds the manager's
// polls so far, written at every poll: a parent killed and resumed counts
// manager.max_cycles on rather than from 0.
const managerStateFile = "manager.json"

// managerState is managerStateFile's content.
type managerState struct {
	Polls int `json:"polls"`
}

// loadPolls reads the polls a stopped run of this visit spent; 0 when
// there was none. A file that is not the manager's is refused, saying
// what to do.
func loadPolls(dir string) (int, error) {
	path := filepath.Join(dir, managerStateFile)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	var st managerState
	switch {
	case err != nil:
	case !fi.Mode().IsRegular() || fi.Size() > 4<<10: // nothing the manager writes
		err = fmt.Errorf("not a small regular file")
	default:
		var b []byte
		if b, err = os.ReadFile(path); err == nil {
			err = json.Unmarshal(b, &st)
		}
	}
	if err == nil && st.Polls < 0 {
		err = fmt.Errorf("polls %d is negative", st.Polls)
	}
	if err != nil {
		return 0, fmt.Errorf("%s is not the manager's poll count (%w): delete it to count manager.max_cycles from 0", safetext.Quote(path, 300), err)
	}
	return st.Polls, nil
}

// savePolls writes m.polls for a resume; a failure is a warning, since
// the run itself is unharmed (a resume would count polls from an older
// number).
func (m *manager) savePolls() {
	b, _ := json.Marshal(managerState{Polls: m.polls})
	if err := writeFileQuick(m.pollsFile, b); err != nil {
		m.x.Emit(Event{Kind: EventWarning, NodeID: m.node.ID, Message: "manager loop: poll count not saved: " + safetext.Line(err.Error(), 300)})
	}
}

// Execute runs and observes the child.
func (ManagerLoopHandler) Execute(ctx context.Context, node *Node, pctx *Context, _ *ArtifactStore) (*Outcome, error) {
	x := ExecutionFrom(ctx)
	if x == nil || x.Runner == nil || x.RunDir == "" {
		return Fail("manager loop %s runs only inside a Runner with a run directory", node.ID), nil
	}
	m, err := newManager(x, node, pctx)
	if err != nil {
		return Fail("manager loop %s: %v", node.ID, err), nil
	}
	if x.Runner.depth >= x.Runner.limits().MaxChildDepth {
		return Fail("manager loop %s: child pipelines nest deeper than %d (does %s run its own parent?)", node.ID, x.Runner.limits().MaxChildDepth, m.file), nil
	}
	child := m.childRunner()
	goal := node.Attr("manager.goal", pctx.GetString(KeyGoal))
	dir := m.childDir()
	if m.polls, err = loadPolls(dir); err != nil {
		return Fail("manager loop %s: %v", node.ID, err), nil
	}
	m.pollsFile = filepath.Join(dir, managerStateFile)
	out := &Outcome{ContextUpdates: map[string]any{}}
	again := ""
	for n := 1; n <= m.runs; n++ {
		src, g, err := ReadDOTFile(m.file)
		if err != nil {
			return Fail("manager loop %s: child pipeline: %v", node.ID, err), nil
		}
		res, verdict, err := m.supervise(ctx, child, g, RunConfig{
			RunDir: filepath.Join(dir, fmt.Sprintf("cycle-%d", n)),
			Goal:   goal + again, Source: src, DotFile: m.file,
		})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			return Fail("manager loop %s: child pipeline %s: %v", node.ID, m.file, err), nil
		}
		out.Usage.Add(res.Usage)
		// The cycles are this stage's work: a note of them marks it as such, so
		// it gets its status.json like any stage that wrote files.
		_ = x.WriteStageFile("manager.md", fmt.Appendf(nil, "child %s, run %d of %d: %s in %s\n", m.file, n, m.runs, res.State, res.RunDir))
		out.ContextUpdates[node.ID+".child_state"] = res.State
		out.ContextUpdates[node.ID+".child_run_dir"] = res.RunDir
		out.ContextUpdates[node.ID+".child_runs"] = n
		out.ContextUpdates[node.ID+".polls"] = m.polls
		if last, ok := res.Context[KeyLastResponse].(string); ok {
			out.ContextUpdates[KeyLastResponse] = last
		}
		switch {
		case verdict != "":
			out.Status, out.Notes = StatusSuccess, verdict
			return out, nil
		case m.polls >= m.maxPolls && res.State == RunCanceled:
			out.Status = StatusFail
			out.FailureReason = fmt.Sprintf("the child pipeline was still running after %d polls (manager.max_cycles): canceled, resumable in %s", m.polls, res.RunDir)
			return out, nil
		case res.State == RunSuccess:
			out.Status, out.Notes = StatusSuccess, "child completed"
			return out, nil
		}
		out.FailureReason = fmt.Sprintf("child pipeline failed (run %d of manager.max_child_runs=%d) at %s: %s", n, m.runs, res.FailedNode, res.FailureReason)
		if res.State == RunBudget || res.State == RunCanceled {
			break
		}
		again = fmt.Sprintf("\n(Run %d failed at %s: %s. Avoid that this time.)", n, res.FailedNode, res.FailureReason)
	}
	out.Status = StatusFail
	return out, nil
}

// newManager reads the manager node's attributes; an error names the bad
// one.
func newManager(x *Execution, node *Node, pctx *Context) (*manager, error) {
	m := &manager{x: x, node: node, pctx: pctx, stop: strings.TrimSpace(node.Attrs["manager.stop_condition"])}
	// Appendix A lists stack.child_dotfile as a graph attribute, and 4.11
	// reads it from graph.attrs; morph also takes it on the node (which
	// wins), so that one graph may supervise several children.
	m.file = m.attr("stack.child_dotfile")
	if m.file == "" {
		return nil, errors.New("no stack.child_dotfile (the child pipeline's DOT file): set it on the node or on the graph")
	}
	if !filepath.IsAbs(m.file) && x.BaseDir != "" {
		m.file = filepath.Join(x.BaseDir, m.file)
	}
	var err error
	for _, c := range managerChecks {
		if err := c.check(node.Attrs, c.key, "node "+node.ID); err != nil {
			return nil, err
		}
	}
	if m.interval, err = node.Duration("manager.poll_interval", DefaultManagerPollInterval); err != nil {
		return nil, err
	}
	if m.maxPolls, err = node.Int("manager.max_cycles", DefaultManagerMaxCycles); err != nil {
		return nil, err
	}
	if m.runs, err = node.Int("manager.max_child_runs", DefaultManagerChildRuns); err != nil {
		return nil, err
	}
	if m.cooldown, err = node.Int("manager.steer_cooldown", DefaultManagerSteerCooldown); err != nil {
		return nil, err
	}
	if m.steer, err = managerActions(node.Attrs["manager.actions"]); err != nil {
		return nil, err
	}
	if m.stop != "" {
		if _, err := ParseCondition(m.stop); err != nil {
			return nil, fmt.Errorf("manager.stop_condition: %w", err)
		}
	}
	return m, nil
}

// managerChecks are the manager's settings that a run refuses as
// validation does (attr_value): a poll interval of 0 would spend every
// poll at once, and 0 polls or child runs would cancel the child before it
// started; negative cooldowns are typos.
var managerChecks = []struct {
	key   string
	check func(attrs map[string]string, key, who string) error
}{
	{"manager.poll_interval", positiveDurationAttr},
	{"manager.max_cycles", positiveCountAttr},
	{"manager.max_child_runs", positiveCountAttr},
	{"manager.steer_cooldown", countAttr},
}

// positiveCountCheck is attr_value's check of a count where 0 would mean
// nothing runs.
var positiveCountCheck = &attrCheck{positiveCountAttr, "write a whole number, 1 or more (unset: the default)"}

// positiveCountAttr refuses a count below 1 (unset is the default).
func positiveCountAttr(attrs map[string]string, key, who string) error {
	n, err := intAttr(attrs, key, 1, who)
	if err == nil && n < 1 {
		err = fmt.Errorf("%s: %s=%d must be 1 or more", who, key, n)
	}
	return err
}

// positiveDurationAttr refuses a duration of 0 or less (unset is the
// default).
func positiveDurationAttr(attrs map[string]string, key, who string) error {
	if d, err := ParseDuration(attrs[key]); strings.TrimSpace(attrs[key]) != "" && err == nil && d <= 0 {
		return fmt.Errorf("%s: %s=%q must be longer than 0", who, key, attrs[key])
	}
	return durationAttr(attrs, key, who)
}

// childDir is where this visit of the manager node keeps its child's runs
// (cycle-<n>): the stage directory on the first visit, visit-<v> under it
// on a later one, so that a revisit runs its child afresh while a resumed
// run (the same visit: visits are in the journal) finds its child again.
func (m *manager) childDir() string {
	dir := stageDir(m.x, m.node.ID)
	if dir == "" {
		dir = filepath.Join(m.x.RunDir, m.node.ID)
	}
	if m.x.run != nil {
		if v := m.x.run.cp.Visits[m.node.ID]; v > 1 {
			dir = filepath.Join(dir, fmt.Sprintf("visit-%d", v))
		}
	}
	return dir
}

// attr is the manager node's attribute key, else the graph's.
func (m *manager) attr(key string) string {
	if v := strings.TrimSpace(m.node.Attrs[key]); v != "" {
		return v
	}
	if m.x.Graph != nil {
		return strings.TrimSpace(m.x.Graph.Attrs[key])
	}
	return ""
}

// managerActions checks manager.actions (observe, wait, steer, comma
// separated; default observe,wait) and says whether it steers. Observing
// and waiting are what the manager always does.
func managerActions(s string) (steer bool, err error) {
	for a := range strings.SplitSeq(s, ",") {
		switch a = strings.TrimSpace(a); a {
		case "", "observe", "wait":
		case "steer":
			steer = true
		default:
			return false, fmt.Errorf("manager.actions: %q is not one of observe, wait, steer", a)
		}
	}
	return steer, nil
}

func managerActionsAttr(attrs map[string]string, key, who string) error {
	if _, err := managerActions(attrs[key]); err != nil {
		return fmt.Errorf("%s: %w", who, err)
	}
	return nil
}

// childRunner is the runner of the child: the parent's, one level deeper,
// spending what is left of the parent's budgets, its events forwarded
// with the manager's node id in front.
func (m *manager) childRunner() *Runner {
	x := m.x
	child := *x.Runner
	child.depth++
	if x.run != nil { // the child spends what is left of the parent's budgets
		used := x.run.cp.Usage
		if child.Limits.MaxTokens > 0 {
			child.Limits.MaxTokens = max(child.Limits.MaxTokens-used.TotalTokens, 1)
		}
		if child.Limits.MaxCostUSD > 0 {
			child.Limits.MaxCostUSD = max(child.Limits.MaxCostUSD-used.CostUSD, 1e-9)
		}
		if child.Limits.MaxWallTime > 0 {
			child.Limits.MaxWallTime = max(child.Limits.MaxWallTime-x.run.elapsed(), 1)
		}
	}
	parentEvents := x.Runner.OnEvent
	child.OnEvent = func(ev Event) {
		if parentEvents != nil && ev.Kind != EventCheckpointSaved {
			ev.NodeID = m.node.ID + "/" + ev.NodeID
			parentEvents(ev)
		}
	}
	return &child
}

// childProgress is what the manager has seen of its child's run, from the
// child's events (on the child's goroutine) and its end.
type childProgress struct {
	mu                 sync.Mutex
	status, outcome    string
	active             string
	completed, retries int
	runDir             string
	stopped            bool
}

// observe updates p from one of the child's own events (a grandchild's,
// whose node id has a '/', and a parallel branch's stages are not the
// child's stages).
func (p *childProgress) observe(ev Event) {
	if ev.Branch != "" || strings.Contains(ev.NodeID, "/") {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Kind {
	case EventStageStarted:
		p.active = ev.NodeID
	case EventStageCompleted, EventStageFailed:
		p.completed++
		p.outcome = string(ev.Status)
	case EventStageRetrying:
		p.retries++
	}
}

// resumed seeds p with the progress of a child run that stopped before
// (the parent was killed or canceled in it), as its events would have.
func (p *childProgress) resumed(cp *Checkpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.completed, p.active = len(cp.Completed), cp.CurrentNode
	for _, n := range cp.RetryCounts {
		p.retries += n
	}
	if o := cp.Outcomes[cp.CurrentNode]; o != nil {
		p.outcome = string(o.Status)
	}
}

// stop records that the stop condition is canceling the child.
func (p *childProgress) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}

// end records how the child's run ended.
func (p *childProgress) end(res *Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.stopped:
		p.status = childStopped
	case res != nil && res.State == RunSuccess:
		p.status, p.outcome = childCompleted, string(StatusSuccess)
	default:
		p.status, p.outcome = childFailed, string(StatusFail)
	}
}

// publish copies p into the parent's context.
func (p *childProgress) publish(pctx *Context) (status, active string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pctx.Apply(map[string]any{KeyChildStatus: p.status, KeyChildOutcome: p.outcome, KeyChildActive: p.active,
		KeyChildCompleted: p.completed, KeyChildRetries: p.retries})
	return p.status, p.active
}

// steerBox hands a manager's steer to its child's run, which takes it
// before its next stage (run.takeSteer).
type steerBox struct {
	mu   sync.Mutex
	text string
}

func (b *steerBox) set(s string) {
	b.mu.Lock()
	b.text = s
	b.mu.Unlock()
}

func (b *steerBox) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.text
	b.text = ""
	return s
}

// takeSteer puts a steer the run's manager left into its context, for the
// next agent stage (CodergenHandler).
func (x *run) takeSteer() {
	if x.r.steer == nil {
		return
	}
	if s := x.r.steer.take(); s != "" {
		x.pctx.Set(KeySteer, s)
	}
}

// supervise runs one child run beside its observer, through the runner's
// executor, and returns the child's result, and the verdict when the stop
// condition ended it.
func (m *manager) supervise(ctx context.Context, child *Runner, g *Graph, cfg RunConfig) (res *Result, verdict string, err error) {
	exec := m.x.Runner.executor()
	childCtx, cancelChild := exec.WithCancel(ctx)
	defer cancelChild()
	// The observer's waits end when the child does.
	waitCtx, childEnded := exec.WithCancel(ctx)
	defer childEnded()
	p := &childProgress{status: childRunning, runDir: cfg.RunDir}
	cp, err := LoadCheckpoint(cfg.RunDir)
	switch {
	case err == nil:
		p.resumed(cp)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, "", err
	}
	c := *child
	c.steer = &steerBox{}
	forward := child.OnEvent
	c.OnEvent = func(ev Event) {
		p.observe(ev)
		forward(ev)
	}
	exec.ForEach(ctx, 2, 2, func(_ context.Context, i int) {
		if i == 0 {
			res, err = runCycle(childCtx, &c, g, cfg, cp != nil)
			p.end(res)
			childEnded()
			return
		}
		verdict = m.observe(ctx, waitCtx, p, c.steer, cancelChild)
	})
	if res == nil && err == nil {
		err = errors.New("the child pipeline did not run")
	}
	if err == nil {
		p.publish(m.pctx) // how it ended
	}
	return res, verdict, err
}

// observe polls the child until it ends, the stop condition holds (the
// verdict), or manager.max_cycles polls are spent; the last two cancel
// the child.
func (m *manager) observe(ctx, waitCtx context.Context, p *childProgress, steer *steerBox, cancelChild context.CancelFunc) (verdict string) {
	lastSteer := -m.cooldown
	for {
		m.polls++
		m.savePolls()
		status, active := p.publish(m.pctx)
		m.x.Emit(Event{Kind: EventManagerObserved, NodeID: m.node.ID, Attempt: m.x.Attempt,
			Message: fmt.Sprintf("poll %d: child %s, at %s", m.polls, status, safetext.Line(active, 200))})
		if status != childRunning {
			return ""
		}
		if m.stop != "" {
			if ok, err := EvalCondition(m.stop, nil, m.pctx); err == nil && ok {
				verdict = fmt.Sprintf("stop condition satisfied after %d polls: child canceled, resumable in %s", m.polls, p.runDir)
				p.stop()
				cancelChild()
				return verdict
			}
		}
		if m.polls >= m.maxPolls {
			cancelChild()
			return ""
		}
		if m.steer && active != "" && m.polls-lastSteer >= m.cooldown {
			if m.steerChild(steer, p.runDir, active) {
				lastSteer = m.polls
			}
		}
		if err := m.x.Runner.clock().Sleep(waitCtx, m.interval); err != nil && ctx.Err() != nil {
			return ""
		}
	}
}

// steerChild writes the steer text into the child's active stage
// directory and hands it to the child's run; false when there is no text.
// The text is manager.steer_prompt expanded against the parent's context,
// escaped (control characters, as a model or a file may put there) and cut
// to maxSteerBytes.
func (m *manager) steerChild(steer *steerBox, runDir, active string) bool {
	text := strings.TrimSpace(ExpandVars(m.node.Attrs["manager.steer_prompt"], m.pctx))
	if text == "" {
		return false
	}
	if text = safetext.Escape(text); len(text) > maxSteerBytes {
		m.x.Emit(Event{Kind: EventWarning, NodeID: m.node.ID, Message: fmt.Sprintf("manager loop: steer of %d bytes cut to %d", len(text), maxSteerBytes)})
		text = safetext.Truncate(text, maxSteerBytes)
	}
	if dir := stageDir(&Execution{RunDir: runDir}, active); dir != "" {
		_ = writeFileQuick(filepath.Join(dir, SteerFile), []byte(text+"\n")) // the child's stage dir: for people and its agent
	}
	steer.set(text)
	return true
}

// runCycle runs one cycle of the child pipeline, or, when its run directory
// holds a run already (the manager stage runs again after its run stopped),
// resumes it, or takes its end when it is over.
func runCycle(ctx context.Context, child *Runner, g *Graph, cfg RunConfig, resume bool) (*Result, error) {
	if !resume {
		return child.Run(ctx, g, cfg)
	}
	cfg.Goal = "" // the cycle's own, from its manifest
	return child.Resume(ctx, g, cfg)
}

// RuleManagerLoop is the rule of a manager node's settings that validation
// can check before a run.
const RuleManagerLoop = "manager_loop"

// checkManagerLoop warns of a manager.max_cycles that reads as the child
// reruns it was before attractor 4.11's observation polls, and refuses a
// stop condition that does not parse.
func checkManagerLoop(g *Graph, _ ValidateOptions) []Diagnostic {
	var out []Diagnostic
	for _, n := range g.Nodes {
		if n.Type() != TypeManagerLoop {
			continue
		}
		if c, err := n.Int("manager.max_cycles", DefaultManagerMaxCycles); err == nil && c >= 1 && c < 10 && strings.TrimSpace(n.Attrs["manager.poll_interval"]) == "" {
			out = append(out, nodeDiag(RuleManagerLoop, SeverityWarning, n, "for child reruns set manager.max_child_runs; set manager.poll_interval to keep few polls",
				"node %s: manager.max_cycles now counts observation polls (attractor 4.11); for child reruns use manager.max_child_runs", n.ID))
		}
		if c := strings.TrimSpace(n.Attrs["manager.stop_condition"]); c != "" {
			if _, err := ParseCondition(c); err != nil {
				out = append(out, nodeDiag(RuleManagerLoop, SeverityError, n, `write clauses key=value or key!=value joined by &&, e.g. "context.stack.child.completed=3"`,
					"node %s: manager.stop_condition: %v", n.ID, err))
			}
		}
	}
	return out
}
