package wasmrt

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/interrupt"
)

// InterruptPeriod is the budget of work, in units of about one WebAssembly
// instruction, that a guest runs between two calls to CheckInterrupt
// (interrupt.Instrument's budget). Each call costs one exit to Go (about as
// much as 50 iterations of a tight loop), and between two of them neither a
// deadline nor the Go garbage collector can stop the guest: typically 10 to
// 30 microseconds, at worst (a chain of loads that all miss the caches) about
// 20 ms, plus one bulk memory instruction (at most the memory cap: about 5 ms
// for 64 MiB). See BENCHMARKS.md, Deadlines.
const InterruptPeriod = 100_000

// CheckInterrupt is the import interrupt.Instrument gives the guest, called
// whenever the guest has spent InterruptPeriod units of work. Its panic ends
// the call with an error that wraps the cause (the host tells a deadline
// from a closed plugin); the instance is then discarded as after any fault.
func CheckInterrupt(ctx context.Context, _ api.Module, _ []uint64) {
	if err := ctx.Err(); err != nil {
		panic(err)
	}
	if s := guest.StateOf(ctx); s != nil {
		if err := s.Expired(); err != nil {
			panic(err)
		}
	}
}

// StackLimitError (host.StackLimitError) ends a call whose guest would have taken its call stack
// past the plugin's Limits.MaxStackBytes (a deep or unbounded recursion):
// the call fails with guest.ErrTrap, wrapping it. wazero keeps a call's stack
// outside the linear memory, in a buffer it doubles up to about 100 MB, so
// the host bounds it by instrumentation (package interrupt), with an upper
// estimate of every frame: real frames are often ten times smaller. Both
// loaders' modules are instrumented; an Extism plugin's linked modules
// share the budget evenly with its main module.
type StackLimitError struct {
	Limit int // the plugin's MaxStackBytes
}

// Error names the limit and the setting that raises it.
func (e *StackLimitError) Error() string {
	return fmt.Sprintf("the guest's call stack would exceed %d bytes; raise the plugin's stack limit (max_stack_kb) if its recursion is genuine", e.Limit)
}

// StackExhausted is the import interrupt.Instrument gives the guest, called
// when a frame would take the stack past limit. Its panic ends the call
// (see CheckInterrupt).
func StackExhausted(limit int) api.GoModuleFunc {
	return func(context.Context, api.Module, []uint64) { panic(&StackLimitError{Limit: limit}) }
}

// InstantiateInterrupt provides, in r, the imports interrupt.Instrument
// gives a guest: CheckInterrupt, and StackExhausted with the stack budget
// stack.
func InstantiateInterrupt(ctx context.Context, r wazero.Runtime, stack int) error {
	if _, err := r.NewHostModuleBuilder(interrupt.Module).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(CheckInterrupt), nil, nil).Export(interrupt.Func).
		NewFunctionBuilder().WithGoModuleFunction(StackExhausted(stack), nil, nil).Export(interrupt.StackFunc).
		Instantiate(ctx); err != nil {
		return fmt.Errorf("%s: %w", interrupt.Module, err)
	}
	return nil
}
