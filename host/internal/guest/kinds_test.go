package guest

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// A call's failure is one error: errors.Is finds its kind and its cause,
// its text escapes what the guest wrote, and an error that is no
// CallError is taken for a trap caused by it.
func TestCallError(t *testing.T) {
	cause := fmt.Errorf("wasm: %w", context.DeadlineExceeded)
	err := Fail(ErrTrap, "in \x1b[31mred", cause)
	if !errors.Is(err, ErrTrap) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		t.Errorf("errors.Is on %v: want ErrTrap and the cause only", err)
	}
	if got, want := err.Error(), `plugin trapped: in \x1b[31mred: wasm: context deadline exceeded`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("call: %w", err)
	if ce := AsCallError(wrapped); ce == nil || ce.Kind != ErrTrap || ce.Msg != "in \x1b[31mred" || ce.Err != cause {
		t.Errorf("AsCallError(%v) = %+v", wrapped, ce)
	}
	foreign := errors.New("a loader's bare error")
	if ce := AsCallError(foreign); ce == nil || ce.Kind != ErrTrap || ce.Err != foreign {
		t.Errorf("AsCallError of a bare error = %+v, want a trap caused by it", ce)
	}
	if AsCallError(nil) != nil || KindOf(nil) != nil || KindOf(Fail(ErrGuest, "no", nil)) != ErrGuest {
		t.Error("KindOf: want nil for nil, the kind otherwise")
	}
}
