package temporal

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/pipeline"
)

// counterConfig is a morph.toml of the scripted model (a final per turn,
// turns of them) with the plugin "counter" of guests/testdata/<fixture>.wasm
// and the settings extra: mw_counter, a session-isolated middleware whose
// before_run answers "calls: N", N counting its instance's calls (1000
// more once it was told it replaces a lost one), or counter, whose
// build_prompt does.
func counterConfig(t *testing.T, turns int, fixture, extra string) *config.Config {
	t.Helper()
	var replies []string
	for i := range turns {
		replies = append(replies, fmt.Sprintf(`{"type":"final","final":{"thought":"done","output":%d}}`, i))
	}
	cfg, err := config.Load(appendConfig(t, writeConfig(t, replies...),
		"\n[[plugins]]\nname = \"counter\"\npath = \""+plugin(t, "guests/testdata/"+fixture+".wasm")+"\"\n"+extra))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// counterSessions are the counter plugin's sessions on a worker's
// activities.
func counterSessions(t *testing.T, a *Activities) host.SessionStatus {
	t.Helper()
	for _, p := range a.rt.Engine.Status().Plugins {
		if d, ok := p.Details.(*host.Details); ok && p.Name == "counter" && d.Sessions != nil {
			return *d.Sessions
		}
	}
	t.Fatal("the worker has no counter plugin in session isolation")
	return host.SessionStatus{}
}

// Two durable sessions with a session-isolated plugin, their turns
// interleaved on one worker: each session's turns run on an instance of
// its own, which counts 1, 2, 3 for it alone, as on a local engine; no
// session is told it was replaced. The plugin is a middleware (mw_counter,
// served in the Middleware activity), or an engine hook (counter's
// build_prompt, in the BuildPrompt activity).
func TestSessionIsolationOnWorker(t *testing.T) {
	for _, fixture := range []string{"mw_counter", "counter"} {
		t.Run(fixture, func(t *testing.T) { sessionsApartOnWorker(t, fixture) })
	}
}

// sessionsApartOnWorker is TestSessionIsolationOnWorker of a fixture.
func sessionsApartOnWorker(t *testing.T, fixture string) {
	c := dev(t)
	const turns = 3
	a := newActivities(t, counterConfig(t, 2*turns, fixture, "isolation = \"session\"\n"))
	queue := "q-" + strings.ReplaceAll(t.Name(), "/", "-")
	startOn(t, c, queue, a)
	ids := []string{fmt.Sprint("iso-a-", time.Now().UnixNano()), fmt.Sprint("iso-b-", time.Now().UnixNano())}
	for turn := 1; turn <= turns; turn++ {
		for _, id := range ids {
			res := sessionTurn(t, c, queue, id, SessionLimits{}, fmt.Sprint("turn ", turn))
			if want := fmt.Sprint("calls: ", turn); res.SystemPrompt != want {
				t.Errorf("session %s, turn %d: the plugin answered %q, want %q (its own instance)", id, turn, res.SystemPrompt, want)
			}
		}
	}
	if st := counterSessions(t, a); st.Replaced != 0 || st.Open != len(ids) {
		t.Errorf("the worker's plugin status: %+v; want %d sessions open, none replaced", st, len(ids))
	}
}

// A session whose turns move to a worker that has no instance of it (the
// worker that served its first turn stopped, another took its place): the
// new worker's plugin is told its state of the session is not here
// (morph_instance_replaced, reason moved: mw_counter's count jumps by 1000;
// counter, which does not export it, starts again at 1), and the worker
// counts the session as replaced, as a local host counts a session that
// lost its instance; the next turn goes on on that instance. The workflow
// knows the session made calls of the plugin because it numbers them, its
// middleware hooks (mw_counter) and its engine hooks (counter's
// build_prompt) alike, across its continues-as-new (MaxTurns 1: one a
// turn). When the session comes back to the first worker, still running,
// the instance there missed the turns served elsewhere: it is released,
// and the turn runs on a fresh one, told so too.
func TestSessionMovedToAnotherWorker(t *testing.T) {
	for _, c := range []struct {
		fixture, extra string
		told           int // what being told adds to the count
	}{{"mw_counter", "", 1000}, {"counter", "isolation = \"session\"\n", 0}} {
		t.Run(c.fixture, func(t *testing.T) { sessionMoves(t, c.fixture, c.extra, c.told) })
	}
}

// sessionMoves is TestSessionMovedToAnotherWorker of a fixture.
func sessionMoves(t *testing.T, fixture, extra string, told int) {
	c := dev(t)
	cfg := counterConfig(t, 4, fixture, extra)
	queue := "q-" + strings.ReplaceAll(t.Name(), "/", "-")
	id := fmt.Sprint("moved-", time.Now().UnixNano())
	limits := SessionLimits{MaxTurns: 1}
	calls := func(n int) string { return fmt.Sprint("calls: ", n) }
	first := newActivities(t, cfg)
	w := startOn(t, c, queue, first)
	if res := sessionTurn(t, c, queue, id, limits, "one"); res.SystemPrompt != calls(1) {
		t.Fatalf("turn one: the plugin answered %q, want %q", res.SystemPrompt, calls(1))
	}
	w.Stop()
	second := newActivities(t, cfg)
	w = startOn(t, c, queue, second)
	for i, want := range []string{calls(told + 1), calls(told + 2)} {
		if res := sessionTurn(t, c, queue, id, limits, fmt.Sprint("turn ", i+2)); res.SystemPrompt != want {
			t.Errorf("turn %d, on the second worker: the plugin answered %q, want %q (a fresh instance, told once that the session moved)", i+2, res.SystemPrompt, want)
		}
	}
	if st := counterSessions(t, second); st.Replaced != 1 || st.Open != 1 {
		t.Errorf("the second worker's plugin status: %+v; want the session open and counted replaced once", st)
	}
	if st := counterSessions(t, first); st.Replaced != 0 {
		t.Errorf("the first worker's plugin status: %+v; want none replaced", st)
	}
	w.Stop()
	startOn(t, c, queue, first)
	if res := sessionTurn(t, c, queue, id, limits, "back"); res.SystemPrompt != calls(told+1) {
		t.Errorf("turn 4, back on the first worker: the plugin answered %q, want %q (a fresh instance, told)", res.SystemPrompt, calls(told+1))
	}
	if st := counterSessions(t, first); st.Replaced != 1 || st.Open != 1 {
		t.Errorf("the first worker's plugin status: %+v; want the session open and counted replaced once", st)
	}
}

// startOn starts a worker of queue with a's activities, stopped at the
// test's end if it is not before (Stop twice does nothing more).
func startOn(t *testing.T, c client.Client, queue string, a *Activities) worker.Worker {
	t.Helper()
	w := NewWorker(c, queue, a)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// A session that ends in a workflow (30 turns without a session ID at once, a
// pipeline run's full-fidelity thread) ends on the workers too: neither of
// two workers keeps an instance of it, as a local engine's Session.Close
// releases its instances, rather than holding them for session_idle and
// counting them against max_sessions.
func TestSessionEndReachesWorkers(t *testing.T) {
	c := dev(t)
	cfg := counterConfig(t, 5, "mw_counter", "")
	queue := "q-" + t.Name()
	workers := []*Activities{newActivities(t, cfg), newActivities(t, cfg)}
	for _, a := range workers {
		startOn(t, c, queue, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// 30 turns at once, spread over both workers
	const turns = 30
	errs := make(chan error, turns)
	for i := range turns {
		go func() {
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, TurnWorkflow, TurnInput{Task: fmt.Sprint("turn ", i)})
			var res TurnResult
			if err == nil {
				err = run.Get(ctx, &res)
			}
			if err == nil && res.SystemPrompt != "calls: 1" { // each turn its own session, on an instance of its own
				err = fmt.Errorf("the middleware answered %q, want \"calls: 1\"", res.SystemPrompt)
			}
			if err != nil {
				err = fmt.Errorf("turn %d: %w", i, err)
			}
			errs <- err
		}()
	}
	for range turns {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// a pipeline whose two stages are turns of one full-fidelity thread
	src := `digraph ends {
	  start [shape=Mdiamond]
	  a     [prompt="one", fidelity="full", thread_id="th"]
	  b     [prompt="two", fidelity="full", thread_id="th"]
	  done  [shape=Msquare]
	  start -> a -> b -> done
	}`
	if got := pipelineResult(t, startPipeline(t, c, queue, src, PipelineInput{})); got.Result == nil || got.Result.State != pipeline.RunSuccess {
		t.Fatalf("the pipeline: %+v", got)
	}
	for i, a := range workers {
		if st := counterSessions(t, a); st.Open != 0 || st.Replaced != 0 {
			t.Errorf("worker %d's plugin status after the turns and the pipeline ended: %+v; want no session open, none replaced", i, st)
		}
	}
}

// Many sessions move at once: 50 sessions, each with a turn on a worker
// that then stops, take their next turns at the same moment on another
// worker; every one is told it moved (its count jumps by 1000) on an
// instance of its own, and the worker counts each replaced once.
func TestManySessionsMoved(t *testing.T) {
	const sessions = 50
	c := dev(t)
	cfg := counterConfig(t, 2, "mw_counter", "")
	queue := "q-" + t.Name()
	prefix := fmt.Sprint("many-", time.Now().UnixNano(), "-")
	turns := func(task, want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		errs := make(chan error, sessions)
		for i := range sessions {
			go func() {
				id := fmt.Sprint(prefix, i)
				h, err := StartTurn(ctx, c, queue, id, SessionLimits{}, SessionTurn{Task: task})
				var res TurnResult
				if err == nil {
					err = h.Get(ctx, &res)
				}
				if err == nil && res.SystemPrompt != want {
					err = fmt.Errorf("the middleware answered %q, want %q", res.SystemPrompt, want)
				}
				if err != nil {
					err = fmt.Errorf("session %s, %s: %w", id, task, err)
				}
				errs <- err
			}()
		}
		for range sessions {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	}
	w := startOn(t, c, queue, newActivities(t, cfg))
	turns("one", "calls: 1")
	w.Stop()
	second := newActivities(t, cfg)
	startOn(t, c, queue, second)
	turns("two", "calls: 1001")
	if st := counterSessions(t, second); st.Replaced != sessions || st.Open != sessions {
		t.Errorf("the second worker's plugin status: %+v; want %d sessions open, each counted replaced once", st, sessions)
	}
}

// A pipeline's full-fidelity thread goes on in its session across the
// workflow's continues-as-new (its session named by the workflow, its
// counts carried in the state): the worker's instance of it serves both
// stages and is destroyed once, when the run ends, not once a run.
func TestPipelineThreadAcrossContinueAsNew(t *testing.T) {
	c := dev(t)
	ctx := context.Background()
	logs := &testenv.Buffer{}
	a, err := NewActivities(ctx, counterConfig(t, 2, "mw_counter", ""), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(ctx) })
	queue := "q-" + t.Name()
	startOn(t, c, queue, a)
	src := `digraph thread {
	  start [shape=Mdiamond]
	  a     [prompt="one", fidelity="full", thread_id="th"]
	  b     [prompt="two", fidelity="full", thread_id="th"]
	  done  [shape=Msquare]
	  start -> a -> b -> done
	}`
	run := startPipeline(t, c, queue, src, PipelineInput{ContinueAfter: 2})
	if got := pipelineResult(t, run); got.Result == nil || got.Result.State != pipeline.RunSuccess {
		t.Fatalf("the pipeline: %+v", got)
	}
	q, err := c.QueryWorkflow(ctx, run.GetID(), "", QueryPipelineProgress)
	var p PipelineProgress
	if err != nil {
		t.Fatalf("query progress: %v", err)
	}
	if err := q.Get(&p); err != nil {
		t.Fatalf("progress: %v", err)
	}
	if p.Run == 0 {
		t.Fatalf("the run did not continue as new (run %d): the test tries nothing", p.Run)
	}
	if n := strings.Count(logs.String(), "mw_counter: instance destroyed"); n != 1 {
		t.Errorf("%d instances of the plugin destroyed, want 1: the thread's, at the run's end\n%s", n, logs.String())
	}
	if st := counterSessions(t, a); st.Open != 0 || st.Replaced != 0 {
		t.Errorf("the worker's plugin status: %+v; want no session open, none replaced", st)
	}
}
