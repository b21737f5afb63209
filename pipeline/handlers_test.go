package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTools is a ToolRunner that echoes its input and counts calls.
type fakeTools struct {
	mu    sync.Mutex
	calls map[string]int
	delay map[string]time.Duration // by input id
}

func (f *fakeTools) HasTool(name string) bool { return name == "echo" || name == "fail" }

func (f *fakeTools) RunTool(ctx context.Context, name string, input map[string]any) (string, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	id := fmt.Sprint(input["id"])
	f.calls[id]++
	f.mu.Unlock()
	if d := f.delay[id]; d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if name == "fail" {
		return "", fmt.Errorf("tool failed on %v", input["id"])
	}
	b, _ := json.Marshal(input)
	return string(b), nil
}

const fanOut = `digraph p {
  start [shape=Mdiamond]
  fan [shape=component, join_policy=%s]
  a [shape=parallelogram, tool=echo, tool_input="{\"id\": \"a\"}"]
  b [shape=parallelogram, tool=%s, tool_input="{\"id\": \"b\"}"]
  b2 [shape=parallelogram, tool=echo, tool_input="{\"id\": \"b2\"}"]
  join [shape=tripleoctagon]
  done [shape=Msquare]
  start -> fan
  fan -> a -> join
  fan -> b -> b2 -> join
  join -> done
}`

func TestParallelFanOutIn(t *testing.T) {
	tools := &fakeTools{}
	res := runGraph(t, &Runner{Tools: tools}, fmt.Sprintf(fanOut, "wait_all", "echo"))
	if res.State != RunSuccess {
		t.Fatalf("%s: %s", res.State, res.FailureReason)
	}
	if want := []string{"start", "fan", "join", "done"}; strings.Join(res.Path, ",") != strings.Join(want, ",") {
		t.Errorf("path %v", res.Path)
	}
	for _, tool := range []string{"a", "b", "b2"} {
		if n := tools.calls[tool]; n != 1 {
			t.Errorf("tool %s called %d times, want once (calls %v)", tool, n, tools.calls)
		}
	}
	results, ok := res.Context[KeyParallelResults].(map[string]any)
	if !ok || len(results) != 2 {
		t.Fatalf("parallel.results: %#v", res.Context[KeyParallelResults])
	}
	b := results["b"].(map[string]any)
	if b["status"] != "success" || fmt.Sprint(b["path"]) != "[b b2]" {
		t.Errorf("branch b: %v", b)
	}
	if res.Context["parallel.fan_in.best"] != "a" {
		t.Errorf("fan-in: best %v", res.Context["parallel.fan_in.best"])
	}
	// Spec 4.9: context_updates = {"parallel.fan_in.best_id": best.id,
	// "parallel.fan_in.best_outcome": best.outcome}.
	if res.Context[KeyFanInBestID] != "a" || res.Context[KeyFanInBestOutcome] != "success" {
		t.Errorf("fan-in: best_id %v, best_outcome %v", res.Context[KeyFanInBestID], res.Context[KeyFanInBestOutcome])
	}
	for _, id := range []string{"a", "b", "b2"} {
		if res.Nodes[id] == nil || res.Nodes[id].Status != StatusSuccess {
			t.Errorf("node %s: %+v", id, res.Nodes[id])
		}
	}
}

// Spec 3.8: "Branch contexts are isolated; changes are not merged back into
// the parent"; merge_context=best on the fan-in asks for the chosen branch's.
func TestFanInMergeContext(t *testing.T) {
	for _, tc := range []struct {
		name, attrs string
		merged      bool
	}{
		{"default: not merged (3.8)", "", false},
		{"merge_context=none (3.8)", `, merge_context="none"`, false},
		{"merge_context=best", `, merge_context="best"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(fmt.Sprintf(fanOut, "wait_all", "echo"), "join [shape=tripleoctagon]", "join [shape=tripleoctagon"+tc.attrs+"]", 1)
			res := runGraph(t, &Runner{Tools: &fakeTools{}}, src)
			if res.State != RunSuccess {
				t.Fatalf("%s: %s", res.State, res.FailureReason)
			}
			if got, ok := res.Context["a.output"]; ok != tc.merged || tc.merged && got != `{"id":"a"}` {
				t.Errorf("parent a.output = %v (set %v), want set %v", got, ok, tc.merged)
			}
			results := res.Context[KeyParallelResults].(map[string]any)
			if upd := results["a"].(map[string]any)["context_updates"].(map[string]any); upd["a.output"] != `{"id":"a"}` {
				t.Errorf("parallel.results.a.context_updates lost the branch's update: %v", upd)
			}
		})
	}
}

// Spec 4.9: heuristic_select ranks "SUCCESS: 0, PARTIAL_SUCCESS: 1,
// RETRY: 2, FAIL: 3"; a custom status (10.2) is no success and ranks last.
func TestFanInRanksCustomStatusLast(t *testing.T) {
	pctx := NewContext()
	pctx.Set(KeyParallelResults, map[string]BranchResult{
		"a": {Branch: "a", Status: "needs_dod"},
		"b": {Branch: "b", Status: StatusPartialSuccess},
	})
	out, err := (&FanInHandler{}).Execute(context.Background(), &Node{ID: "join"}, pctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.ContextUpdates[KeyFanInBestID] != "b" || out.Status != StatusSuccess {
		t.Errorf("picked %v (%s), want b, success", out.ContextUpdates[KeyFanInBestID], out.Status)
	}
}

func TestParallelPartialAndFirstSuccess(t *testing.T) {
	tools := &fakeTools{}
	res := runGraph(t, &Runner{Tools: tools}, fmt.Sprintf(fanOut, "wait_all", "fail"))
	if res.State != RunSuccess || res.Nodes["fan"].Status != StatusPartialSuccess {
		t.Fatalf("one failing branch: %s, fan %s", res.State, res.Nodes["fan"].Status)
	}
	if tools.calls["b2"] != 0 {
		t.Error("a failed branch went on")
	}
	if res.Context["parallel.fan_in.best"] != "a" {
		t.Errorf("best %v", res.Context["parallel.fan_in.best"])
	}

	tools = &fakeTools{delay: map[string]time.Duration{"b": time.Minute}}
	res = runGraph(t, &Runner{Tools: tools}, fmt.Sprintf(fanOut, "first_success", "echo"))
	if res.State != RunSuccess || res.Nodes["fan"].Status != StatusSuccess {
		t.Fatalf("first_success: %s", res.State)
	}
	if tools.calls["b2"] != 0 {
		t.Errorf("first_success: the slower branch ran to its end: %v", tools.calls)
	}
}

func TestHumanGate(t *testing.T) {
	src := `digraph p {
	  start [shape=Mdiamond]
	  gate [shape=hexagon, label="Ship it?", human.timeout="%s" %s]
	  yes; no; done [shape=Msquare]
	  start -> gate
	  gate -> yes [label="[Y] Yes"]
	  gate -> no [label="N) No"]
	  yes -> done; no -> done
	}`
	t.Run("answer", func(t *testing.T) {
		q := NewQueueInterviewer()
		q.Push(Answer{Choice: "n"})
		r, _, _ := scriptedRunner(nil)
		r.Interviewer = q
		res := runGraph(t, r, fmt.Sprintf(src, "1m", ""))
		if strings.Join(res.Path, ",") != "start,gate,no,done" {
			t.Fatalf("path %v", res.Path)
		}
		asked := q.Asked()
		if len(asked) != 1 {
			t.Fatalf("%d questions asked, want 1: %+v", len(asked), asked)
		}
		if asked[0].Text != "Ship it?" {
			t.Errorf("question Text = %q, want %q", asked[0].Text, "Ship it?")
		}
		var keys []string
		for _, c := range asked[0].Choices {
			keys = append(keys, c.Key)
		}
		if want := []string{"Y", "N"}; !slices.Equal(keys, want) {
			t.Errorf("question's choice keys = %q, want %q", keys, want)
		}
		if res.Context["human.choice"] != "N) No" {
			t.Errorf("human.choice %v", res.Context["human.choice"])
		}
		// Spec 4.6: context_updates={"human.gate.selected": selected.key,
		// "human.gate.label": selected.label}.
		if res.Context[KeyHumanGateSelected] != "N" || res.Context[KeyHumanGateLabel] != "N) No" {
			t.Errorf("human.gate.selected %v, human.gate.label %v", res.Context[KeyHumanGateSelected], res.Context[KeyHumanGateLabel])
		}
	})
	t.Run("timeout takes the default", func(t *testing.T) {
		r, _, _ := scriptedRunner(nil)
		r.Interviewer = NewQueueInterviewer() // never answers
		res := runGraph(t, r, fmt.Sprintf(src, "20ms", `, human.default_choice="Yes"`))
		if strings.Join(res.Path, ",") != "start,gate,yes,done" {
			t.Fatalf("path %v", res.Path)
		}
	})
	t.Run("timeout without default retries", func(t *testing.T) {
		r, _, _ := scriptedRunner(nil)
		r.Interviewer = NewQueueInterviewer()
		res := runGraph(t, r, fmt.Sprintf(src, "10ms", `, max_retries=1`))
		if res.State != RunFail {
			t.Fatalf("State = %q, want %q", res.State, RunFail)
		}
		if res.FailedNode != "gate" {
			t.Errorf("FailedNode = %q, want gate", res.FailedNode)
		}
		if n := res.Nodes["gate"].Attempts; n != 2 {
			t.Errorf("gate's Attempts = %d, want 2 (%+v)", n, res.Nodes["gate"])
		}
	})
	t.Run("auto approve", func(t *testing.T) {
		res := runGraph(t, &Runner{Backend: &fakeBackend{}}, fmt.Sprintf(src, "1m", ""))
		if strings.Join(res.Path, ",") != "start,gate,yes,done" {
			t.Fatalf("path %v", res.Path)
		}
	})
}

func TestConsoleInterviewer(t *testing.T) {
	var out strings.Builder
	c := &ConsoleInterviewer{In: strings.NewReader("maybe\ny\n"), Out: &out}
	q := Question{NodeID: "g", Text: "Go?\x1b[2J", Choices: []Choice{{Key: "Y", Label: "[Y] Yes", To: "y"}, {Key: "N", Label: "[N] No", To: "n"}}}
	a, err := c.Ask(context.Background(), q)
	if err != nil || a.Choice != "y" {
		t.Fatalf("answer %+v, %v", a, err)
	}
	if !strings.Contains(out.String(), "not a choice: maybe") || strings.Contains(out.String(), "\x1b") {
		t.Errorf("console output %q", out.String())
	}
	if _, err := c.Ask(context.Background(), q); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Errorf("closed input: %v", err)
	}
}

func TestToolNode(t *testing.T) {
	pctx := NewContext()
	pctx.Set(KeyGoal, `say "hi"`)
	pctx.Set("who", `x", "id": "injected`)
	n := &Node{ID: "t", Attrs: map[string]string{"tool": "echo", "tool_input": `{"id": "${context.who}", "goal": "$goal", "n": 3}`}}
	o := execNode(t, &ToolHandler{}, n, pctx, &Runner{Tools: &fakeTools{}})
	var got map[string]any
	if err := json.Unmarshal([]byte(o.ContextUpdates[KeyToolOutput].(string)), &got); err != nil {
		t.Fatalf("output %v: %v", o.ContextUpdates[KeyToolOutput], err)
	}
	for k, want := range map[string]any{"id": `x", "id": "injected`, "goal": `say "hi"`, "n": 3.0} {
		if got[k] != want {
			t.Errorf("input as the tool saw it: %s = %#v, want %#v", k, got[k], want)
		}
	}

	o = execNode(t, &ToolHandler{}, &Node{ID: "t", Attrs: map[string]string{"tool": "nope"}}, pctx, &Runner{Tools: &fakeTools{}})
	if o.Status != StatusFail || !strings.Contains(o.FailureReason, `no tool "nope"`) {
		t.Errorf("unknown tool: %+v", o)
	}
	o = execNode(t, &ToolHandler{}, &Node{ID: "t", Attrs: map[string]string{"tool": "echo", "timeout": "20ms"}}, pctx, &Runner{Tools: &fakeTools{delay: map[string]time.Duration{"<nil>": time.Minute}}})
	if o.Status != StatusFail || !strings.Contains(o.FailureReason, "timed out after 20ms") {
		t.Errorf("slow tool: %+v", o)
	}
}

func TestShellCommand(t *testing.T) {
	cmd := func(c string, attrs ...string) *Node {
		n := &Node{ID: "sh", Attrs: map[string]string{"tool_command": c}}
		for i := 0; i+1 < len(attrs); i += 2 {
			n.Attrs[attrs[i]] = attrs[i+1]
		}
		return n
	}
	o := execNode(t, &ToolHandler{}, cmd("echo hi"), NewContext(), &Runner{})
	if o.Status != StatusFail || !strings.Contains(o.FailureReason, "allow_shell = true under [pipeline]") {
		t.Fatalf("shell off: %+v", o)
	}
	t.Setenv("MORPH_TEST_SECRET", "sk-secret")
	pctx := NewContext()
	pctx.Set(KeyGoal, "the goal")
	on := &Runner{AllowShell: true, Limits: Limits{MaxToolOutputBytes: 64}}
	o = execNode(t, &ToolHandler{}, cmd(`echo "$MORPH_GOAL|$MORPH_TEST_SECRET|"`), pctx, on)
	if o.Status != StatusSuccess {
		t.Fatalf("env: Status = %q, want %q (%+v)", o.Status, StatusSuccess, o)
	}
	if got := o.ContextUpdates[KeyToolOutput]; got != "the goal||\n" {
		t.Errorf("env: output %q, want the goal and no secret", got)
	}
	o = execNode(t, &ToolHandler{}, cmd(`yes | head -c 100000`), pctx, on)
	if o.Status != StatusSuccess {
		t.Fatalf("output cap: Status = %q, want %q (%+v)", o.Status, StatusSuccess, o)
	}
	out := o.ContextUpdates[KeyToolOutput].(string)
	if len(out) > 200 {
		t.Errorf("output cap: %d bytes of output, want at most 200", len(out))
	}
	if !strings.Contains(out, "more bytes") {
		t.Errorf("output cap: output %q does not say how many more bytes there were", out)
	}
	start := time.Now()
	o = execNode(t, &ToolHandler{}, cmd(`sleep 30 & sleep 30`, "timeout", "100ms"), pctx, on)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("timeout: the stage took %s, want it ended soon after its 100ms", took)
	}
	if o.Status != StatusFail {
		t.Errorf("timeout: Status = %q, want %q", o.Status, StatusFail)
	}
	if !strings.Contains(o.FailureReason, "timed out") {
		t.Errorf("timeout: FailureReason = %q, want it to say %q", o.FailureReason, "timed out")
	}
	// A child left in the background neither fails the stage nor outlives
	// it. The child's own pid is looked for, not its command line, which
	// another test run at the same time may share.
	pidFile := filepath.Join(t.TempDir(), "pid")
	o = execNode(t, &ToolHandler{}, cmd(`(sleep 12345 & echo $! >`+pidFile+`) ; echo done`), pctx, on)
	if o.Status != StatusSuccess || o.ContextUpdates[KeyToolOutput] != "done\n" {
		t.Fatalf("background child: %+v", o)
	}
	if pid, err := os.ReadFile(pidFile); err != nil {
		t.Errorf("the background child's pid: %v", err)
	} else if _, err := exec.LookPath("ps"); err != nil {
		t.Log("no ps: the background child is not looked for")
	} else if !gone(strings.TrimSpace(string(pid))) {
		t.Errorf("the background child outlived its stage: pid %s", pid)
	}
	o = execNode(t, &ToolHandler{}, cmd(`echo bad >&2; exit 3`), pctx, on)
	if o.Status != StatusFail {
		t.Errorf("exit status: Status = %q, want %q", o.Status, StatusFail)
	}
	for _, want := range []string{"status 3", "bad"} {
		if !strings.Contains(o.FailureReason, want) {
			t.Errorf("exit status: FailureReason = %q, want it to say %q", o.FailureReason, want)
		}
	}
}

func TestManagerLoop(t *testing.T) {
	dir := t.TempDir()
	child := `digraph child { start [shape=Mdiamond]; work; done [shape=Msquare]; start -> work -> done }`
	if err := os.WriteFile(filepath.Join(dir, "child.dot"), []byte(child), 0o644); err != nil {
		t.Fatal(err)
	}
	// Appendix A: stack.child_dotfile is a graph attribute; morph also
	// reads it on the node, which wins.
	for _, tc := range []struct{ name, graph, node, fail string }{
		{name: "on the node", node: `stack.child_dotfile="child.dot", `},
		{name: "on the graph (Appendix A)", graph: `stack.child_dotfile="child.dot"; `},
		{name: "the node's wins", graph: `stack.child_dotfile="missing.dot"; `, node: `stack.child_dotfile="child.dot", `},
		{name: "neither", fail: "set it on the node or on the graph"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := `digraph p { goal="G"; ` + tc.graph + `start [shape=Mdiamond]; boss [shape=house, ` + tc.node + `manager.max_child_runs=3]; done [shape=Msquare]; start -> boss -> done }`
			r, h, clk := scriptedRunner(map[string][]StageStatus{"work": {StatusFail, StatusSuccess}})
			r.Clock = childEndClock{clk}
			g, err := ParseDOTNamed(filepath.Join(dir, "p.dot"), []byte(parent))
			if err != nil {
				t.Fatal(err)
			}
			run := t.TempDir()
			res, err := r.Run(context.Background(), g, RunConfig{RunDir: run})
			if err != nil {
				t.Fatal(err)
			}
			if tc.fail != "" {
				if res.State != RunFail || !strings.Contains(res.FailureReason, tc.fail) {
					t.Fatalf("got %s: %s; want a failure saying %q", res.State, res.FailureReason, tc.fail)
				}
				return
			}
			if res.State != RunSuccess {
				t.Fatalf("State = %q, want %q: %s", res.State, RunSuccess, res.FailureReason)
			}
			if n := h.calls["work"]; n != 2 {
				t.Errorf("work ran %d times, want 2", n)
			}
			if got := res.Context["boss.child_runs"]; got != 2.0 {
				t.Errorf("boss.child_runs = %#v, want 2.0", got)
			}
			if _, err := os.Stat(filepath.Join(run, "boss", "cycle-2", CheckpointFile)); err != nil {
				t.Errorf("child run directory: %v", err)
			}
		})
	}
}

func TestManagerLoopRecursionBounded(t *testing.T) {
	dir := t.TempDir()
	self := `digraph p { start [shape=Mdiamond]; again [shape=house, stack.child_dotfile="self.dot"]; done [shape=Msquare]; start -> again -> done }`
	path := filepath.Join(dir, "self.dot")
	if err := os.WriteFile(path, []byte(self), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := ParseDOTNamed(path, []byte(self))
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&Runner{Limits: Limits{MaxChildDepth: 3}}).Run(context.Background(), g, RunConfig{RunDir: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != RunFail || !strings.Contains(res.FailureReason, "nest deeper than 3") {
		t.Fatalf("got %s: %s", res.State, res.FailureReason)
	}
}

// Spec 5.4: fidelity is the incoming edge's, then the node's, then the
// graph's default_fidelity, then compact; the thread is the node's
// thread_id, the edge's, the graph's, the subgraph-derived class, then the
// previous node's id.
func TestFidelityAndThreadPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name, graphAttrs, nodeAttrs, edgeAttrs string
		viaEdge                                bool
		ctxFidelity                            string
		fidelity, thread                       string
	}{
		{name: "edge fidelity beats the node's", nodeAttrs: `fidelity="compact"`, edgeAttrs: `fidelity="full"`, viaEdge: true, fidelity: FidelityFull, thread: "a"},
		{name: "node fidelity only", nodeAttrs: `fidelity="truncate"`, viaEdge: true, fidelity: FidelityTruncate, thread: "a"},
		{name: "graph default only", graphAttrs: `default_fidelity="summary:low"`, viaEdge: true, fidelity: FidelitySummaryLow, thread: "a"},
		{name: "none: compact", viaEdge: true, fidelity: FidelityCompact, thread: "a"},
		{name: "the context's after the node's", nodeAttrs: `fidelity="full"`, ctxFidelity: FidelityTruncate, viaEdge: true, fidelity: FidelityFull, thread: "a"},
		{name: "the context's before the graph's", graphAttrs: `default_fidelity="compact"`, ctxFidelity: FidelityFull, viaEdge: true, fidelity: FidelityFull, thread: "a"},
		{name: "node thread beats the edge's", nodeAttrs: `thread_id="n"`, edgeAttrs: `thread_id="e"`, viaEdge: true, fidelity: FidelityCompact, thread: "n"},
		{name: "edge thread beats the graph's", graphAttrs: `thread_id="g"`, edgeAttrs: `thread_id="e"`, viaEdge: true, fidelity: FidelityCompact, thread: "e"},
		{name: "graph thread beats the class", graphAttrs: `thread_id="g"`, nodeAttrs: `class="review"`, viaEdge: true, fidelity: FidelityCompact, thread: "g"},
		{name: "class-derived thread", nodeAttrs: `class="review,extra"`, viaEdge: true, fidelity: FidelityCompact, thread: "review"},
		{name: "no edge (a jump): the node's own id", fidelity: FidelityCompact, thread: "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := mustParse(t, fmt.Sprintf(`digraph p { graph [%s]; start [shape=Mdiamond]; a; b [%s]; done [shape=Msquare]
			  start -> a -> b [%s]; b -> done }`, tc.graphAttrs, tc.nodeAttrs, tc.edgeAttrs))
			x := &Execution{Graph: g}
			if tc.viaEdge {
				x.Edge = g.Outgoing("a")[0]
			}
			pctx := NewContext()
			if tc.ctxFidelity != "" {
				pctx.Set("fidelity", tc.ctxFidelity)
			}
			n := g.Node("b")
			if got := fidelityOf(x, n, pctx); got != tc.fidelity {
				t.Errorf("fidelity %q, want %q", got, tc.fidelity)
			}
			if got := threadOf(x, n); got != tc.thread {
				t.Errorf("thread %q, want %q", got, tc.thread)
			}
		})
	}
}

// gone says whether process pid has ended (a zombie that its new parent
// has yet to reap counts as ended), waiting for it generously: the kill
// is asynchronous.
func gone(pid string) bool {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, _ := exec.Command("ps", "-o", "stat=", "-p", pid).Output()
		if st := strings.TrimSpace(string(out)); st == "" || strings.HasPrefix(st, "Z") {
			return true
		}
	}
	return false
}
