package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

// stepExecutor is an Executor of a host that times and schedules stages
// itself: it runs parallel branches one after the other, in order, and
// ends a context made with a timeout at once, by cause only (Err is
// context.Canceled), as a timer of its own would.
type stepExecutor struct {
	fakeClock
	timeouts []time.Duration
	forEach  [][2]int // n, limit
}

func (e *stepExecutor) WithCancel(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}

func (e *stepExecutor) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	e.timeouts = append(e.timeouts, d)
	c, cancel := context.WithCancelCause(ctx)
	cancel(context.DeadlineExceeded)
	return c, func() {}
}

func (e *stepExecutor) ForEach(ctx context.Context, n, limit int, fn func(context.Context, int)) {
	e.forEach = append(e.forEach, [2]int{n, limit})
	for i := range n {
		fn(ctx, i)
	}
}

// A Runner whose Clock is an Executor makes its contexts and runs its
// branches through it: the gate's timeout and the tool nodes' are its
// (ended by cause, the gate takes its default and the tool node fails as
// timed out), the fan-out's branches run in its ForEach, and the run's id,
// manifest and checkpoint times are the config's and the clock's.
func TestExecutorSeam(t *testing.T) {
	src := `digraph p {
	  start [shape=Mdiamond]
	  gate [shape=hexagon, human.timeout="1h", human.default_choice="go"]
	  fan [shape=component, max_parallel=3]
	  a [shape=diamond]
	  b [shape=diamond]
	  join [shape=tripleoctagon]
	  tool [shape=parallelogram, tool=echo, tool_input="{\"id\": \"slow\"}", timeout="2m"]
	  done [shape=Msquare]
	  start -> gate
	  gate -> fan [label="go"]
	  gate -> done [label="stop"]
	  fan -> a -> join
	  fan -> b -> join
	  join -> tool -> done
	  tool -> done [condition="outcome=fail"]
	}`
	e := &stepExecutor{fakeClock: fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
	dir := filepath.Join(t.TempDir(), "run")
	r := &Runner{Clock: e, Interviewer: NewQueueInterviewer(), Tools: &fakeTools{delay: map[string]time.Duration{"slow": time.Hour}}}
	res, err := r.Run(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, RunID: "wf-1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"start", "gate", "fan", "join", "tool", "done"}; !reflect.DeepEqual(res.Path, want) {
		t.Fatalf("path %v, want %v (%s)", res.Path, want, res.FailureReason)
	}
	if want := []time.Duration{time.Hour, 2 * time.Minute}; !reflect.DeepEqual(e.timeouts, want) {
		t.Errorf("timeouts through the executor %v, want %v", e.timeouts, want)
	}
	if want := [][2]int{{2, 3}}; !reflect.DeepEqual(e.forEach, want) {
		t.Errorf("ForEach calls %v, want %v", e.forEach, want)
	}
	if got := res.Nodes["tool"].FailureReason; got != "tool node tool timed out after 2m0s (its timeout attribute)" {
		t.Errorf("tool node: %q", got)
	}
	man, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := LoadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.RunID != "wf-1" {
		t.Errorf("result RunID = %q, want wf-1", res.RunID)
	}
	if man.RunID != "wf-1" {
		t.Errorf("manifest RunID = %q, want wf-1", man.RunID)
	}
	if !man.StartedAt.Equal(e.now) {
		t.Errorf("manifest StartedAt = %s, want the executor's clock, %s", man.StartedAt, e.now)
	}
	if !cp.SavedAt.Equal(e.now) {
		t.Errorf("checkpoint SavedAt = %s, want the executor's clock, %s", cp.SavedAt, e.now)
	}
	if fmt.Sprint(res.Context["human.choice"]) != "go" {
		t.Errorf("gate: %v", res.Context["human.choice"])
	}
}

// Go's Executor runs every call, at most limit at once, and returns when
// all have returned.
func TestGoExecutorForEach(t *testing.T) {
	var mu sync.Mutex
	running, most, done := 0, 0, make([]bool, 6)
	goExecutor{realClock{}}.ForEach(context.Background(), len(done), 2, func(_ context.Context, i int) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		running--
		done[i] = true
		mu.Unlock()
	})
	if most != 2 || slices.Contains(done, false) {
		t.Errorf("at most %d at once (want 2), done %v", most, done)
	}
}
