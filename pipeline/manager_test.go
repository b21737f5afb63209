package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// childEndClock is a fakeClock whose waits of a manager's poll interval
// last until their context ends, that is until the manager's child ends:
// the manager polls once at the start and once at the child's end.
type childEndClock struct{ *fakeClock }

func (c childEndClock) Sleep(ctx context.Context, d time.Duration) error {
	if d == DefaultManagerPollInterval || d == time.Second {
		<-ctx.Done()
		return ctx.Err()
	}
	return c.fakeClock.Sleep(ctx, d)
}

// tickClock is a fakeClock whose waits of one second (the tests' poll
// interval) end at the test's tick: the test decides when the manager
// polls.
type tickClock struct {
	*fakeClock
	ticks chan struct{}
}

func (c tickClock) Sleep(ctx context.Context, d time.Duration) error {
	if d != time.Second {
		return c.fakeClock.Sleep(ctx, d)
	}
	select {
	case <-c.ticks:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// managerRun runs parent, whose manager supervises child (child.dot
// beside it), with r, ticking r's clock while the run lasts.
func managerRun(t *testing.T, r *Runner, dir, parent, child string, goal string, ticks chan struct{}, ready func() bool) (*Result, string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "child.dot"), []byte(child), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := ParseDOTNamed(filepath.Join(dir, "p.dot"), []byte(parent))
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	done := make(chan *Result, 1)
	go func() {
		res, err := r.Run(context.Background(), g, RunConfig{RunDir: run, Goal: goal})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	deadline := time.After(2 * time.Minute)
	for {
		if ready == nil || ready() {
			select {
			case ticks <- struct{}{}:
			case res := <-done:
				return res, run
			case <-deadline:
				t.Fatal("the manager run did not end in 2 minutes")
			}
			continue
		}
		select {
		case res := <-done:
			return res, run
		case <-deadline:
			t.Fatal("the manager run did not end in 2 minutes")
		case <-time.After(time.Millisecond):
		}
	}
}

const gatedChild = `digraph child { start [shape=Mdiamond]; a; gate [shape=hexagon]; write; done [shape=Msquare];
	start -> a -> gate; gate -> write [label="ok"]; write -> done }`

// Attractor 4.11: while the child waits at its gate, the parent's context
// says it runs, where and how far; a stop condition on that cancels the
// child after its second stage (resumable there) and the stage succeeds.
func TestManagerStopConditionCancelsRunningChild(t *testing.T) {
	r, _, clk := scriptedRunner(nil)
	ticks := make(chan struct{})
	iv := NewQueueInterviewer()
	r.Clock, r.Interviewer = tickClock{clk, ticks}, iv
	parent := `digraph p { start [shape=Mdiamond]; boss [shape=house, stack.child_dotfile="child.dot", manager.poll_interval="1s",
		manager.stop_condition="context.stack.child.status=running && context.stack.child.active_stage=gate && context.stack.child.completed=2"];
		done [shape=Msquare]; start -> boss -> done }`
	res, run := managerRun(t, r, t.TempDir(), parent, gatedChild, "G", ticks, func() bool { return len(iv.Asked()) > 0 })
	if res.State != RunSuccess {
		t.Fatalf("%s: %s", res.State, res.FailureReason)
	}
	if n := res.Nodes["boss"].Notes; !strings.Contains(n, "stop condition satisfied after") {
		t.Errorf("boss notes %q", n)
	}
	for k, want := range map[string]any{KeyChildStatus: childStopped, KeyChildActive: "gate", KeyChildCompleted: 2.0} {
		if got := res.Context[k]; got != want {
			t.Errorf("parent context %s = %#v, want %#v", k, got, want)
		}
	}
	cp, err := LoadCheckpoint(filepath.Join(run, "boss", "cycle-1"))
	if err != nil {
		t.Fatal(err)
	}
	if cp.State != RunCanceled || cp.NextNode != "gate" {
		t.Errorf("child checkpoint %s, next %q; want canceled at gate", cp.State, cp.NextNode)
	}
}

// Steer: the manager writes steer.md into the child's active stage
// directory and the child's next agent stage has it in its preamble, once;
// a steer of a megabyte with terminal escapes is escaped and cut.
func TestManagerSteersChild(t *testing.T) {
	b := &fakeBackend{}
	ticks := make(chan struct{})
	iv := NewQueueInterviewer()
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	var mu sync.Mutex
	var cuts []string
	r := &Runner{Backend: b, Interviewer: iv, Clock: tickClock{clk, ticks}, OnEvent: func(ev Event) {
		if ev.Kind == EventWarning && strings.Contains(ev.Message, "steer of") {
			mu.Lock()
			cuts = append(cuts, ev.NodeID+": "+ev.Message)
			mu.Unlock()
		}
	}}
	parent := `digraph p { start [shape=Mdiamond]; boss [shape=house, stack.child_dotfile="child.dot", manager.poll_interval="1s",
		manager.actions="observe,wait,steer", manager.steer_cooldown=1000, manager.steer_prompt="Focus: $goal ` + strings.Repeat("x", 1<<20-100) + `"];
		done [shape=Msquare]; start -> boss -> done }`
	goal := "the tests\x1b[2J"
	// One steer (the cooldown outlasts the test): with one every poll, a
	// steer after the child's last agent stage read the first stays in
	// its context, and the check below would race the ticks.
	answered := false
	dir := t.TempDir()
	steerFile := filepath.Join(dir, "run", "boss", "cycle-1", "gate", SteerFile)
	res, run := managerRun(t, r, dir, parent, gatedChild, goal, ticks, func() bool {
		if len(iv.Asked()) == 0 {
			return false
		}
		// A tick at the gate steers; then the gate is passed.
		if _, err := os.Stat(steerFile); err == nil && !answered {
			answered = true
			iv.Push(Answer{Choice: "ok"})
		}
		return true
	})
	if res.State != RunSuccess {
		t.Fatalf("%s: %s", res.State, res.FailureReason)
	}
	steer, err := os.ReadFile(filepath.Join(run, "boss", "cycle-1", "gate", SteerFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(steer), `Focus: the tests\x1b[2J`) || strings.ContainsRune(string(steer), 0x1b) {
		t.Errorf("steer.md starts %q: want the escape written out", string(steer[:40]))
	}
	if len(steer) > maxSteerBytes+100 {
		t.Errorf("steer.md has %d bytes, past the cap %d", len(steer), maxSteerBytes)
	}
	mu.Lock()
	if len(cuts) == 0 || !strings.HasPrefix(cuts[0], "boss: ") || !strings.Contains(cuts[0], "cut to 16384") {
		t.Errorf("warnings of the cut steer: %q; want boss's saying it was cut to 16384 bytes", cuts)
	}
	mu.Unlock()
	var writes []AgentRunConfig
	for _, c := range b.calls {
		if c.NodeID == "write" {
			writes = append(writes, c)
		}
	}
	if len(writes) != 1 || !strings.Contains(writes[0].Preamble, `Focus: the tests\x1b[2J`) {
		t.Fatalf("write's agent runs %d, preamble %.80q: want the steer in it", len(writes), firstPreamble(writes))
	}
	cp, err := LoadCheckpoint(filepath.Join(run, "boss", "cycle-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cp.Context[KeySteer]; ok {
		t.Error("stack.steer is still in the child's context after its stage read it")
	}
}

func firstPreamble(c []AgentRunConfig) string {
	if len(c) == 0 {
		return ""
	}
	return c[0].Preamble
}

// A child that fails fails the manager stage (4.11), unless
// manager.max_child_runs allows another run.
func TestManagerChildFailure(t *testing.T) {
	child := `digraph child { start [shape=Mdiamond]; work; done [shape=Msquare]; start -> work -> done }`
	for _, tc := range []struct {
		runs  string
		state string
		calls int
	}{{"", RunFail, 1}, {"manager.max_child_runs=2, ", RunSuccess, 2}} {
		r, h, clk := scriptedRunner(map[string][]StageStatus{"work": {StatusFail, StatusSuccess}})
		r.Clock = childEndClock{clk}
		parent := `digraph p { start [shape=Mdiamond]; boss [shape=house, ` + tc.runs + `stack.child_dotfile="child.dot"]; done [shape=Msquare]; start -> boss -> done }`
		res, _ := managerRun(t, r, t.TempDir(), parent, child, "G", nil, func() bool { return false })
		if res.State != tc.state || h.calls["work"] != tc.calls {
			t.Errorf("%q: %s (%s), work ran %d times; want %s, %d", tc.runs, res.State, res.FailureReason, h.calls["work"], tc.state, tc.calls)
		}
		if tc.state == RunFail && !strings.Contains(res.FailureReason, "max_child_runs=1") {
			t.Errorf("failure %q does not name manager.max_child_runs", res.FailureReason)
		}
	}
}

// After manager.max_cycles polls the child still running is canceled and
// the stage fails, naming the key.
func TestManagerMaxCyclesCancelsChild(t *testing.T) {
	r, _, clk := scriptedRunner(nil)
	ticks := make(chan struct{})
	iv := NewQueueInterviewer()
	r.Clock, r.Interviewer = tickClock{clk, ticks}, iv
	parent := `digraph p { start [shape=Mdiamond]; boss [shape=house, stack.child_dotfile="child.dot", manager.poll_interval="1s", manager.max_cycles=3];
		done [shape=Msquare]; start -> boss -> done }`
	res, _ := managerRun(t, r, t.TempDir(), parent, gatedChild, "G", ticks, func() bool { return len(iv.Asked()) > 0 })
	if res.State != RunFail || !strings.Contains(res.FailureReason, "after 3 polls (manager.max_cycles)") {
		t.Fatalf("%s: %s", res.State, res.FailureReason)
	}
}

func TestManagerValidation(t *testing.T) {
	for _, tc := range []struct{ attrs, want string }{
		{`manager.max_cycles=3`, "warning:manager_loop:manager.max_cycles now counts observation polls"},
		{`stack.child_workdir="w"`, "warning:unknown_attribute:stack.child_workdir"},
		{`manager.stop_condition="context.stack.child.status=="`, "error:manager_loop:manager.stop_condition:"},
		{`manager.actions="observe,jump"`, `error:attr_value:"jump" is not one of observe, wait, steer`},
		{`manager.poll_interval="0s"`, `error:attr_value:manager.poll_interval="0s" must be longer than 0`},
		{`manager.poll_interval="0"`, `error:attr_value:manager.poll_interval="0" must be longer than 0`},
		{`manager.max_cycles=0`, `error:attr_value:manager.max_cycles=0 must be 1 or more`},
		{`manager.max_child_runs=0`, `error:attr_value:manager.max_child_runs=0 must be 1 or more`},
		{`manager.steer_cooldown=-1`, `error:attr_value:manager.steer_cooldown=-1 is negative`},
	} {
		g := mustParse(t, `digraph p { start [shape=Mdiamond]; boss [shape=house, stack.child_dotfile="c.dot", `+tc.attrs+`]; done [shape=Msquare]; start -> boss -> done }`)
		found := false
		for _, d := range Validate(g, ValidateOptions{}) {
			parts := strings.SplitN(tc.want, ":", 3)
			if string(d.Severity) == parts[0] && d.Rule == parts[1] && strings.Contains(d.Message, parts[2]) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no %s in %v", tc.attrs, tc.want, Validate(g, ValidateOptions{}))
		}
	}
}

// The handler refuses, naming the key, the settings validation refuses
// (an embedder may run the handler without validating): a poll interval of
// 0 would spend every poll at once and cancel the child.
func TestManagerZeroSettingsRefused(t *testing.T) {
	for _, tc := range []struct{ attrs, key string }{
		{`manager.poll_interval="0s"`, "manager.poll_interval"},
		{`manager.max_cycles=0`, "manager.max_cycles"},
		{`manager.max_child_runs=0`, "manager.max_child_runs"},
		{`manager.steer_cooldown=-2`, "manager.steer_cooldown"},
	} {
		g := mustParse(t, `digraph p { start [shape=Mdiamond]; boss [shape=house, stack.child_dotfile="c.dot", `+tc.attrs+`]; done [shape=Msquare]; start -> boss -> done }`)
		if _, err := newManager(&Execution{Graph: g}, g.Node("boss"), NewContext()); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v; want an error naming %s", tc.attrs, err, tc.key)
		}
	}
}

// A manager node visited twice in one loop runs its child again, in a
// directory of its own; the first visit's child stays as it ended.
func TestManagerRevisitRunsChildAgain(t *testing.T) {
	child := `digraph child { start [shape=Mdiamond]; work; done [shape=Msquare]; start -> work -> done }`
	parent := `digraph p { start [shape=Mdiamond]; boss [shape=house, stack.child_dotfile="child.dot"]; check; done [shape=Msquare];
		start -> boss -> check; check -> boss [condition="outcome=fail"]; check -> done [condition="outcome=success"] }`
	r, h, clk := scriptedRunner(map[string][]StageStatus{"check": {StatusFail, StatusSuccess}})
	r.Clock = childEndClock{clk}
	res, run := managerRun(t, r, t.TempDir(), parent, child, "G", nil, func() bool { return false })
	if res.State != RunSuccess || res.Nodes["boss"].Visits != 2 {
		t.Fatalf("%s (%s), boss visited %d times; want success after 2", res.State, res.FailureReason, res.Nodes["boss"].Visits)
	}
	if h.calls["work"] != 2 {
		t.Errorf("the child's work ran %d times in 2 visits of boss, want 2", h.calls["work"])
	}
	for _, d := range []string{filepath.Join(run, "boss", "cycle-1"), filepath.Join(run, "boss", "visit-2", "cycle-1")} {
		if cp, err := LoadCheckpoint(d); err != nil || cp.State != RunSuccess {
			t.Errorf("child run %s: %v; want a finished run", d, err)
		}
	}
}

// driveRun runs start while it ticks the clock whenever ready says the
// child waits; it returns the run's result.
func driveRun(t *testing.T, ticks chan struct{}, ready func() bool, start func() (*Result, error)) *Result {
	t.Helper()
	done := make(chan *Result, 1)
	go func() {
		res, err := start()
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	deadline := time.After(2 * time.Minute)
	for {
		var tick chan struct{}
		if ready() {
			tick = ticks
		}
		select {
		case tick <- struct{}{}:
		case res := <-done:
			return res
		case <-deadline:
			t.Fatal("the run did not end in 2 minutes")
		case <-time.After(time.Millisecond):
		}
	}
}

// The child's progress (stack.child.completed) and the manager's polls
// survive a kill of the parent in the child's run: a resumed parent sees
// the stages the child finished before, as a fresh run does, and counts
// manager.max_cycles on.
func TestManagerResumeKeepsChildProgress(t *testing.T) {
	const child = `digraph child { start [shape=Mdiamond]; a; b; gate [shape=hexagon]; write; done [shape=Msquare];
		start -> a -> b -> gate; gate -> write [label="ok"]; write -> done }`
	const parent = `digraph p { start [shape=Mdiamond]; boss [shape=house, stack.child_dotfile="child.dot", manager.poll_interval="1s", manager.max_cycles=50,
		manager.stop_condition="context.stack.child.active_stage=gate && context.stack.child.completed=3"]; done [shape=Msquare]; start -> boss -> done }`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "child.dot"), []byte(child), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "p.dot")
	g, err := ParseDOTNamed(path, []byte(parent))
	if err != nil {
		t.Fatal(err)
	}
	r, h, clk := scriptedRunner(nil)
	ticks := make(chan struct{})
	iv := NewQueueInterviewer()
	r.Clock, r.Interviewer = tickClock{clk, ticks}, iv
	cfg := RunConfig{RunDir: filepath.Join(dir, "run"), Source: []byte(parent), DotFile: path}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var killed atomic.Bool
	h.hook = func(node string) {
		if node == "b" {
			cancel()
			killed.Store(true)
		}
	}
	// The manager polls once as the child starts, before the kill.
	res := driveRun(t, ticks, func() bool { return false }, func() (*Result, error) { return r.Run(ctx, g, cfg) })
	if res.State != RunCanceled || !killed.Load() {
		t.Fatalf("first run %s (%s); want canceled at b", res.State, res.FailureReason)
	}
	before, err := loadPolls(filepath.Join(cfg.RunDir, "boss"))
	if err != nil || before < 1 {
		t.Fatalf("polls kept at the kill: %d, %v; want 1 or more", before, err)
	}
	h.hook = nil
	res = driveRun(t, ticks, func() bool { return len(iv.Asked()) > 0 }, func() (*Result, error) { return r.Resume(context.Background(), g, cfg) })
	if res.State != RunSuccess || !strings.Contains(res.Nodes["boss"].Notes, "stop condition satisfied") {
		t.Fatalf("resumed run %s (%s), boss %q; want the stop condition to hold at the gate", res.State, res.FailureReason, res.Nodes["boss"].Notes)
	}
	// A context value is an int, or a float64 once it went through JSON.
	if got := fmt.Sprint(res.Context[KeyChildCompleted]); got != "3" {
		t.Errorf("stack.child.completed = %s after the resume, want 3", got)
	}
	if got, _ := strconv.Atoi(fmt.Sprint(res.Context["boss.polls"])); got <= before {
		t.Errorf("boss.polls = %#v after the resume, want more than the %d polls before the kill", res.Context["boss.polls"], before)
	}
}

// A manager.json that is not the manager's (a directory, oversize,
// malformed, negative) fails the stage naming the file and what to do.
func TestManagerPollsFileHostile(t *testing.T) {
	for name, write := range map[string]func(string) error{
		"malformed": func(p string) error { return os.WriteFile(p, []byte("{\x1b[2J"), 0o644) },
		"negative":  func(p string) error { return os.WriteFile(p, []byte(`{"polls":-4}`), 0o644) },
		"oversize": func(p string) error {
			return os.WriteFile(p, []byte(`{"polls":1,"x":"`+strings.Repeat("x", 1<<20)+`"}`), 0o644)
		},
		"directory": func(p string) error { return os.Mkdir(p, 0o755) },
	} {
		dir := t.TempDir()
		if err := write(filepath.Join(dir, managerStateFile)); err != nil {
			t.Fatal(err)
		}
		_, err := loadPolls(dir)
		if err == nil || !strings.Contains(err.Error(), "delete it") || strings.ContainsRune(err.Error(), 0x1b) {
			t.Errorf("%s: %v; want an escaped error saying to delete the file", name, err)
		}
	}
	if n, err := loadPolls(t.TempDir()); n != 0 || err != nil {
		t.Errorf("no file: %d, %v; want 0", n, err)
	}
}
