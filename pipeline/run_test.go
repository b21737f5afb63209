package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBackend answers each node's agent run with the next of its outputs.
type fakeBackend struct {
	mu      sync.Mutex
	outputs map[string][]string // node -> outputs, in turn
	fail    map[string]bool     // node -> Success=false
	err     error
	calls   []AgentRunConfig
	tokens  int
}

func (b *fakeBackend) RunAgent(ctx context.Context, cfg AgentRunConfig) (*AgentRunResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, cfg)
	if b.err != nil {
		return nil, b.err
	}
	out := "done"
	if q := b.outputs[cfg.NodeID]; len(q) > 0 {
		out = q[0]
		if len(q) > 1 {
			b.outputs[cfg.NodeID] = q[1:]
		}
	}
	return &AgentRunResult{Output: out, Success: !b.fail[cfg.NodeID], StopReason: "final",
		Usage: Usage{TotalTokens: b.tokens, CostUSD: float64(b.tokens) / 1e6}}, nil
}

// fakeClock records sleeps and does not wait.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

func mustParse(t testing.TB, src string) *Graph {
	t.Helper()
	g, err := ParseDOTNamed("test.dot", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return g
}

func runGraph(t *testing.T, r *Runner, src string) *Result {
	t.Helper()
	res, err := r.Run(context.Background(), mustParse(t, src), RunConfig{RunDir: filepath.Join(t.TempDir(), "run"), Source: []byte(src)})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

const diamondLoop = `digraph p {
  goal = "make it work"
  start [shape=Mdiamond]
  implement [prompt="do $goal"]
  verify [shape=diamond, prompt="check it"]
  done [shape=Msquare]
  start -> implement -> verify
  verify -> done [condition="outcome=success"]
  verify -> implement [condition="outcome=fail"]
}`

func TestHybridDiamondRoutesOnMarker(t *testing.T) {
	b := &fakeBackend{outputs: map[string][]string{"verify": {"nope OUTCOME:FAIL", "fine OUTCOME:PASS"}}}
	res := runGraph(t, &Runner{Backend: b}, diamondLoop)
	if res.State != RunSuccess {
		t.Fatalf("state %s: %s", res.State, res.FailureReason)
	}
	want := []string{"start", "implement", "verify", "implement", "verify", "done"}
	if !reflect.DeepEqual(res.Path, want) {
		t.Fatalf("path %v, want %v", res.Path, want)
	}
	if got := b.calls[0].Prompt; got != "do make it work" {
		t.Errorf("prompt %q: $goal not expanded", got)
	}
	out, err := os.ReadFile(filepath.Join(res.RunDir, "artifacts", "verify.output"))
	if err != nil || string(out) != "fine OUTCOME:PASS" {
		t.Errorf("artifact verify.output = %q, %v", out, err)
	}
	if res.Context["verify.output"] != "fine OUTCOME:PASS" || res.Context[KeyLastStage] != "verify" {
		t.Errorf("context: %v", res.Context)
	}
	for _, f := range []string{"prompt.md", "response.md", "status.json"} {
		if _, err := os.Stat(filepath.Join(res.RunDir, "verify", f)); err != nil {
			t.Errorf("stage file: %v", err)
		}
	}
	// Appendix C: the stage's status is "outcome".
	var status map[string]any
	if b, err := os.ReadFile(filepath.Join(res.RunDir, "verify", "status.json")); err != nil || json.Unmarshal(b, &status) != nil {
		t.Fatalf("status.json: %s %v", b, err)
	}
	if status["outcome"] != string(StatusSuccess) {
		t.Errorf("status.json: %v, want outcome success", status)
	}
}

func TestDetectOutcomeMarker(t *testing.T) {
	for _, tc := range []struct {
		in     string
		marker string
		found  bool
	}{
		{"all good OUTCOME:PASS", "success", true},
		{"outcome=success", "success", true},
		{"Outcome : Fail because", "fail", true},
		{"OUTCOME:PASS then OUTCOME:FAIL", "fail", true},
		{"OUTCOME=FAIL ... OUTCOME=SUCCESS", "fail", true},
		{"no marker here", "", false},
		{"OUTCOMES:PASS", "", false},
		{"OUTCOME:PASSED", "", false},
		{"OUTCOME: retry", "retry", true},
		{"Outcome = Partial_Success", "partial_success", true},
		{"OUTCOME: skipped.", "skipped", true},
		{"OUTCOME: fail.", "fail", true},
		{"OUTCOME:partial_success, then OUTCOME:SUCCESS", "success", true},
		{"OUTCOME: needs_dod", "", false},
		{"OUTCOME: \x1b[31m", "", false},
	} {
		m, ok := DetectOutcomeMarker(tc.in)
		if m != tc.marker || ok != tc.found {
			t.Errorf("DetectOutcomeMarker(%q) = %q, %v; want %q, %v", tc.in, m, ok, tc.marker, tc.found)
		}
	}
}

func execNode(t *testing.T, h Handler, n *Node, pctx *Context, r *Runner) *Outcome {
	t.Helper()
	g := &Graph{Nodes: []*Node{n}}
	ctx := withExecution(context.Background(), &Execution{Graph: g, Runner: r})
	out, err := h.Execute(ctx, n, pctx, NewArtifactStore(t.TempDir()))
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	return out
}

func TestConditionalHandler(t *testing.T) {
	node := func(attrs map[string]string) *Node { return &Node{ID: "d", Attrs: attrs} }
	t.Run("pass-through", func(t *testing.T) {
		pctx := NewContext()
		if o := execNode(t, &ConditionalHandler{}, node(nil), pctx, nil); o.Status != StatusSuccess {
			t.Errorf("no upstream outcome: %s, want success", o.Status)
		}
		pctx.Set(KeyOutcome, "fail")
		if o := execNode(t, &ConditionalHandler{}, node(nil), pctx, nil); o.Status != StatusFail {
			t.Errorf("upstream fail: %s", o.Status)
		}
		pctx.Set(KeyOutcome, "PARTIAL_SUCCESS")
		if o := execNode(t, &ConditionalHandler{}, node(nil), pctx, nil); o.Status != StatusPartialSuccess {
			t.Errorf("upstream partial: %s", o.Status)
		}
	})
	t.Run("no backend", func(t *testing.T) {
		o := execNode(t, &ConditionalHandler{}, node(map[string]string{"prompt": "check"}), NewContext(), nil)
		if o.Status != StatusFail {
			t.Errorf("Status = %q, want %q", o.Status, StatusFail)
		}
		for _, want := range []string{"backend", "--config"} {
			if !strings.Contains(o.FailureReason, want) {
				t.Errorf("FailureReason = %q, want it to say %q", o.FailureReason, want)
			}
		}
	})
	t.Run("backend error", func(t *testing.T) {
		o := execNode(t, &ConditionalHandler{Backend: &fakeBackend{err: errors.New("503 busy")}}, node(map[string]string{"prompt": "check"}), NewContext(), nil)
		if o.Status != StatusFail || o.FailureReason != "agent backend error: 503 busy" {
			t.Errorf("got %+v", o)
		}
	})
	t.Run("success flag without marker", func(t *testing.T) {
		b := &fakeBackend{outputs: map[string][]string{"d": {"looks fine"}}, fail: map[string]bool{"d": true}}
		o := execNode(t, &ConditionalHandler{Backend: b}, node(map[string]string{"prompt": "check", "llm_model": "m1", "max_turns": "7"}), NewContext(), nil)
		if o.Status != StatusFail || o.ContextUpdates[KeyOutcome] != "fail" {
			t.Errorf("got %+v", o)
		}
		if c := b.calls[0]; c.Model != "m1" || c.MaxTurns != 7 {
			t.Errorf("config %+v", c)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		b := &fakeBackend{}
		pctx := NewContext()
		pctx.Set("base_url", "http://ctx/v1")
		pctx.Set("system_prompt", "from context")
		execNode(t, &ConditionalHandler{Backend: b, BaseURL: "http://handler/v1"}, node(map[string]string{"prompt": "check"}), pctx, nil)
		c := b.calls[0]
		if c.MaxTurns != DefaultDiamondMaxTurns {
			t.Errorf("MaxTurns = %d, want %d", c.MaxTurns, DefaultDiamondMaxTurns)
		}
		if c.BaseURL != "http://ctx/v1" {
			t.Errorf("BaseURL = %q, want the context's, http://ctx/v1", c.BaseURL)
		}
		if c.SystemPrompt != "from context" {
			t.Errorf("SystemPrompt = %q, want the context's, %q", c.SystemPrompt, "from context")
		}
		if c.FidelityMode != FidelityCompact {
			t.Errorf("FidelityMode = %q, want %q", c.FidelityMode, FidelityCompact)
		}
	})
}

func TestCodergenStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		attrs  map[string]string
		out    string
		failed bool
		want   StageStatus
	}{
		{"success flag", nil, "did it", false, StatusSuccess},
		{"agent did not succeed", nil, "ran out of steps", true, StatusFail},
		{"marker wins over flag", nil, "OUTCOME:SUCCESS", true, StatusSuccess},
		{"fail marker wins over flag", nil, "OUTCOME:FAIL", false, StatusFail},
		{"auto_status=false needs a marker", map[string]string{"auto_status": "false"}, "did it", false, StatusFail},
		{"auto_status=false with marker", map[string]string{"auto_status": "false"}, "OUTCOME:PASS", false, StatusSuccess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{outputs: map[string][]string{"c": {tc.out}}, fail: map[string]bool{"c": tc.failed}}
			o := execNode(t, &CodergenHandler{Backend: b}, &Node{ID: "c", Attrs: tc.attrs}, NewContext(), nil)
			if o.Status != tc.want {
				t.Errorf("status %s, want %s (%s)", o.Status, tc.want, o.FailureReason)
			}
			if o.Status == StatusFail && o.FailureReason == "" {
				t.Error("a FAIL without a reason")
			}
		})
	}
}

// scriptHandler returns scripted outcomes per node, in turn.
type scriptHandler struct {
	typ   string
	mu    sync.Mutex
	seq   map[string][]StageStatus
	calls map[string]int
	hook  func(node string)
	// files makes each stage write a stage file (so it gets a status.json).
	files bool
}

func (h *scriptHandler) Type() string { return h.typ }

func (h *scriptHandler) Execute(ctx context.Context, n *Node, pctx *Context, _ *ArtifactStore) (*Outcome, error) {
	h.mu.Lock()
	if h.calls == nil {
		h.calls = map[string]int{}
	}
	h.calls[n.ID]++
	st := StatusSuccess
	if q := h.seq[n.ID]; len(q) > 0 {
		st = q[0]
		if len(q) > 1 {
			h.seq[n.ID] = q[1:]
		}
	}
	h.mu.Unlock()
	if h.files {
		if err := ExecutionFrom(ctx).WriteStageFile("stage.txt", []byte(st)); err != nil {
			return nil, err
		}
	}
	if h.hook != nil {
		h.hook(n.ID)
	}
	o := &Outcome{Status: st, ContextUpdates: map[string]any{"seen." + n.ID: true}, Usage: Usage{TotalTokens: 10}}
	if st == StatusFail {
		o.FailureReason = n.ID + " broke"
	}
	return o, nil
}

func scriptedRunner(seq map[string][]StageStatus) (*Runner, *scriptHandler, *fakeClock) {
	h := &scriptHandler{typ: TypeCodergen, seq: seq}
	reg := DefaultHandlerRegistry()
	reg.Register(h)
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	return &Runner{Handlers: reg, Clock: clk, Rand: func() float64 { return 0.5 }}, h, clk
}

func TestRetriesBackOff(t *testing.T) {
	src := `digraph p { start [shape=Mdiamond]; a [max_retries=3]; done [shape=Msquare]; start -> a -> done }`
	r, h, clk := scriptedRunner(map[string][]StageStatus{"a": {StatusRetry, StatusRetry, StatusSuccess}})
	res := runGraph(t, r, src)
	if res.State != RunSuccess || h.calls["a"] != 3 {
		t.Fatalf("state %s, calls %d", res.State, h.calls["a"])
	}
	if want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}; !reflect.DeepEqual(clk.sleeps, want) {
		t.Errorf("backoff %v, want %v", clk.sleeps, want)
	}
	if res.Nodes["a"].Attempts != 3 {
		t.Errorf("attempts %d", res.Nodes["a"].Attempts)
	}
}

func TestBackoffCapAndJitter(t *testing.T) {
	x := &run{r: &Runner{Rand: func() float64 { return 0 }}}
	if d := x.backoff(1); d != 100*time.Millisecond {
		t.Errorf("attempt 1, jitter 0: %s", d)
	}
	x.r.Rand = func() float64 { return 0.999999 }
	if d := x.backoff(30); d < 89*time.Second || d > 90*time.Second {
		t.Errorf("attempt 30, jitter ~1: %s, want just under 60s x 1.5", d)
	}
}

func TestRetriesExhausted(t *testing.T) {
	for _, tc := range []struct {
		partial string
		want    string
	}{{"false", RunFail}, {"true", RunSuccess}} {
		src := `digraph p { start [shape=Mdiamond]; a [max_retries=1, allow_partial=` + tc.partial + `]; done [shape=Msquare]; start -> a -> done }`
		r, h, _ := scriptedRunner(map[string][]StageStatus{"a": {StatusRetry}})
		res := runGraph(t, r, src)
		if res.State != tc.want || h.calls["a"] != 2 {
			t.Errorf("allow_partial=%s: state %s (%s), calls %d", tc.partial, res.State, res.FailureReason, h.calls["a"])
		}
		if tc.partial == "true" && res.Nodes["a"].Status != StatusPartialSuccess {
			t.Errorf("status %s", res.Nodes["a"].Status)
		}
	}
}

// errSeqHandler returns its node's errors in turn (nil: success), or,
// with fail set, a FAIL outcome every time.
type errSeqHandler struct {
	errs  []error
	fail  bool
	calls int
}

func (h *errSeqHandler) Type() string { return TypeCodergen }

func (h *errSeqHandler) Execute(context.Context, *Node, *Context, *ArtifactStore) (*Outcome, error) {
	h.calls++
	if h.fail {
		return Fail("tests failed"), nil
	}
	if len(h.errs) > 0 {
		err := h.errs[0]
		h.errs = h.errs[1:]
		if err != nil {
			return nil, err
		}
	}
	return &Outcome{Status: StatusSuccess}, nil
}

// Spec 3.5 retries what should_retry accepts; 11.5 says "retried on ...
// FAIL". morph takes 3.5 (doc.go, "Where the spec disagrees with itself"):
// an error wrapping ErrTransient is retried within max_retries, a returned
// FAIL and any other error are final.
func TestTransientErrorsRetryFailIsFinal(t *testing.T) {
	transient := fmt.Errorf("rate limited: %w", ErrTransient)
	for _, tc := range []struct {
		name       string
		h          *errSeqHandler
		maxRetries int
		state      string
		calls      int
		reason     string
	}{
		{"transient twice then success (3.5)", &errSeqHandler{errs: []error{transient, transient}}, 2, RunSuccess, 3, ""},
		{"transient past max_retries (3.5)", &errSeqHandler{errs: []error{transient, transient}}, 1, RunFail, 2, "rate limited"},
		{"a returned FAIL is final (3.5 vs 11.5)", &errSeqHandler{fail: true}, 2, RunFail, 1, "tests failed"},
		{"another error is final", &errSeqHandler{errs: []error{errors.New("bad input")}}, 2, RunFail, 1, "bad input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := DefaultHandlerRegistry()
			reg.Register(tc.h)
			r := &Runner{Handlers: reg, Clock: &fakeClock{now: time.Unix(1e9, 0)}, Rand: func() float64 { return 0.5 }}
			res := runGraph(t, r, fmt.Sprintf(`digraph p { start [shape=Mdiamond]; a [max_retries=%d]; done [shape=Msquare]; start -> a -> done }`, tc.maxRetries))
			if res.State != tc.state || tc.h.calls != tc.calls {
				t.Fatalf("state %s (%s), %d calls; want %s, %d calls", res.State, res.FailureReason, tc.h.calls, tc.state, tc.calls)
			}
			if !strings.Contains(res.FailureReason, tc.reason) {
				t.Errorf("failure reason %q does not say %q", res.FailureReason, tc.reason)
			}
		})
	}
}

func TestFailNeverFallsThrough(t *testing.T) {
	src := `digraph p { start [shape=Mdiamond]; a; done [shape=Msquare]; start -> a -> done }`
	r, _, _ := scriptedRunner(map[string][]StageStatus{"a": {StatusFail}})
	res := runGraph(t, r, src)
	if res.State != RunFail {
		t.Fatalf("State = %q, want %q", res.State, RunFail)
	}
	if res.FailedNode != "a" {
		t.Errorf("FailedNode = %q, want a", res.FailedNode)
	}
	if !strings.Contains(res.FailureReason, "a broke") {
		t.Errorf("FailureReason = %q, want it to say %q", res.FailureReason, "a broke")
	}
	// With a retry target, a FAIL goes there.
	src = `digraph p { start [shape=Mdiamond]; a [retry_target=fix]; fix; done [shape=Msquare]; start -> a -> done; fix -> a }`
	r, h, _ := scriptedRunner(map[string][]StageStatus{"a": {StatusFail, StatusSuccess}})
	res = runGraph(t, r, src)
	if res.State != RunSuccess || h.calls["fix"] != 1 {
		t.Fatalf("got %s %v", res.State, res.Path)
	}
}

// Spec 10.3: "outcome refers to the executing node's outcome status"; a
// handler's custom status (any name, 10.2's BareLiteral) is kept and routes.
func TestCustomOutcomeRoutes(t *testing.T) {
	src := `digraph p { start [shape=Mdiamond]; review; dod; done [shape=Msquare]
	  start -> review; review -> dod [condition="outcome=needs_dod"]; review -> done [condition="outcome=success"]; dod -> done }`
	r, h, _ := scriptedRunner(map[string][]StageStatus{"review": {"Needs_DOD"}})
	res := runGraph(t, r, src)
	if res.State != RunSuccess || h.calls["dod"] != 1 {
		t.Fatalf("state %s (%s), path %v; want the needs_dod edge taken", res.State, res.FailureReason, res.Path)
	}
	if st := res.Nodes["review"].Status; st != "needs_dod" {
		t.Errorf("review's status %q, want needs_dod", st)
	}
	r, _, _ = scriptedRunner(map[string][]StageStatus{"review": {"needs dod!"}})
	if res := runGraph(t, r, src); res.State != RunFail || !strings.Contains(res.FailureReason, "bad stage status") {
		t.Errorf("a status that is no name: state %s (%s), want a fail naming it", res.State, res.FailureReason)
	}
}

// Spec 4.10: a tool node without a command fails when it runs ("No
// tool_command specified"), not at validation; the failure names the node.
func TestToolNodeWithoutToolFailsAtRunTime(t *testing.T) {
	src := `digraph p { start [shape=Mdiamond]; t [shape=parallelogram]; done [shape=Msquare]; start -> t -> done }`
	res := runGraph(t, &Runner{}, src)
	if res.State != RunFail || res.FailedNode != "t" {
		t.Fatalf("state %s, failed node %q (%s); want the run to fail at t", res.State, res.FailedNode, res.FailureReason)
	}
	if want := "tool node t has neither tool nor tool_command"; !strings.Contains(res.FailureReason, want) {
		t.Errorf("reason %q, want it to contain %q", res.FailureReason, want)
	}
}

// Spec 4.3/4.4: the start is "shape=Mdiamond or id matching start/Start",
// the exit "shape=Msquare or id matching exit/end" (7.2 terminal_node);
// 4.2: a type no handler runs falls back to the shape's handler.
func TestStartExitByIDAndTypeFallback(t *testing.T) {
	src := `digraph p { a [type="frobnicate", prompt="x"]; start -> a -> end }`
	r, h, _ := scriptedRunner(nil)
	res := runGraph(t, r, src)
	if res.State != RunSuccess {
		t.Fatalf("state %s (%s), path %v", res.State, res.FailureReason, res.Path)
	}
	if h.calls["start"] != 0 || h.calls["end"] != 0 || h.calls["a"] != 1 {
		t.Errorf("agent calls %v: want only a (start and end are no-ops, a falls back to codergen)", h.calls)
	}
	if !slices.Equal(res.Path, []string{"start", "a", "end"}) {
		t.Errorf("path %v", res.Path)
	}
	// With an exit by shape, a node named end is a stage like any other.
	g := mustParse(t, `digraph p { start [shape=Mdiamond]; end [prompt="x"]; done [shape=Msquare]; start -> end -> done }`)
	if got := g.Node("end").Type(); got != TypeCodergen {
		t.Errorf("end beside an Msquare: type %q, want codergen", got)
	}
	if ex := g.ExitNodes(); len(ex) != 1 || ex[0].ID != "done" {
		t.Errorf("exit nodes %v, want done", ex)
	}
	// Both start and Start: start is the start, Start a stage.
	g = mustParse(t, `digraph p { start -> Start -> end }`)
	if g.Node("start").Type() != TypeStart || g.Node("Start").Type() != TypeCodergen || g.StartNode() != g.Node("start") {
		t.Errorf("start %q, Start %q", g.Node("start").Type(), g.Node("Start").Type())
	}
	// A node named exit that names a handler keeps it.
	g = mustParse(t, `digraph p { start -> exit; exit [shape=hexagon] }`)
	if got := g.Node("exit").Type(); got != TypeHuman {
		t.Errorf("exit [shape=hexagon]: type %q, want wait.human", got)
	}
}

func TestGoalGates(t *testing.T) {
	t.Run("retry target", func(t *testing.T) {
		src := `digraph p { start [shape=Mdiamond]; impl [goal_gate=true, retry_target=impl]; check [shape=diamond]; done [shape=Msquare]
		  start -> impl -> check; check -> done }`
		r, h, _ := scriptedRunner(map[string][]StageStatus{"impl": {StatusPartialSuccess}})
		res := runGraph(t, r, src)
		if res.State != RunSuccess || h.calls["impl"] != 1 {
			t.Fatalf("partial_success satisfies a gate: %s %v", res.State, res.Path)
		}
	})
	t.Run("fails closed when never reached", func(t *testing.T) {
		src := `digraph p { start [shape=Mdiamond]; a; gate [goal_gate=true]; done [shape=Msquare]
		  start -> a; a -> done [condition="outcome=success"]; a -> gate [condition="outcome=fail"]; gate -> done }`
		r, _, _ := scriptedRunner(nil)
		res := runGraph(t, r, src)
		if res.State != RunFail {
			t.Fatalf("State = %q, want %q", res.State, RunFail)
		}
		if res.FailedNode != "gate" {
			t.Errorf("FailedNode = %q, want gate", res.FailedNode)
		}
		if !strings.Contains(res.FailureReason, "never ran") {
			t.Errorf("FailureReason = %q, want it to say %q", res.FailureReason, "never ran")
		}
	})
	t.Run("capped", func(t *testing.T) {
		src := `digraph p { start [shape=Mdiamond]; a [goal_gate=true, retry_target=a, max_node_visits=100]; done [shape=Msquare]
		  start -> a; a -> done [condition="outcome=fail"]; a -> done [condition="outcome=success"] }`
		r, h, _ := scriptedRunner(map[string][]StageStatus{"a": {StatusFail}})
		r.Limits.MaxGoalGateRetries = 2
		res := runGraph(t, r, src)
		if res.State != RunFail {
			t.Fatalf("State = %q, want %q", res.State, RunFail)
		}
		if n := h.calls["a"]; n != 3 {
			t.Errorf("a ran %d times, want 3", n)
		}
		if !strings.Contains(res.FailureReason, "after 2 retries") {
			t.Errorf("FailureReason = %q, want it to say %q", res.FailureReason, "after 2 retries")
		}
	})
}

func TestMaxNodeVisits(t *testing.T) {
	src := `digraph p { max_node_visits=3; start [shape=Mdiamond]; a; done [shape=Msquare]
	  start -> a; a -> a [condition="outcome=success"]; a -> done [condition="outcome=fail"] }`
	r, h, _ := scriptedRunner(nil)
	res := runGraph(t, r, src)
	if res.State != RunFail {
		t.Fatalf("State = %q, want %q", res.State, RunFail)
	}
	if n := h.calls["a"]; n != 3 {
		t.Errorf("a ran %d times, want 3", n)
	}
	if !strings.Contains(res.FailureReason, "max_node_visits=3") {
		t.Errorf("FailureReason = %q, want it to say %q", res.FailureReason, "max_node_visits=3")
	}
}

func TestBudgetStopsAndResumes(t *testing.T) {
	src := `digraph p { start [shape=Mdiamond]; a; b; c; done [shape=Msquare]; start -> a -> b -> c -> done }`
	r, h, _ := scriptedRunner(nil)
	r.Limits.MaxTokens = 20
	g := mustParse(t, src)
	dir := filepath.Join(t.TempDir(), "run")
	res, err := r.Run(context.Background(), g, RunConfig{RunDir: dir, Source: []byte(src)})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != RunBudget {
		t.Fatalf("State = %q, want %q: %s", res.State, RunBudget, res.FailureReason)
	}
	if res.NextNode != "c" {
		t.Fatalf("NextNode = %q, want c", res.NextNode)
	}
	if n := h.calls["c"]; n != 0 {
		t.Fatalf("c ran %d times before the budget stopped the run, want 0", n)
	}
	r.Limits.MaxTokens = 0
	res, err = r.Resume(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != RunSuccess {
		t.Fatalf("resumed: State = %q, want %q: %s", res.State, RunSuccess, res.FailureReason)
	}
	for _, node := range []string{"a", "c"} {
		if n := h.calls[node]; n != 1 {
			t.Errorf("resumed: %s ran %d times in all, want once", node, n)
		}
	}
	if res.Usage.TotalTokens != 30 {
		t.Errorf("resumed: Usage.TotalTokens = %d, want 30", res.Usage.TotalTokens)
	}
}

// TestResumeSameResult interrupts a run after each node in turn and checks
// that resuming gives what an uninterrupted run gives.
func TestResumeSameResult(t *testing.T) {
	src := `digraph p { goal="g"; start [shape=Mdiamond]; a; b [shape=diamond]; c; done [shape=Msquare]
	  start -> a -> b; b -> c [condition="outcome=success"]; b -> a [condition="outcome=fail"]; c -> done }`
	seq := func() map[string][]StageStatus {
		return map[string][]StageStatus{"a": {StatusSuccess, StatusSuccess}, "c": {StatusSuccess}}
	}
	r, _, _ := scriptedRunner(seq())
	want := runGraph(t, r, src)
	for _, stopAfter := range []string{"start", "a", "b", "c"} {
		t.Run(stopAfter, func(t *testing.T) {
			r, h, _ := scriptedRunner(seq())
			ctx, cancel := context.WithCancel(context.Background())
			h.hook = func(node string) {
				if node == stopAfter {
					cancel()
				}
			}
			r.OnEvent = func(ev Event) {
				if ev.Kind == EventStageCompleted && ev.NodeID == stopAfter {
					cancel()
				}
			}
			dir := filepath.Join(t.TempDir(), "run")
			res, err := r.Run(ctx, mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)})
			if err != nil {
				t.Fatal(err)
			}
			if res.State != RunCanceled {
				t.Fatalf("state %s", res.State)
			}
			h.hook, r.OnEvent = nil, nil
			got, err := r.Resume(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)})
			if err != nil {
				t.Fatal(err)
			}
			if got.State != want.State || !reflect.DeepEqual(got.Path, want.Path) {
				t.Fatalf("resumed: %s %v; uninterrupted: %s %v", got.State, got.Path, want.State, want.Path)
			}
			for _, k := range []string{"seen.a", "seen.c", KeyOutcome, KeyGoal} {
				if got.Context[k] != want.Context[k] {
					t.Errorf("context %s: %v, want %v", k, got.Context[k], want.Context[k])
				}
			}
		})
	}
}

func TestResumeRefusesOtherSource(t *testing.T) {
	src := `digraph p { start [shape=Mdiamond]; a; done [shape=Msquare]; start -> a -> done }`
	r, _, _ := scriptedRunner(nil)
	r.Limits.MaxTokens = 5
	dir := filepath.Join(t.TempDir(), "run")
	if _, err := r.Run(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)}); err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(src, "a;", "a [prompt=x];", 1)
	if _, err := r.Resume(context.Background(), mustParse(t, other), RunConfig{RunDir: dir, Source: []byte(other)}); err == nil || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("err %v", err)
	}
	if _, err := r.Run(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)}); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("a second run into the same directory: %v", err)
	}
}

type panicHandler struct{}

func (panicHandler) Type() string { return TypeCodergen }
func (panicHandler) Execute(context.Context, *Node, *Context, *ArtifactStore) (*Outcome, error) {
	panic("boom")
}

type slowHandler struct{}

func (slowHandler) Type() string { return TypeCodergen }
func (slowHandler) Execute(ctx context.Context, _ *Node, _ *Context, _ *ArtifactStore) (*Outcome, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestHandlerFaultsAreFail(t *testing.T) {
	for name, h := range map[string]Handler{"panic": panicHandler{}, "timeout": slowHandler{}} {
		t.Run(name, func(t *testing.T) {
			reg := DefaultHandlerRegistry()
			reg.Register(h)
			src := `digraph p { start [shape=Mdiamond]; a [timeout="50ms"]; done [shape=Msquare]; start -> a -> done }`
			res := runGraph(t, &Runner{Handlers: reg}, src)
			if res.State != RunFail || res.FailedNode != "a" {
				t.Fatalf("got %s at %s", res.State, res.FailedNode)
			}
			want := map[string]string{"panic": "panicked", "timeout": "timed out after 50ms"}[name]
			if !strings.Contains(res.FailureReason, want) {
				t.Errorf("reason %q, want %q", res.FailureReason, want)
			}
		})
	}
}

func TestEventsCarryNodeID(t *testing.T) {
	var mu sync.Mutex
	var evs []Event
	r, _, _ := scriptedRunner(nil)
	r.OnEvent = func(ev Event) { mu.Lock(); evs = append(evs, ev); mu.Unlock() }
	runGraph(t, r, `digraph p { start [shape=Mdiamond]; a; done [shape=Msquare]; start -> a -> done }`)
	kinds := map[EventKind]int{}
	for _, ev := range evs {
		kinds[ev.Kind]++
		if strings.HasPrefix(string(ev.Kind), "stage.") && ev.NodeID == "" {
			t.Errorf("%s without a node", ev.Kind)
		}
		if ev.RunID == "" {
			t.Errorf("%s without a run id", ev.Kind)
		}
	}
	for kind, want := range map[EventKind]int{EventPipelineStarted: 1, EventPipelineCompleted: 1, EventStageStarted: 3, EventStageCompleted: 3} {
		if kinds[kind] != want {
			t.Errorf("%d %s events, want %d (events %v)", kinds[kind], kind, want, kinds)
		}
	}
	if n := kinds[EventCheckpointSaved]; n < 3 {
		t.Errorf("%d %s events, want at least 3", n, EventCheckpointSaved)
	}
}

// A resumed run keeps the goal it started with, and a parsed graph may be
// run again with another goal (Run works on a copy).
func TestGoalAcrossRunsAndResume(t *testing.T) {
	src := `digraph p { goal="file goal"; start [shape=Mdiamond]; a [prompt="A: $goal"]; b [prompt="B: $goal"]; done [shape=Msquare]; start -> a -> b -> done }`
	g := mustParse(t, src)
	b := &fakeBackend{tokens: 10}
	r := &Runner{Backend: b, Limits: Limits{MaxTokens: 10}}
	dir := filepath.Join(t.TempDir(), "run")
	res, err := r.Run(context.Background(), g, RunConfig{RunDir: dir, Goal: "flag goal", Source: []byte(src)})
	if err != nil || res.State != RunBudget {
		t.Fatalf("%v %+v", err, res)
	}
	r.Limits.MaxTokens = 0
	if _, err := r.Resume(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background(), g, RunConfig{RunDir: filepath.Join(t.TempDir(), "run2")}); err != nil {
		t.Fatal(err)
	}
	var prompts []string
	for _, c := range b.calls {
		prompts = append(prompts, c.Prompt)
	}
	want := []string{"A: flag goal", "B: flag goal", "A: file goal", "B: file goal"}
	if !reflect.DeepEqual(prompts, want) {
		t.Errorf("prompts %q, want %q", prompts, want)
	}
	if g.Nodes[1].Attrs["prompt"] != "A: $goal" {
		t.Errorf("Run changed the caller's graph: %q", g.Nodes[1].Attrs["prompt"])
	}
}

// The wall-time budget ends a stage in progress (a gate no one answers):
// the run stops resumably at that stage.
func TestWallTimeEndsAStage(t *testing.T) {
	src := `digraph p { start [shape=Mdiamond]; gate [shape=hexagon]; done [shape=Msquare]; start -> gate; gate -> done [label="ok"] }`
	r := &Runner{Interviewer: NewQueueInterviewer(), Limits: Limits{MaxWallTime: 100 * time.Millisecond}}
	start := time.Now()
	res := runGraph(t, r, src)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the run took %s, want it stopped soon after its 100ms budget", took)
	}
	if res.State != RunBudget {
		t.Errorf("State = %q, want %q: %s", res.State, RunBudget, res.FailureReason)
	}
	if res.NextNode != "gate" {
		t.Errorf("NextNode = %q, want gate", res.NextNode)
	}
}

// A node's timeout on a gate takes its default choice, as human.timeout does.
func TestHumanGateNodeTimeout(t *testing.T) {
	src := `digraph p { start [shape=Mdiamond]; gate [shape=hexagon, timeout="20ms", human.default_choice="go"]; done [shape=Msquare]; start -> gate; gate -> done [label="go"] }`
	res := runGraph(t, &Runner{Interviewer: NewQueueInterviewer()}, src)
	if res.State != RunSuccess {
		t.Fatalf("got %s: %s", res.State, res.FailureReason)
	}
}

// Spec 4.8: wait_all is SUCCESS when fail_count == 0, else PARTIAL_SUCCESS
// (every branch failed included); first_success is SUCCESS when any branch
// succeeded, else FAIL. 4.9: the fan-in FAILs when no branch succeeded, and
// the run routes on that FAIL (3.7).
func TestParallelJoinAllFailed(t *testing.T) {
	const src = `digraph p { start [shape=Mdiamond]; fan [shape=component, join_policy=%s]
	  a [shape=parallelogram, tool=fail, tool_input="{\"id\": \"a\"}"]
	  b [shape=parallelogram, tool=fail, tool_input="{\"id\": \"b\"}"]
	  join [shape=tripleoctagon]; done [shape=Msquare]
	  start -> fan; fan -> a -> join; fan -> b -> join; join -> done %s }`
	for _, tc := range []struct {
		name, policy, failEdge string
		fan, join              StageStatus
		state                  string
		failed, path           string
	}{
		{"wait_all every branch failed (4.8, 4.9)", JoinWaitAll, "", StatusPartialSuccess, StatusFail, RunFail, "join", "start,fan,join"},
		{"wait_all routes on the fan-in's FAIL (3.7)", JoinWaitAll, `; fixit [shape=parallelogram, tool=echo, tool_input="{\"id\": \"f\"}"]; join -> fixit [condition="outcome=fail"]; fixit -> done`, StatusPartialSuccess, StatusFail, RunSuccess, "", "start,fan,join,fixit,done"},
		{"first_success none succeeded (4.8)", JoinFirstSuccess, "", StatusFail, "", RunFail, "fan", "start,fan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runGraph(t, &Runner{Tools: &fakeTools{}}, fmt.Sprintf(src, tc.policy, tc.failEdge))
			if res.State != tc.state || res.FailedNode != tc.failed || strings.Join(res.Path, ",") != tc.path {
				t.Fatalf("got %s at %q, path %v; want %s at %q, path %s", res.State, res.FailedNode, res.Path, tc.state, tc.failed, tc.path)
			}
			if got := res.Nodes["fan"].Status; got != tc.fan {
				t.Errorf("fan %s, want %s", got, tc.fan)
			}
			if tc.join != "" && res.Nodes["join"].Status != tc.join {
				t.Errorf("join %s, want %s", res.Nodes["join"].Status, tc.join)
			}
		})
	}
}

// A manager stage that was interrupted inside its child resumes the
// child's cycle instead of starting it again.
func TestManagerLoopResumes(t *testing.T) {
	dir := t.TempDir()
	child := `digraph child { start [shape=Mdiamond]; work; more; done [shape=Msquare]; start -> work -> more -> done }`
	if err := os.WriteFile(filepath.Join(dir, "child.dot"), []byte(child), 0o644); err != nil {
		t.Fatal(err)
	}
	parent := `digraph p { start [shape=Mdiamond]; boss [shape=house, stack.child_dotfile="child.dot"]; done [shape=Msquare]; start -> boss -> done }`
	path := filepath.Join(dir, "p.dot")
	if err := os.WriteFile(path, []byte(parent), 0o644); err != nil {
		t.Fatal(err)
	}
	r, h, clk := scriptedRunner(nil)
	r.Clock = childEndClock{clk}
	ctx, cancel := context.WithCancel(context.Background())
	h.hook = func(node string) {
		if node == "more" {
			cancel()
		}
	}
	run := filepath.Join(dir, "run")
	res, err := r.Run(ctx, mustParse(t, parent), RunConfig{RunDir: run, Source: []byte(parent), DotFile: path})
	if err != nil || res.State != RunCanceled {
		t.Fatalf("%v %+v", err, res)
	}
	h.hook = nil
	// Resumed from the run directory's copy, as morph pipeline run --resume does.
	res, err = r.Resume(context.Background(), mustParse(t, parent), RunConfig{RunDir: run, Source: []byte(parent), DotFile: filepath.Join(run, SourceFile)})
	if err != nil || res.State != RunSuccess {
		t.Fatalf("resume: %v %+v", err, res)
	}
	if h.calls["work"] != 1 || h.calls["more"] != 2 {
		t.Errorf("calls %v: the child's cycle started over", h.calls)
	}
}

func TestReadDOTFileRefusesNonRegular(t *testing.T) {
	if _, _, err := ReadDOTFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("err %v", err)
	}
}

// One run directory, one process at a time: while a run waits at its gate,
// neither a second run nor a resume of it starts there; once it has
// stopped, the resume does.
func TestRunDirectoryIsLocked(t *testing.T) {
	src := `digraph p { start [shape=Mdiamond]; gate [shape=hexagon]; done [shape=Msquare]; start -> gate; gate -> done [label="ok"] }`
	dir := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithCancel(context.Background())
	iv := NewQueueInterviewer()
	done := make(chan *Result, 1)
	go func() {
		res, err := (&Runner{Interviewer: iv}).Run(ctx, mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for len(iv.Asked()) == 0 {
		time.Sleep(time.Millisecond)
	}
	// Refused by the lock, before the check of the checkpoint the first
	// run saved after its start node.
	if _, err := (&Runner{}).Run(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)}); !errors.Is(err, ErrRunDir) || !strings.Contains(err.Error(), "is in use") {
		t.Errorf("a second run in the directory: %v", err)
	}
	cancel()
	res := <-done
	if res == nil || res.State != RunCanceled {
		t.Fatalf("the first run: %+v", res)
	}
	release, err := lockRunDir(dir) // as a resume in progress holds it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&Runner{}).Resume(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)}); !errors.Is(err, ErrRunDir) || !strings.Contains(err.Error(), "is in use") {
		t.Errorf("a resume while another holds the directory: %v", err)
	}
	release()
	iv.Push(Answer{Choice: "ok"})
	if res, err := (&Runner{Interviewer: iv}).Resume(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)}); err != nil || res.State != RunSuccess {
		t.Fatalf("the resume: %v %+v", err, res)
	}
}

// TestResumeRemovesOrphanTemps: the temporary files writeFile names, which
// a process killed mid-write leaves, are removed by the next resume (and
// logged); files of other names stay, a stage's hidden ".x.tmp1" too.
func TestResumeRemovesOrphanTemps(t *testing.T) {
	src := `digraph p { start [shape=Mdiamond]; a; b; done [shape=Msquare]; start -> a -> b -> done }`
	r, _, _ := scriptedRunner(nil)
	r.Limits.MaxTokens = 5
	dir := filepath.Join(t.TempDir(), "run")
	if res, err := r.Run(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)}); err != nil || res.State != RunBudget {
		t.Fatalf("%v %+v", err, res)
	}
	var orphans []string
	for _, path := range []string{filepath.Join(dir, "artifacts", "a.output"), filepath.Join(dir, CheckpointFile), filepath.Join(dir, "a", "response.md")} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.CreateTemp(filepath.Dir(path), tempPattern(path)) // as writeFile names them
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		orphans = append(orphans, f.Name())
	}
	kept := []string{filepath.Join(dir, "artifacts", "notes.tmp1"), filepath.Join(dir, "artifacts", ".a.output.tmpx"), filepath.Join(dir, "a", "x.tmp12"),
		filepath.Join(dir, "a", ".draft.tmp123"), filepath.Join(dir, "artifacts", ".a.output.morph-tmpx")} // a stage's own, hidden and numbered
	for _, path := range kept {
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logged bytes.Buffer
	r.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	r.Limits.MaxTokens = 0
	res, err := r.Resume(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)})
	if err != nil || res.State != RunSuccess {
		t.Fatalf("%v %+v", err, res)
	}
	for _, path := range orphans {
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it removed", path, err)
		}
		if !strings.Contains(logged.String(), path) {
			t.Errorf("the log does not name %s:\n%s", path, logged.String())
		}
	}
	for _, path := range kept {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s, not the runner's: %v", path, err)
		}
	}
}

// TestResumeOfAnEndedRun: a run that is over runs nothing again; Resume
// returns the Result it ended with, from its checkpoint.
func TestResumeOfAnEndedRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		seq  map[string][]StageStatus
	}{
		{"success", nil},
		{"fail", map[string][]StageStatus{"b": {StatusFail}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := `digraph p { start [shape=Mdiamond]; a; b; done [shape=Msquare]; start -> a -> b -> done }`
			r, h, _ := scriptedRunner(tc.seq)
			dir := filepath.Join(t.TempDir(), "run")
			want, err := r.Run(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)})
			if err != nil || want.State != tc.name {
				t.Fatalf("%v %+v", err, want)
			}
			calls := maps.Clone(h.calls)
			got, err := r.Resume(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)})
			if err != nil {
				t.Fatal(err)
			}
			if !got.Over || want.Over {
				t.Errorf("Over: resumed %v, ran %v", got.Over, want.Over)
			}
			got.Over = false
			if a, b := mustJSON(t, got), mustJSON(t, want); a != b || !reflect.DeepEqual(h.calls, calls) {
				t.Errorf("resumed %s\nran     %s\ncalls %v, before %v", a, b, h.calls, calls)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
