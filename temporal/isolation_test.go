package temporal

import (
	"fmt"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/host"
)

// counterConfig is a morph.toml of the scripted model (a final per turn,
// turns of them) with mw_counter.wasm, a session-isolated middleware whose
// before_run answers "calls: N", N counting its instance's calls (1000
// more once it was told it replaces a lost one).
func counterConfig(t *testing.T, turns int) *config.Config {
	t.Helper()
	var replies []string
	for i := range turns {
		replies = append(replies, fmt.Sprintf(`{"type":"final","final":{"thought":"done","output":%d}}`, i))
	}
	cfg, err := config.Load(appendConfig(t, writeConfig(t, replies...),
		"\n[[plugins]]\nname = \"counter\"\npath = \""+plugin(t, "guests/testdata/mw_counter.wasm")+"\"\n"))
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

// Two durable sessions with a session-isolated middleware, their turns
// interleaved on one worker: each session's turns run on an instance of
// its own, which counts 1, 2, 3 for it alone, as on a local engine; no
// session is told it was replaced.
func TestSessionIsolationOnWorker(t *testing.T) {
	c := dev(t)
	const turns = 3
	a := newActivities(t, counterConfig(t, 2*turns))
	queue := "q-" + t.Name()
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
				t.Errorf("session %s, turn %d: the middleware answered %q, want %q (its own instance)", id, turn, res.SystemPrompt, want)
			}
		}
	}
	if st := counterSessions(t, a); st.Replaced != 0 || st.Open != len(ids) {
		t.Errorf("the worker's plugin status: %+v; want %d sessions open, none replaced", st, len(ids))
	}
}
