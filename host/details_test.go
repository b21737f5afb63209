package host

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/morphhost/morph/engine"
)

// The engine's Status reports a session plugin's memory as it is when read:
// one idle instance per live session, each holding some resident pages of
// the address space it reserves, and reading it while sessions call the
// plugin is safe (go test -race).
func TestStatusMemory(t *testing.T) {
	const sessions = 5
	ext := newLoader(t).Extender(Config{Name: "counter", Path: fixture(t, "counter"), Isolation: IsolationSession}, engine.MiddlewareConfig{})
	e := engine.New(finalModel{}, nil, engine.WithExtenders(ext))
	defer e.Close(context.Background())
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	memory := func() MemoryStatus {
		t.Helper()
		st := e.Status()
		d, ok := st.Plugins[0].Details.(*Details)
		if !ok || d.Memory == nil {
			t.Fatalf("details %#v: no memory", st.Plugins[0].Details)
		}
		return *d.Memory
	}
	for i := range sessions {
		turn(t, e.NewSession("s"+strconv.Itoa(i)))
	}
	m := memory()
	checkCount(t, "Instances (idle, one per session)", m.Instances, sessions)
	checkCount(t, "Reserved (64 MiB an instance)", m.Reserved, sessions*64<<20)
	if m.Resident == 0 {
		t.Errorf("Resident = 0 of %d reserved, want some of it", m.Reserved)
	}
	if m.Resident > m.Reserved {
		t.Errorf("Resident = %d, more than Reserved, %d", m.Resident, m.Reserved)
	}

	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() { // not turn: t.Fatal belongs to the test's goroutine
			if _, _, err := e.NewSession("more"+strconv.Itoa(i)).RunTurn(context.Background(), "t", engine.RunOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	for range 20 {
		if m := memory(); m.Resident > m.Reserved {
			t.Errorf("memory %+v while sessions call: more resident than reserved", m)
		}
	}
	wg.Wait()
	if m := memory(); m.Instances != 2*sessions {
		t.Fatalf("memory %+v: want %d idle instances", m, 2*sessions)
	}
}
