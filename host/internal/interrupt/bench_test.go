package interrupt_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/internal/testenv"
)

// BenchmarkLoop is what stopping a guest at its deadline costs a tight loop (loops.wat's sum over 1e6
// iterations, a per-call deadline in the context): the original module with no way to stop it, the
// instrumented one (the host's budget, the check as the host writes it), and the original under wazero's
// WithCloseOnContextDone, which this package replaces.
func BenchmarkLoop(b *testing.B) {
	orig := wat(b, "loops")
	for _, bc := range []struct {
		name        string
		wasm        []byte
		closeOnDone bool
	}{
		{"original", orig, false},
		{"instrumented", instrument(b, orig, hostBudget), false},
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
	wasm := testenv.File(b, "../../../examples/rust-hooks/target/wasm32-unknown-unknown/release/rust_hooks.wasm", "rust")
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, err := interrupt.Instrument(wasm, hostBudget, hostStack); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckGap measures the time between two checks (the median, and the longest: max-gap-ns, which
// a busy machine inflates) when each hostile guest runs to a 50 ms deadline, with the host's budget: the
// time a deadline can be overrun by, and a garbage collection's stop-the-world wait. Besides TestHostileWork's guests: a loop over a straight line of
// arithmetic (the cheapest units) and a chain of loads that each miss the caches (the dearest: a load
// costs one unit and a trip to memory).
func BenchmarkCheckGap(b *testing.B) {
	guests := hostileGuests()
	const rotl = 0x77
	guests = append(guests, struct {
		name string
		wasm []byte
	}{"arithmetic", module(hostileTypes, sec(3, vec(u32(0))), sec(7, vec(export("run", 0))),
		sec(10, vec(body(cat([]byte{1, 1, typeI32, opLoop, 0x40}, repeat(5000, opLocalGet, 1, 0x41, 1, rotl, opLocalGet, 1, 0x73, opLocalSet, 1),
			[]byte{opBr, 0, opEnd, opEnd})...))))})
	const lines = 1 << 20 // 64 MiB of 64-byte lines, each holding the address of the next in a random cycle
	guests = append(guests, struct {
		name string
		wasm []byte
	}{"cache-missing loads", module(hostileTypes, sec(3, vec(u32(0))), sec(5, vec(limits(1024, 1024))), sec(7, vec(export("run", 0))),
		sec(10, vec(body(cat([]byte{1, 1, typeI32, opLoop, 0x40, opLocalGet, 1}, repeat(1000, 0x28, 2, 0), []byte{opLocalSet, 1, opBr, 0, opEnd, opEnd})...))))})
	for _, g := range guests {
		b.Run(g.name, func(b *testing.B) {
			r, c := newRuntime(b, wazero.NewRuntimeConfig())
			wasm, err := interrupt.Instrument(g.wasm, hostBudget, 0) // no stack budget, as TestHostileWork: the deep recursion would end on it
			if err != nil {
				b.Fatal(err)
			}
			mod := instantiate(b, r, wasm)
			if g.name == "cache-missing loads" {
				next := make([]byte, lines*64)
				perm := rand.Perm(lines)
				for i, l := range perm {
					binary.LittleEndian.PutUint32(next[l*64:], uint32(perm[(i+1)%lines]*64))
				}
				mod.Memory().Write(0, next)
			}
			var last time.Time
			var gaps []time.Duration
			c.hook = func() {
				now := time.Now()
				if !last.IsZero() {
					gaps = append(gaps, now.Sub(last))
				}
				last = now
			}
			for b.Loop() {
				last = time.Time{}
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				if _, err := mod.ExportedFunction("run").Call(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
					b.Fatal(err)
				}
				cancel()
			}
			slices.Sort(gaps)
			b.ReportMetric(float64(gaps[len(gaps)/2].Nanoseconds()), "median-gap-ns")
			b.ReportMetric(float64(gaps[len(gaps)-1].Nanoseconds()), "max-gap-ns")
		})
	}
}
