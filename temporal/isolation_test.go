package temporal

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/host"
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
	w := NewWorker(c, queue, a)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
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
// (morph_instance_replaced, reason moved: mw_counter's count jumps by 1000),
// and the worker counts the session as replaced, as a local host counts a
// session that lost its instance; the next turn goes on on that instance.
// The workflow knows the session made calls of the middleware because it
// numbers them, across its continues-as-new (MaxTurns 1: one a turn). When
// the session comes back to the first worker, still running, the instance
// there missed the turns served elsewhere: it is released, and the turn
// runs on a fresh one, told so too.
func TestSessionMovedToAnotherWorker(t *testing.T) {
	c := dev(t)
	cfg := counterConfig(t, 4, "mw_counter", "")
	queue := "q-" + t.Name()
	id := fmt.Sprint("moved-", time.Now().UnixNano())
	limits := SessionLimits{MaxTurns: 1}
	first := newActivities(t, cfg)
	w := NewWorker(c, queue, first)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if res := sessionTurn(t, c, queue, id, limits, "one"); res.SystemPrompt != "calls: 1" {
		t.Fatalf("turn one: the middleware answered %q, want \"calls: 1\"", res.SystemPrompt)
	}
	w.Stop()
	second := newActivities(t, cfg)
	w = NewWorker(c, queue, second)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	for i, want := range []string{"calls: 1001", "calls: 1002"} {
		if res := sessionTurn(t, c, queue, id, limits, fmt.Sprint("turn ", i+2)); res.SystemPrompt != want {
			t.Errorf("turn %d, on the second worker: the middleware answered %q, want %q (told once that the session moved)", i+2, res.SystemPrompt, want)
		}
	}
	if st := counterSessions(t, second); st.Replaced != 1 || st.Open != 1 {
		t.Errorf("the second worker's plugin status: %+v; want the session open and counted replaced once", st)
	}
	if st := counterSessions(t, first); st.Replaced != 0 {
		t.Errorf("the first worker's plugin status: %+v; want none replaced", st)
	}
	w.Stop()
	w = NewWorker(c, queue, first)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if res := sessionTurn(t, c, queue, id, limits, "back"); res.SystemPrompt != "calls: 1001" {
		t.Errorf("turn 4, back on the first worker: the middleware answered %q, want \"calls: 1001\" (a fresh instance, told)", res.SystemPrompt)
	}
	if st := counterSessions(t, first); st.Replaced != 1 || st.Open != 1 {
		t.Errorf("the first worker's plugin status: %+v; want the session open and counted replaced once", st)
	}
}
