package host

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/abi"
)

// Payload sizes of the call-path benchmarks.
var benchSizes = []struct {
	name string
	n    int
}{{"100B", 100}, {"1KB", 1 << 10}, {"64KB", 64 << 10}, {"1MB", 1 << 20}}

// jsonPayload is a JSON object of exactly n bytes.
func jsonPayload(n int) []byte {
	const head, tail = `{"task":"`, `"}`
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// BenchmarkCall is morph's raw call path on a warm instance of the WAT echo guest.
func BenchmarkCall(b *testing.B) {
	p := load(b, newLoader(b), Config{Path: fixture(b, "echo"), Limits: Limits{MaxInputBytes: 2 << 20, MaxOutputBytes: 2 << 20}})
	ctx := context.Background()
	for _, s := range benchSizes {
		in := jsonPayload(s.n)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n))
			b.ReportAllocs()
			for b.Loop() {
				out, err := p.Call(ctx, abi.ExportBuildPrompt, in)
				if err != nil || len(out) != len(in) {
					b.Fatalf("%d bytes, %v", len(out), err)
				}
			}
		})
	}
}

// BenchmarkBareWazero is the same exchange written directly against wazero,
// with the same sandbox settings (close on context done, a deadline per call,
// cached function handles): the floor morph's call path is measured against.
func BenchmarkBareWazero(b *testing.B) {
	ctx := context.Background()
	wasm, err := os.ReadFile(fixture(b, "echo"))
	if err != nil {
		b.Fatal(err)
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true).WithMemoryLimitPages(64*16))
	defer r.Close(ctx)
	mod, err := r.Instantiate(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	alloc, fn := mod.ExportedFunction(abi.ExportAlloc), mod.ExportedFunction(abi.ExportBuildPrompt)
	stack := make([]uint64, 2)
	for _, s := range benchSizes {
		in := jsonPayload(s.n)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n))
			b.ReportAllocs()
			for b.Loop() {
				out, err := bareCall(ctx, mod, alloc, fn, stack, in)
				if err != nil || len(out) != len(in) {
					b.Fatalf("%d bytes, %v", len(out), err)
				}
			}
		})
	}
}

func bareCall(ctx context.Context, mod api.Module, alloc, fn api.Function, stack []uint64, in []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	stack[0] = uint64(len(in))
	if err := alloc.CallWithStack(ctx, stack); err != nil {
		return nil, err
	}
	ptr := uint32(stack[0])
	mod.Memory().Write(ptr, in)
	stack[0], stack[1] = uint64(ptr), uint64(len(in))
	if err := fn.CallWithStack(ctx, stack); err != nil {
		return nil, err
	}
	rptr, rlen, _ := abi.Unpack(stack[0])
	view, ok := mod.Memory().Read(rptr, rlen)
	if !ok {
		return nil, fmt.Errorf("out of range")
	}
	return append([]byte(nil), view...), nil
}

// BenchmarkColdStart loads a small module in a new loader whose disk cache
// already holds it: what a new process pays (compile from cache, instantiate,
// describe) before its first hook call.
func BenchmarkColdStart(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	path := fixture(b, "minimal")
	warm, _ := NewLoader(LoaderOptions{CacheDir: dir})
	p, err := warm.Load(ctx, Config{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	p.Close(ctx)
	warm.Close(ctx)
	b.ReportAllocs()
	for b.Loop() {
		l, err := NewLoader(LoaderOptions{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		p, err := l.Load(ctx, Config{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		p.Close(ctx)
		l.Close(ctx)
	}
}
