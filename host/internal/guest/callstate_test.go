package guest

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// mapContext is a context whose type is not comparable: == on two of them panics.
type mapContext struct {
	context.Context
	m map[string]string
}

func TestBeginReusesContext(t *testing.T) {
	type key struct{}
	s := NewCallState(slog.Default, 100, context.Background())
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	defer cancel()
	deadline := time.Now().Add(time.Minute)
	first := s.Begin(parent, deadline)
	if StateOf(first) != s {
		t.Fatalf("the call's context does not carry its state")
	}
	if got := first.Value(key{}); got != "v" {
		t.Fatalf("the call's context has %v for its caller's value, want v", got)
	}
	if first.Done() != parent.Done() {
		t.Fatalf("the call's context does not end with its caller's")
	}
	if again := s.Begin(parent, deadline); again != first {
		t.Errorf("a call from the same context got a new one")
	}
	if n := testing.AllocsPerRun(100, func() { s.Begin(parent, deadline) }); n != 0 {
		t.Errorf("Begin from the same context allocates %v times", n)
	}
	other := s.Begin(context.Background(), deadline)
	if other == first {
		t.Errorf("a call from another context got the last one's")
	}
	if StateOf(other) != s {
		t.Errorf("a call from another context does not carry its state")
	}
	if got := other.Value(key{}); got != nil {
		t.Errorf("a call from another context has %v for the last caller's value, want none", got)
	}
	// Contexts that cannot be compared are never taken for the same.
	a, b := mapContext{parent, map[string]string{}}, mapContext{parent, map[string]string{}}
	if ca, cb := s.Begin(a, deadline), s.Begin(b, deadline); ca == cb || StateOf(cb) != s {
		t.Errorf("two contexts of a type that is not comparable were taken for the same")
	}
}
