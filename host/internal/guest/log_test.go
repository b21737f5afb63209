package guest

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A line a guest never ends is logged at the end of each call's budget, not
// kept: kept, it grew by a call's budget per call of a pooled instance, and
// became one line of all of them.
func TestLogPartialLineBounded(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	const maxLogBytes = 1 << 10
	state := NewCallState(func() *slog.Logger { return log }, maxLogBytes, context.Background())
	for range 100 {
		state.Begin(context.Background(), time.Now().Add(time.Minute))
		if _, err := state.log.Write(bytes.Repeat([]byte("a"), 4<<10)); err != nil {
			t.Fatal(err)
		}
		if n := state.log.buf.Len(); n > maxLogBytes {
			t.Fatalf("a partial line of %d bytes is held; the budget is %d", n, maxLogBytes)
		}
	}
	for line := range strings.Lines(logs.String()) {
		if len(line) > maxLogBytes+200 {
			t.Fatalf("a log line of %d bytes; the budget is %d", len(line), maxLogBytes)
		}
	}
}
