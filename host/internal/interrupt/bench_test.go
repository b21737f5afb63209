package interrupt_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/morphhost/morph/host/internal/interrupt"
)

// BenchmarkLoop is what stopping a guest at its deadline costs a tight loop (loops.wat's sum over 1e6
// iterations, a per-call deadline in the context): the original module with no way to stop it, the
// instrumented one (period 10,000, the check as the host will write it), and the original under wazero's
// WithCloseOnContextDone, which this package replaces.
func BenchmarkLoop(b *testing.B) {
	orig := wat(b, "loops")
	for _, bc := range []struct {
		name        string
		wasm        []byte
		closeOnDone bool
	}{
		{"original", orig, false},
		{"instrumented", instrument(b, orig, 10000), false},
		{"closeOnContextDone", orig, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r, _ := newRuntime(b, wazero.NewRuntimeConfig().WithCloseOnContextDone(bc.closeOnDone))
			sum := instantiate(b, r, bc.wasm).ExportedFunction("sum")
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				if _, err := sum.Call(ctx, 1e6); err != nil {
					b.Fatal(err)
				}
				cancel()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ns/iteration")
		})
	}
}

// BenchmarkInstrument is the load-time cost of the rewrite, on the Rust example plugin.
func BenchmarkInstrument(b *testing.B) {
	wasm, err := os.ReadFile("../../../examples/rust-hooks/target/wasm32-unknown-unknown/release/rust_hooks.wasm")
	if err != nil {
		b.Skip("rust_hooks.wasm missing: run `make rust` in the repository root")
	}
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, err := interrupt.Instrument(wasm, 10000); err != nil {
			b.Fatal(err)
		}
	}
}
