package temporal

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/testenv"
)

// plugin is the absolute path of a module of the repository (built by make
// fixtures and make examples).
func plugin(t *testing.T, rel string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Built(t, path, "fixtures examples")
}

// WebAssembly hooks and middleware follow the same rules on Temporal as
// locally: go-hooks builds the prompt and parameters, denies a tool
// (before_tool_call) and redacts an output (after_tool_call); mw-trap's
// on_action traps and its before_tool_call fails, and after one fault it
// is quarantined; trap's build_prompt traps, and go-hooks' prompt, set
// after, is used. The steps, observations and prompt are the local run's.
func TestHooksAndMiddlewareMatchLocalRun(t *testing.T) {
	c := dev(t)
	replies := []string{
		`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"calc","tool_params":{"expression":"6*7"}}}`,
		`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"json_query","tool_params":{"json":"{\"a\":\"sk-abcdefghijklmnopqrstuvwx\"}","path":"a"}}}`,
		`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"calc","tool_params":{"expression":"1+1"}}}`,
		`{"type":"final","final":{"thought":"done","output":42}}`,
	}
	extra := `
[[plugins]]
name = "trap"
path = "` + plugin(t, "guests/testdata/trap.wasm") + `"

[[plugins]]
name = "go-hooks"
path = "` + plugin(t, "examples/go-hooks/go-hooks.wasm") + `"
[plugins.config]
deny_tools = "nothing"

[[plugins]]
name = "mw-trap"
path = "` + plugin(t, "guests/testdata/mw_trap.wasm") + `"
quarantine_after = 1
`
	ctx := context.Background()
	var localWarnings []string
	want, wantRC, err := openLocal(t, loadConfig(t, extra, replies...)).Engine.Run(ctx, "what is 6*7?", engine.RunOptions{OnEvent: func(ev engine.Event) {
		if ev.Kind == engine.EventWarning || ev.Kind == engine.EventQuarantine {
			localWarnings = append(localWarnings, ev.Message)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}

	got, _ := runOnWorker(t, c, loadConfig(t, extra, replies...), "what is 6*7?")
	sameAsLocal(t, got, want, wantRC)
	if !strings.Contains(wantRC.SystemPrompt, "House style") || !strings.Contains(wantRC.Steps[1].Observation, "[redacted]") {
		t.Errorf("the local run did not use go-hooks: prompt\n%s\nsteps %+v", wantRC.SystemPrompt, wantRC.Steps)
	}
	if !strings.Contains(strings.Join(localWarnings, "\n"), "quarantine") {
		t.Errorf("local warnings: %q", localWarnings)
	}
}

// Every engine hook of abi.Hooks has an activity that runs it on a worker
// (hookActivities), taking the hook's input payload: a hook added to the
// table without one would fail only when a workflow first called it.
func TestHookActivitiesCoverEngineHooks(t *testing.T) {
	names := abi.HookNames(abi.EngineHook)
	for _, name := range names {
		act, ok := hookActivities[name]
		if !ok {
			t.Errorf("engine hook %s has no activity", name)
			continue
		}
		row, _ := abi.HookByName(name)
		if in := reflect.TypeOf(act).In(1); in != row.Input {
			t.Errorf("engine hook %s's activity takes a %v, want the hook's %v", name, in, row.Input)
		}
	}
	if len(hookActivities) != len(names) {
		t.Errorf("%d hook activities, want one per engine hook (%d)", len(hookActivities), len(names))
	}
}
