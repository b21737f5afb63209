package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// A Temporal workflow numbers a session's calls of a plugin when it makes
// them (sessionCalls.of): a call the plugin refuses before it reaches an
// instance (input over max_input_bytes, no free instance in time) is
// counted here too (noteCall), so that the session's next call, on the
// same worker, is not taken for moved, its live instance released.
func TestRefusedCallIsNotAMove(t *testing.T) {
	p, _, logs := counterSessions(t, Limits{MaxInputBytes: 512})
	of := func(n int) context.Context {
		return WithSessionCalls(engine.WithSession(context.Background(), "s", 2), map[string]int{p.Name(): n})
	}
	if got, err := beforeRun(of(0), p); err != nil || got != "calls: 1" {
		t.Fatalf("call 1: %q, %v", got, err)
	}
	// call 2 (count 1): its input is over the limit, refused before get
	big := abi.BeforeRunInput{SessionID: "s", Turn: 1, SystemPrompt: strings.Repeat("x", 1024)}
	if _, err := invoke[abi.BeforeRunOutput](of(1), p, abi.ExportBeforeRun, big); err == nil {
		t.Fatal("want the oversized call refused")
	}
	// call 3 (count 2), same worker, same session: nothing moved
	if got, err := beforeRun(of(2), p); err != nil || got != "calls: 2" {
		t.Fatalf("call 3: %q, %v; want calls: 2 on the session's own instance (logs:\n%s)", got, err, logs.String())
	}
}

// The memory of expired sessions is bounded (the last MaxSessions): a
// session forgotten so is counted (Forgotten) and logged as it is
// forgotten, since if it calls again its fresh instance is not told.
func TestExpiredSessionForgottenIsLoud(t *testing.T) {
	p, e, logs := counterSessions(t, Limits{SessionIdle: time.Minute, MaxSessions: 2})
	clock := installClock(p)
	a := e.NewSession("a")
	turn(t, a)
	clock.add(2 * time.Minute) // a expires
	for _, id := range []string{"b", "c"} {
		turn(t, e.NewSession(id))
		clock.add(2 * time.Minute) // each expires in turn
	}
	if got := turn(t, e.NewSession("b")); got != "calls: 1001" {
		t.Errorf("b after expiring: %q, want its fresh instance told (calls: 1001)", got)
	}
	if got := turn(t, a); got != "calls: 1" {
		t.Errorf("a, forgotten: %q, want a fresh instance, untold (calls: 1)", got)
	}
	if st := p.Stats(); st.Forgotten != 1 || st.Replaced != 1 {
		t.Errorf("stats %+v: want one forgotten (a), one replaced (b)", st)
	}
	if ss, _ := p.Sessions(); ss.Forgotten != 1 {
		t.Errorf("sessions %+v: want forgotten 1", ss)
	}
	if !strings.Contains(logs.String(), "plugin forgot an expired session") || !strings.Contains(logs.String(), "session=a") {
		t.Errorf("no warning of the forgotten session in the logs:\n%s", logs.String())
	}
}
