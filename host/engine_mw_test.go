package host

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
)

// scriptModel replays fixed replies.
type scriptModel struct{ replies []string }

func (m *scriptModel) Chat(context.Context, llm.Request) (llm.Result, error) {
	if len(m.replies) == 0 {
		return llm.Result{}, errors.New("script exhausted")
	}
	r := m.replies[0]
	m.replies = m.replies[1:]
	return llm.Result{Text: r}, nil
}

// End to end: the go-hooks plugin as engine plugin guards, redacts and
// audits a real run, and a trapping wasm middleware beside it is isolated.
func TestWasmMiddlewareInARun(t *testing.T) {
	l, logs := goHooksLoader(t)
	guard := l.Extender(Config{Name: "go-hooks", Path: goHooksWasm(t), Values: map[string]string{"deny_tools": "word_count"}}, engine.MiddlewareConfig{})
	trapper := l.Extender(Config{Path: fixture(t, "mw_trap")}, engine.MiddlewareConfig{})
	m := &scriptModel{replies: []string{
		`{"type":"tool_call","tool_call":{"tool_name":"word_count","tool_params":{"text":"a b"}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"json_query","tool_params":{"json":"{\"mail\":\"ops@example.com\"}","path":"mail"}}}`,
		`{"type":"final","final":{"output":"done"}}`,
	}}
	var hookEvents []engine.Event
	e := engine.New(m, nil, engine.WithExtenders(guard, trapper), engine.WithEventHandler(func(ev engine.Event) {
		if ev.Kind == engine.EventHook {
			hookEvents = append(hookEvents, ev)
		}
	}))
	defer e.Close(context.Background())
	final, rc, err := e.Run(context.Background(), "find the mail", engine.RunOptions{})
	if err != nil || final.Output != "done" {
		t.Fatalf("final %+v err %v", final, err)
	}
	if obs := rc.Steps[0].Observation; !strings.HasPrefix(obs, "Tool call denied: ") || !strings.Contains(obs, "word_count") {
		t.Fatalf("denied call's observation %q", obs)
	}
	if obs := rc.Steps[1].Observation; strings.Contains(obs, "ops@example.com") || !strings.Contains(obs, "[redacted]") {
		t.Fatalf("the tool output was not redacted: %q", obs)
	}
	if n := len(linesWith(logs.String(), "audit: turn 1")); n < 4 {
		t.Fatalf("%d audit lines:\n%s", n, logs.String())
	}
	trapped := 0
	for _, ev := range hookEvents {
		if ev.Plugin == "mw_trap" && ev.Err != nil {
			trapped++
			if !errors.Is(ev.Err, ErrTrap) && !errors.Is(ev.Err, ErrGuest) {
				t.Errorf("mw_trap fault %v is not a typed host error", ev.Err)
			}
		}
	}
	if trapped == 0 {
		t.Fatal("the trapping middleware was never called")
	}
	st := e.Status()
	if n := st.Hooks[abi.HookBeforeToolCall]; n != 2 {
		t.Errorf("status: %d plugins hook %s, want 2", n, abi.HookBeforeToolCall)
	}
	if len(st.Plugins) != 2 {
		t.Fatalf("status: %d plugins, want 2: %+v", len(st.Plugins), st.Plugins)
	}
	if st.Plugins[1].Faults == 0 {
		t.Errorf("status: mw_trap's Faults = 0 after it trapped %d times", trapped)
	}
}
