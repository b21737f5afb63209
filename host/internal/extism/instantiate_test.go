package extism

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/host/internal/sandbox"
	"github.com/morphhost/morph/host/internal/wasmbin"
	"github.com/morphhost/morph/host/internal/wasmrt"
	"github.com/morphhost/morph/internal/testenv"
)

// loadFixture loads guests/testdata/<name>.wasm as the host would, its
// export run a tool, with env's other fields; closed when the test ends.
func loadFixture(t *testing.T, name string, env guest.Env) (*Module, error) {
	t.Helper()
	wasm, err := os.ReadFile(testenv.Built(t, filepath.Join("..", "..", "..", "guests", "testdata", name+".wasm"), "fixtures"))
	if err != nil {
		t.Fatal(err)
	}
	shape, err := wasmbin.Check(wasm, wasmbin.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Grants{}, nil, slog.Default)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	env.Name, env.Source, env.Log, env.Closing, env.Sandbox = name, name+".wasm", slog.Default, context.Background(), sb
	env.Cache = wazero.NewCompilationCache()
	if env.Limits.MemoryMiB == 0 {
		env.Limits = guest.Limits{MemoryMiB: 16, MaxInputBytes: 1 << 20, MaxOutputBytes: 1 << 20, MaxJSONDepth: 64, MaxStackBytes: 1 << 20, MaxLinkedDepth: 64}
	}
	env.Tools = []guest.ExportTool{{Spec: abi.ToolSpec{Name: "run"}, Export: "run"}}
	m, _, err := Load(context.Background(), env, shape, wasm, func(linked *guest.LinkedModule, stack uint32) ([]byte, error) {
		if linked != nil {
			return interrupt.Instrument(linked.Wasm, wasmrt.InterruptPeriod, stack)
		}
		return interrupt.Instrument(wasm, wasmrt.InterruptPeriod, stack)
	})
	if err == nil {
		t.Cleanup(func() { m.Close(context.Background()) })
	}
	return m, err
}

// instantiateCtx makes an instance of m as the host does, within ctx, and
// closes it.
func instantiateCtx(ctx context.Context, m *Module) error {
	state := guest.NewCallState(slog.Default, 1<<10, context.Background())
	arena := &memory.Arena{}
	defer arena.Release()
	g, err := m.Instantiate(state.Begin(ctx, time.Now().Add(time.Hour)), state, arena)
	if err == nil {
		g.Close()
	}
	return err
}

// An instantiation that waits for the first instance's initialization
// (whose vars it may need) gives up when its caller does, while the first
// one spins on.
func TestInstantiateWaitCancel(t *testing.T) {
	m, err := loadFixture(t, "extism_initspin", guest.Env{Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	firstCtx, stopFirst := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- instantiateCtx(firstCtx, m) }()
	defer func() {
		stopFirst()
		select {
		case err := <-first:
			if err == nil {
				t.Error("the first instance's endless initialization succeeded")
			}
		case <-time.After(time.Minute):
			t.Error("the first instance's initialization did not stop at its caller's cancellation")
		}
	}()
	for deadline := time.Now().Add(time.Minute); len(m.first) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first instantiation did not start")
		}
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	second := make(chan error, 1)
	go func() { second <- instantiateCtx(canceled, m) }()
	select {
	case err := <-second:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("an instantiation with a canceled context, beside the first one: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("an instantiation with a canceled context waited for the first instance's initialization")
	}
}

// An empty log message (an active block whose length the guest set to 0)
// is logged and its block freed, as go-sdk does, not taken for an offset
// that is no block.
func TestLogEmptyBlock(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	k := newTestKernel(t, 1<<20, KernelOptions{})
	p := k.Alloc(8)
	k.put32(p-kernelHeader+4, 0) // the guest wrote over the block's length
	state := guest.NewCallState(func() *slog.Logger { return log }, 1<<10, context.Background())
	g := &instance{kernel: k, state: state}
	ctx := g.ctx(state.Begin(context.Background(), time.Now().Add(time.Hour)))
	fns := (&Module{}).envFunctions()
	i := slices.IndexFunc(fns, func(f envFunction) bool { return f.name == "log_info" })
	fns[i].fn(ctx, nil, []uint64{p})
	if strings.Contains(logs.String(), "not an Extism memory block") || !strings.Contains(logs.String(), "level=INFO") {
		t.Fatalf("log_info of an empty block logged %q; want an empty info line", logs.String())
	}
	if _, ok := k.Read(p); ok {
		t.Fatal("the logged block is still active; want it freed")
	}
}
