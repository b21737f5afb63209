package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// idTool records the call ID of each of its calls.
type idTool struct{ ids []string }

func (t *idTool) Name() string            { return "id" }
func (t *idTool) Description() string     { return "records its call IDs" }
func (t *idTool) ParameterSchema() string { return "" }
func (t *idTool) Execute(ctx context.Context, _ map[string]any) (string, error) {
	t.ids = append(t.ids, CallID(ctx))
	return "ok", nil
}

// Each tool call of a turn has an ID of its own, naming its session, turn
// and step; a session whose turns are numbered from 1 again (resumed by
// its ID) gives its calls other IDs; a caller's ID for Engine.CallTool is
// the tool's.
func TestCallID(t *testing.T) {
	tool := &idTool{}
	ctx := context.Background()
	if id := CallID(ctx); id != "" {
		t.Fatalf("CallID outside a call: %q", id)
	}
	turn := []string{toolCall("id", "{}"), toolCall("id", `{"n":2}`), finalReply("done")}
	m := script(append(append(turn, turn...), turn...)...)
	e := New(m, registry(tool))
	s := e.NewSession("s1")
	for range 2 {
		if _, _, err := s.RunTurn(ctx, "go", RunOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.ResumeSession("s1", nil).RunTurn(ctx, "go", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(tool.ids) != 6 {
		t.Fatalf("%d calls, want 6: %q", len(tool.ids), tool.ids)
	}
	seen := map[string]bool{}
	for i, id := range tool.ids {
		parts := strings.Split(id, "/")
		turn, step := []string{"1", "2", "1"}[i/2], []string{"1", "2"}[i%2]
		if seen[id] {
			t.Errorf("call %d: ID %q repeats an earlier call's", i+1, id)
		}
		seen[id] = true
		if len(parts) != 5 {
			t.Errorf("call %d: ID %q, want s1/<nonce>/%s/%s/1", i+1, id, turn, step)
		} else if want := "s1/" + parts[1] + "/" + turn + "/" + step + "/1"; id != want {
			t.Errorf("call %d: ID %q, want %q", i+1, id, want)
		}
	}
	if _, err := e.CallTool(WithCallID(ctx, "mine"), "s1", "id", map[string]any{}, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CallTool(ctx, "s1", "id", map[string]any{}, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	got := tool.ids[6:]
	if got[0] != "mine" {
		t.Errorf("the first CallTool's ID = %q, want the caller's, %q", got[0], "mine")
	}
	if !strings.HasPrefix(got[1], "s1/") {
		t.Errorf("the second CallTool's ID = %q, want one of its own in s1/", got[1])
	}
	if seen[got[1]] {
		t.Errorf("the second CallTool's ID = %q, which a turn's call had", got[1])
	}
}

// A durable executor's nonce (WithNonce) is the call IDs', so that a
// replay of the run gives its calls the IDs the first run did, and the ID
// of a session started without one: a replay's plugins in session
// isolation see the session the first run's did.
func TestNonce(t *testing.T) {
	tool := &idTool{}
	e := New(script(toolCall("id", "{}"), finalReply("done")), registry(tool), WithNonce(func() string { return "run-7" }))
	if _, _, err := e.NewSession("s1").RunTurn(context.Background(), "go", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(tool.ids) != 1 || tool.ids[0] != "s1/run-7/1/1/1" {
		t.Errorf("call IDs %q, want s1/run-7/1/1/1", tool.ids)
	}
}

func TestNonceNamesSessions(t *testing.T) {
	n := 0
	e := New(script(finalReply("done")), registry(), WithNonce(func() string { n++; return fmt.Sprint("run-7.", n) }))
	if a, b := e.NewSession("").ID(), e.NewSession("").ID(); a != "run-7.1" || b != "run-7.2" {
		t.Errorf("sessions started without an ID: %q and %q, want run-7.1 and run-7.2 (the nonce's)", a, b)
	}
	if id := e.NewSession("mine").ID(); id != "mine" {
		t.Errorf("a session given its ID: %q", id)
	}
	random := New(script(finalReply("done")), registry())
	if a, b := random.NewSession("").ID(), random.NewSession("").ID(); a == b || len(a) != 16 {
		t.Errorf("random session IDs %q and %q: want two different, of 16 characters", a, b)
	}
}
