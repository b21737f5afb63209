package host

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// A plugin call made inside a Bounded middleware hook's context, but for
// something else (here a plugin's tool), must be sent its own input, not
// the event's shared encoding (engine.BoundedCall).
func TestToolInBoundedHookGetsItsOwnInput(t *testing.T) {
	l := newLoader(t)
	p := load(t, l, Config{Path: fixture(t, "echo_tool")})
	tools := p.Tools()
	if len(tools) != 1 {
		t.Fatalf("%d tools", len(tools))
	}
	var sent string
	policy := &engine.Funcs{ID: "policy", Bounded: true,
		TurnStart: func(ctx context.Context, ev abi.TurnStart) error {
			// as a Bounded middleware before it in the chain would: the
			// event's encoding is made
			if _, err := engine.BoundedCallOf(ctx).PayloadJSON(func() ([]byte, error) { return json.Marshal(ev) }); err != nil {
				return err
			}
			_, err := tools[0].Execute(ctx, map[string]any{"text": "hi"})
			if err != nil {
				sent = err.Error() // echo_tool fails with the input it was sent
			}
			return nil
		}}
	e := engine.New(finalOnly{}, nil, engine.WithMiddleware(policy, engine.MiddlewareConfig{Timeout: time.Minute}))
	defer e.Close(context.Background())
	if _, _, err := e.Run(context.Background(), "the task", engine.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sent, `"tool":"echo_input"`) {
		t.Fatalf("the tool was sent %s; want its ToolCallInput", sent)
	}
}

// SPEC section 4: morph_fallback_final must answer a payload; an empty
// output is the plugin's bad output (a fault), as it was before the hooks
// were bound by the table.
func TestEmptyFallbackFinalIsBadOutput(t *testing.T) {
	l := newLoader(t)
	p := load(t, l, Config{Path: fixture(t, "fb_empty")})
	e := engine.New(finalOnly{}, nil, p.Options()...)
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
