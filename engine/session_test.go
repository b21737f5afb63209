package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/morphhost/morph/abi"
)

// sessionEnds is a middleware that keeps the ids of the sessions it is told
// ended, and warns (Warn) from its on_turn_start.
type sessionEnds struct {
	mu    sync.Mutex
	ended []string
	warn  bool
}

func (*sessionEnds) Name() string { return "ends" }

func (m *sessionEnds) OnSessionEnd(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended = append(m.ended, id)
	return nil
}

func (m *sessionEnds) OnTurnStart(ctx context.Context, _ abi.TurnStart) error {
	if m.warn && !Warn(ctx, "ends", "the host noticed something") {
		return errors.New("Warn found no run")
	}
	return nil
}

func (m *sessionEnds) got() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.ended)
}

// Close tells each SessionEndHook middleware once, whether or not the
// middleware is otherwise in use; a closed session runs no turn; Run closes
// the session it makes.
func TestSessionClose(t *testing.T) {
	ctx := context.Background()
	mw := &sessionEnds{}
	e := New(script(finalReply("a"), finalReply("b")), nil, WithMiddleware(mw))
	s := e.NewSession("s1")
	if err := s.Close(ctx); err != nil || len(mw.got()) != 0 {
		t.Fatalf("Close before the engine initialized: %v, told %v; want no one told (nothing holds the session)", err, mw.got())
	}
	s = e.NewSession("s2")
	if _, _, err := s.RunTurn(ctx, "t", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil || !slices.Equal(mw.got(), []string{"s2"}) {
		t.Fatalf("Close: %v, told %v", err, mw.got())
	}
	if err := s.Close(ctx); err != nil || len(mw.got()) != 1 {
		t.Fatalf("a second Close: %v, told %v; want nothing more", err, mw.got())
	}
	final, rc, err := s.RunTurn(ctx, "t", RunOptions{})
	if !errors.Is(err, ErrSessionClosed) {
		t.Errorf("a turn of a closed session: err = %v, want ErrSessionClosed", err)
	}
	if final != nil {
		t.Errorf("a turn of a closed session: final = %+v, want none", final)
	}
	if rc == nil {
		t.Fatal("a turn of a closed session: no run context")
	}
	if rc.SessionID != "s2" {
		t.Errorf("a turn of a closed session: SessionID = %q, want s2", rc.SessionID)
	}
	_, rc, err = e.Run(ctx, "t", RunOptions{})
	if err != nil || !slices.Equal(mw.got(), []string{"s2", rc.SessionID}) {
		t.Fatalf("Run: %v, told %v; want its session (%s) closed", err, mw.got(), rc.SessionID)
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.NewSession("s3").Close(ctx); err != nil || len(mw.got()) != 2 {
		t.Fatalf("Close on a closed engine: %v, told %v; want no one told", err, mw.got())
	}
}

// Warn, from a hook, is a warning event of the hook's run, naming the
// plugin and the session; outside a run it reports false.
func TestWarn(t *testing.T) {
	var events []Event
	e := New(script(finalReply("a")), nil, WithMiddleware(&sessionEnds{warn: true}), WithEventHandler(func(ev Event) {
		if ev.Kind == EventWarning {
			events = append(events, ev)
		}
	}))
	if _, _, err := e.NewSession("s1").RunTurn(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 {
		t.Fatalf("warnings %+v, want one", events)
	}
	checkFields(t, "the warning", eq("Plugin", events[0].Plugin, "ends"), eq("SessionID", events[0].SessionID, "s1"),
		eq("Message", events[0].Message, "the host noticed something"))
	if Warn(context.Background(), "ends", "x") {
		t.Fatal("Warn outside a run reported an event")
	}
}

// WithSession makes a context a host outside the run serves the run's
// calls on: RunContext answers the session and turn, nothing else of a
// run, and Warn, having no run to report to, leaves it to the caller.
func TestWithSession(t *testing.T) {
	ctx := WithSession(context.Background(), "s1", 3)
	rc := RunContext(ctx)
	if rc == nil {
		t.Fatal("RunContext = nil, want session s1, turn 3")
	}
	checkFields(t, "RunContext", eq("SessionID", rc.SessionID, "s1"), eq("Turn", rc.Turn, 3), eq("Task", rc.Task, ""))
	if Warn(ctx, "p", "m") {
		t.Error("Warn on WithSession's context reported to a run")
	}
}
