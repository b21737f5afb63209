package host

import (
	"context"
	"errors"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// SPEC section 4: morph_fallback_final must answer a payload; an empty
// output is the plugin's bad output (a fault), as it was before the hooks
// were bound by the table.
func TestEmptyFallbackFinalIsBadOutput(t *testing.T) {
	l := newLoader(t)
	p := load(t, l, Config{Path: fixture(t, "fb_empty")})
	e := engine.New(finalOnly{}, nil, p.hookOptions()...)
	defer e.Close(context.Background())
	fn := e.EngineHooks().Funcs[abi.HookFallbackFinal]
	if fn == nil {
		t.Fatal("no fallback_final hook bound")
	}
	ans, err := fn(context.Background(), abi.FallbackInput{Task: "t"})
	if !errors.Is(err, ErrBadOutput) {
		t.Errorf("answer %#v, error %v; want ErrBadOutput", ans, err)
	}
	if p.Stats().Faults != 1 {
		t.Errorf("faults %d, want 1", p.Stats().Faults)
	}
}
