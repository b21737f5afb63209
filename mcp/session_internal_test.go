package mcp

import (
	"context"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
)

// A session whose calls were canceled (Serve's ctx ended) before it made
// its first call runs that call canceled, too: a tools/call read between
// cancelCalls and the connection's close must not run until its
// deadline, holding the session's end (review finding 9).
func TestCancelCallsBeforeFirstCall(t *testing.T) {
	s, err := NewServer(context.Background(), engine.New(nil, engine.NewRegistry()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ss := new(sdk.ServerSession) // a key only: no call reaches the SDK
	s.cancelCalls(ss)
	_, ctx, done, err := s.begin(context.Background(), ss, "tool x")
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	select { // begin cancels the call's context from a goroutine
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Error("a first call begun after cancelCalls still runs 30 s later, want it canceled")
	}
	if err := s.end(context.Background(), ss); err != nil {
		t.Errorf("ending the session: %v", err)
	}
}
