package host

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/pipeline"
)

// stageBackend answers the agent stages of a run with outputs, in turn.
type stageBackend struct {
	mu      sync.Mutex
	outputs []string
}

func (b *stageBackend) RunAgent(context.Context, pipeline.AgentRunConfig) (*pipeline.AgentRunResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.outputs) == 0 {
		return nil, errors.New("no more outputs")
	}
	out := b.outputs[0]
	b.outputs = b.outputs[1:]
	return &pipeline.AgentRunResult{Output: out, Success: true, StopReason: "final"}, nil
}

// verifyPipeline is examples/pipelines/wasm-verify.dot's graph, with an
// echo stage after the verify stage.
const verifyPipeline = `digraph wasm_verify {
  goal = "Make the failing unit tests pass"
  max_node_visits = 3
  start     [shape=Mdiamond]
  implement [label="Implement", prompt="Fix the code: $goal"]
  verify    [type="wasm:verify", label="Verify (wasm)"]
  echo      [handler="echo"]
  done      [shape=Msquare]
  start -> implement -> verify
  verify -> echo      [condition="outcome=success"]
  verify -> implement [condition="outcome=fail", label="fix"]
  echo -> done
}`

// The stage handlers of an engine's plugins, found through its status and
// registered by type, run in a real pipeline: the verify stage fails the
// first implementation (2 failed), the run loops back to implement, and
// passes the second; the echo stage, named by handler=, is told the verify
// stage's outcome as its previous one, and sees the context the run built.
func TestStageInRun(t *testing.T) {
	l := sharedVerifyLoader(t)
	e := engine.New(finalModel{}, nil, engine.WithExtenders(
		l.Extender(Config{Path: verifyWasm(t)}, engine.MiddlewareConfig{}), // named after its file: "verify"
		l.Extender(Config{Name: "echo", Wasm: echoGuest().wasm()}, engine.MiddlewareConfig{}),
		l.Extender(Config{Name: "hooks-only", Wasm: guestModule{name: "hooks-only"}.wasm()}, engine.MiddlewareConfig{}),
		l.Extender(Config{Name: "disabled", Wasm: stageGuest("disabled", `{"status":"success"}`).wasm(), Hooks: []string{}}, engine.MiddlewareConfig{}),
	))
	ctx := context.Background()
	if err := e.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	reg := pipeline.DefaultHandlerRegistry()
	var types []string
	for _, h := range StageHandlers(e.Status()) {
		reg.Register(h)
		types = append(types, h.Type())
	}
	if !slices.Equal(types, []string{"wasm:verify", "wasm:echo"}) {
		t.Fatalf("stage handlers %v; want the two plugins with an enabled handle_stage", types)
	}
	for _, ps := range e.Status().Plugins { // the status tells the plugins that handle stages
		if want := ps.Name == "verify" || ps.Name == "echo"; slices.Contains(ps.Hooks, abi.HookHandleStage) != want {
			t.Errorf("plugin %s: hooks %v", ps.Name, ps.Hooks)
		}
	}
	g, err := pipeline.ParseDOT([]byte(verifyPipeline))
	if err != nil {
		t.Fatal(err)
	}
	r := &pipeline.Runner{Handlers: reg, Backend: &stageBackend{outputs: []string{
		"Changed the parser. Test run: 12 passed, 2 failed.",
		"Fixed the off-by-one in the tokenizer. Test run: 14 passed, 0 failed. tests pass",
	}}}
	res, err := r.Run(ctx, g, pipeline.RunConfig{RunDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	wantPath := []string{"start", "implement", "verify", "implement", "verify", "echo", "done"}
	if res.State != pipeline.RunSuccess || !slices.Equal(res.Path, wantPath) {
		t.Fatalf("run %s (%s at %s), path %v; want success along %v", res.State, res.FailureReason, res.FailedNode, res.Path, wantPath)
	}
	// A plugin stage did work: plugin.json and status.json; start did none.
	for _, f := range []string{"plugin.json", "status.json"} {
		if _, err := os.Stat(filepath.Join(res.RunDir, "verify", f)); err != nil {
			t.Errorf("verify's stage file: %v", err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(res.RunDir, "verify", "plugin.json")); err != nil || !strings.Contains(string(b), `"plugin":"verify","status":"success"`) {
		t.Errorf("verify's plugin.json: %s %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(res.RunDir, "start")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the start node has a stage directory: %v", err)
	}
	v := res.Nodes["verify"]
	if v == nil {
		t.Fatal("no verify node in the run's result")
	}
	if v.Visits != 2 {
		t.Errorf("verify: Visits = %d, want 2", v.Visits)
	}
	if v.Status != pipeline.StatusSuccess {
		t.Errorf("verify: Status = %q, want %q", v.Status, pipeline.StatusSuccess)
	}
	in, _ := res.Context["input"].(map[string]any)
	prev, _ := in["previous"].(map[string]any)
	updates, _ := prev["context_updates"].(map[string]any)
	runCtx, _ := in["context"].(map[string]any)
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"node_id", in["node_id"], "echo"},
		{"goal", in["goal"], "Make the failing unit tests pass"},
		{"previous.status", prev["status"], "success"},
		{`previous.context_updates["verify.attempts"]`, updates["verify.attempts"], 2.0},
		{`context["verify.passed"]`, runCtx["verify.passed"], true},
	} {
		if c.got != c.want {
			t.Errorf("the echo stage was given %s %#v, want %#v", c.what, c.got, c.want)
		}
	}
}
