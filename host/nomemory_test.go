package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/memory"
)

// hangLimit bounds what must not hang (issue 28: Load waited forever): far
// past what a loaded machine takes, far short of the test binary's timeout.
const hangLimit = 2 * time.Minute

// within runs f, failing the test if it has not returned within hangLimit.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(hangLimit):
		t.Fatalf("%s: still running after %s (hung)", what, hangLimit)
	}
}

// An Extism plugin without a memory (js-sdk's loop-forever.wasm) loads and
// answers, with snapshots and without: wazero's typed-nil Memory() made
// issue 28's loader panic while instantiating it, and Load hang.
func TestExtismNoMemory(t *testing.T) {
	l := newLoader(t)
	for _, noSnapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSnapshot=%v", noSnapshot), func(t *testing.T) {
			cfg := Config{Path: fixture(t, "extism_nomemory"), NoSnapshot: noSnapshot,
				Tools: []ExportTool{{Export: "answer"}, {Export: "loop"}}, Limits: Limits{Timeout: time.Second}}
			var p *Plugin
			var err error
			within(t, "Load", func() { p, err = l.Load(context.Background(), cfg) })
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			defer p.Close(context.Background())
			if p.Loader() != LoaderExtism {
				t.Fatalf("Loader = %s, want %s", p.Loader(), LoaderExtism)
			}
			// With snapshots on, one of no memory was taken: its image is
			// where issue 28's loader panicked.
			if st := p.Memory(); (st.NoSnapshot == "") == noSnapshot {
				t.Fatalf("memory %+v: want a snapshot exactly when NoSnapshot is false", st)
			}
			for range 2 { // the second on describe's instance, or a fresh one
				if out, err := callTool(t, p, "answer", nil); err != nil || out != "" {
					t.Fatalf("answer: %q, %v; want no output", out, err)
				}
			}
			if _, err := callTool(t, p, "loop", nil); !errors.Is(err, ErrTimeout) {
				t.Fatalf("loop: %v, want ErrTimeout", err)
			}
			if out, err := callTool(t, p, "answer", nil); err != nil || out != "" {
				t.Fatalf("answer after the timeout: %q, %v; want no output", out, err)
			}
		})
	}
}

// Linked modules without a memory, one with a start function, are linked
// to a main module without one: each instance has its own, started.
func TestExtismLinkedNoMemory(t *testing.T) {
	l := newLoader(t)
	for _, lib := range []string{"extism_libnomem", "extism_libstart"} {
		t.Run(lib, func(t *testing.T) {
			cfg := Config{Path: fixture(t, "extism_sevenmain"), Tools: []ExportTool{{Export: "run"}},
				Modules: []LinkedModule{{Name: "lib", Path: fixture(t, lib)}}, Isolation: IsolationCall}
			var p *Plugin
			var err error
			within(t, "Load", func() { p, err = l.Load(context.Background(), cfg) })
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			defer p.Close(context.Background())
			for i := range 2 { // call isolation: each on a fresh instance
				if out, err := callTool(t, p, "run", nil); err != nil || out != "" {
					t.Fatalf("run %d: %q, %v; want 0 (lib.seven answered 7)", i, out, err)
				}
			}
		})
	}
}

// The native ABI refuses a module without a memory at load, naming it.
func TestNoMemoryRefused(t *testing.T) {
	var err error
	within(t, "Load", func() { _, err = newLoader(t).Load(context.Background(), Config{Path: fixture(t, "nomemory")}) })
	checkErr(t, "Load", err, ErrABIMismatch, "missing export memory")
}

// panicking is a module whose instantiation panics, as a morph bug would.
type panicking struct{ guest.Module }

func (panicking) Instantiate(context.Context, *guest.CallState, *memory.Arena) (guest.Instance, error) {
	panic("a morph bug")
}

// A Go panic while instantiating fails the call with ErrTrap, and gives its
// instance slot back: issue 28's panic left it taken, so that the next call
// and Close waited for it forever.
func TestInstantiatePanic(t *testing.T) {
	l, logs := newLoggedLoader(t)
	p := load(t, l, Config{Path: fixture(t, "echo"), Isolation: IsolationCall, Limits: Limits{MaxInstances: 1}})
	p.module = panicking{p.module}
	for i := range 3 { // one slot: a slot kept by the first would hang the second
		var err error
		within(t, "Call", func() { _, err = p.Call(context.Background(), abi.ExportBuildPrompt, []byte(`{}`)) })
		checkErr(t, fmt.Sprintf("call %d", i), err, ErrTrap, "host panic while instantiating", "a morph bug")
	}
	if !strings.Contains(logs.String(), "host panic while instantiating") || !strings.Contains(logs.String(), "goroutine") {
		t.Errorf("the log does not have the panic and its stack:\n%s", logs)
	}
	within(t, "Close", func() {
		if err := p.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}
