package host

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
)

// newSlots is n slots over a plugin's shards, all free.
func newSlots(n int) *slots {
	s := &slots{shards: &shards{}, free: n}
	s.shards.init()
	return s
}

// kept is every slot no one holds: the free ones and those the shards keep.
func (s *slots) kept() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.free
	s.shards.each(func(sh *shard) bool { n += sh.slots; return true }, s.shards.all...)
	return n
}

// The slots bound what runs at once however the takers' cores and waits
// interleave, and none is lost: not by a taker whose ctx ends while it
// waits, even one handed a slot as it gives up.
func TestSlotsBound(t *testing.T) {
	const n, takers, rounds = 3, 16, 500
	s := newSlots(n)
	var held, most, gaveUp atomic.Int32
	var wg sync.WaitGroup
	for i := range takers {
		wg.Go(func() {
			for j := range rounds {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if (i+j)%4 == 0 { // some give up while waiting
					ctx, cancel = context.WithTimeout(ctx, time.Duration(j%50)*time.Microsecond)
				}
				sh := s.shards.local()
				if err := s.take(ctx, sh, nil); err != nil {
					cancel()
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("take: %v", err)
					}
					gaveUp.Add(1)
					continue
				}
				cancel()
				now := held.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				runtime.Gosched() // holds it a while: others wait
				held.Add(-1)
				s.give(sh)
			}
		})
	}
	wg.Wait()
	if got := most.Load(); got > n {
		t.Errorf("%d held at most, want at most %d", got, n)
	}
	checkCount(t, "slots kept", s.kept(), n)
	checkCount(t, "waiters", len(s.waiters), 0)
	if got := s.waiting.Load(); got != 0 {
		t.Errorf("waiting = %d, want 0", got)
	}
	t.Logf("%d takes gave up waiting", gaveUp.Load())
}

// A taker waits for a slot until one is given back, its ctx ends or the
// plugin closes; those that wait are served in turn.
func TestSlotsWait(t *testing.T) {
	s := newSlots(1)
	sh := s.shards.all[0]
	if err := s.take(context.Background(), sh, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.take(ctx, sh, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("take with all slots held: %v, want the deadline", err)
	}
	closing := make(chan struct{})
	closed := make(chan error)
	go func() {
		closed <- s.take(context.Background(), sh, closing)
	}()
	other := s.shards.all[len(s.shards.all)-1] // a call on another core, where it may be
	served := make(chan error)
	go func() {
		for s.waiting.Load() != 1 { // the closing taker waits first
			time.Sleep(time.Millisecond)
		}
		served <- s.take(context.Background(), other, nil)
	}()
	for s.waiting.Load() != 2 {
		time.Sleep(time.Millisecond)
	}
	close(closing)
	if err := <-closed; !errors.Is(err, ErrClosed) {
		t.Fatalf("take while closing: %v, want ErrClosed", err)
	}
	s.give(sh)
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	s.give(other)
	if s.kept() != 1 {
		t.Fatalf("%d slots kept, want 1", s.kept())
	}
}

// Pooled calls from many goroutines at once keep the instance bound; every
// instance is accounted for, idle on some core's shard once the calls end
// (Memory counts it, IdleMemory reports one), and Close takes them all.
// Memory and IdleMemory look at the shards while the calls take and give
// back instances there (run with -race).
func TestPooledAcrossCores(t *testing.T) {
	const instances, callers, calls = 3, 8, 200
	p := load(t, newLoader(t), Config{Path: fixture(t, "echo"), Isolation: IsolationPooled,
		Limits: Limits{MaxInstances: instances}})
	ctx := context.Background()
	in := jsonPayload(100)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range calls {
				if out, err := p.Call(ctx, abi.ExportBuildPrompt, in); err != nil || len(out) == 0 {
					t.Errorf("%d bytes, %v", len(out), err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range calls {
			p.IdleMemory()
			p.Memory()
		}
	}()
	wg.Wait()
	<-done
	st := p.Stats()
	idle := p.Memory().Instances
	checkCount(t, "Calls (describe's too)", st.Calls, callers*calls+1)
	if st.Instantiated > instances {
		t.Errorf("Instantiated = %d, want at most %d", st.Instantiated, instances)
	}
	checkCount(t, "idle instances (all those not discarded)", uint64(idle), st.Instantiated-st.Discarded)
	if _, ok := p.IdleMemory(); !ok {
		t.Fatal("IdleMemory: no idle instance")
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := p.Memory().Instances; n != 0 {
		t.Fatalf("%d idle instances after Close", n)
	}
	if _, err := p.Call(ctx, abi.ExportBuildPrompt, in); !errors.Is(err, ErrClosed) {
		t.Fatalf("a call after Close: %v, want ErrClosed", err)
	}
}

// CallDestroy's call has the plugin's timeout from when it has an
// instance, not from before it waited for one: waiting for the only slot
// longer than the timeout does not leave it a deadline already passed.
func TestCallDestroyDeadlineAfterWait(t *testing.T) {
	const timeout = time.Second
	g := guestModule{imports: []guestImport{importPollOneoff}}
	g.destroy = g.sleepFor(time.Millisecond) // a sleep past its call's deadline ends the call
	p := load(t, newLoader(t), Config{Name: "destroyer", Wasm: g.wasm(), Limits: Limits{MaxInstances: 1, Timeout: timeout}})
	sh := p.shards.local()
	if err := p.slots.take(context.Background(), sh, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := p.CallDestroy(context.Background())
		done <- err
	}()
	for p.slots.waiting.Load() == 0 { // CallDestroy waits for the slot
		time.Sleep(time.Millisecond)
	}
	time.Sleep(timeout + 100*time.Millisecond)
	p.slots.give(sh)
	if err := <-done; err != nil {
		t.Fatalf("CallDestroy after waiting for an instance: %v", err)
	}
}
