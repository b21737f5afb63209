package engine_test

// The seed's four hook options, written as the seed writes them: function
// literals of exactly these signatures, in the engine's own types. If one
// of them stops compiling, code written to the seed does too.

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
	"github.com/morphhost/morph/llm/scripted"
)

const (
	seedCall  = `{"type":"tool_call","tool_call":{"thought":"look","tool_name":"lookup","tool_params":{"key":"k"}}}`
	seedFinal = `{"type":"final","final":{"thought":"done","output":"answer"}}`
)

// lookup is the seed's host tool.
type lookup struct{}

func (lookup) Name() string        { return "lookup" }
func (lookup) Description() string { return "looks a key up" }
func (lookup) ParameterSchema() string {
	return `{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`
}
func (lookup) Execute(ctx context.Context, params map[string]any) (string, error) {
	return "value", nil
}

// seedRun runs task on an engine with the lookup tool, the model answering
// replies, and returns what the run returned and what the model was sent.
func seedRun(t *testing.T, replies []string, opts engine.RunOptions, hooks ...engine.Option) (*engine.Final, *engine.Context, []llm.Request) {
	t.Helper()
	client := scripted.New(scripted.Texts(replies...))
	reg := engine.NewRegistry()
	reg.Register(lookup{})
	final, rc, err := engine.New(client, reg, hooks...).Run(context.Background(), "the task", opts)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return final, rc, client.Requests()
}

// The prompt builder's answer is the run's system prompt, the first
// message of every request; it is given the engine's registry and the task.
func TestSeedPromptBuilder(t *testing.T) {
	var gotTools []string
	var gotTask string
	_, rc, reqs := seedRun(t, []string{seedFinal}, engine.RunOptions{},
		engine.WithPromptBuilder(func(reg *engine.Registry, task string) string {
			gotTools, gotTask = reg.Names(), task
			return "You are the seed's agent."
		}))
	if rc.SystemPrompt != "You are the seed's agent." {
		t.Errorf("system prompt %q, want the builder's", rc.SystemPrompt)
	}
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	if first := reqs[0].Messages[0]; first.Role != llm.RoleSystem || first.Content != "You are the seed's agent." {
		t.Errorf("first message sent %+v, want the builder's system prompt", first)
	}
	if gotTask != "the task" {
		t.Errorf("builder told task %q, want %q", gotTask, "the task")
	}
	if len(gotTools) != 1 || gotTools[0] != "lookup" {
		t.Errorf("builder's registry has %q, want the engine's [lookup]", gotTools)
	}
}

// The params builder's map reaches every model request, over the run's
// base parameters; it is told the run's options as engine.RunOptions.
func TestSeedParamsBuilder(t *testing.T) {
	var told engine.RunOptions
	_, _, reqs := seedRun(t, []string{seedCall, seedFinal}, engine.RunOptions{Model: "m1", MaxSteps: 7, Parameters: map[string]any{"seed": 3, "temperature": 1.0}},
		engine.WithParamsBuilder(func(opts engine.RunOptions) map[string]any {
			told = opts
			return map[string]any{"temperature": 0.1}
		}))
	if told.Model != "m1" {
		t.Errorf("builder told model %q, want the run's m1", told.Model)
	}
	if told.MaxSteps != 7 {
		t.Errorf("builder told MaxSteps %d, want the run's 7", told.MaxSteps)
	}
	if told.Parameters["seed"] != 3 {
		t.Errorf("builder told parameters %v, want the run's", told.Parameters)
	}
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for i, req := range reqs {
		if req.Parameters["temperature"] != 0.1 {
			t.Errorf("request %d: temperature %v, want the builder's 0.1", i, req.Parameters["temperature"])
		}
		if req.Parameters["seed"] != 3 {
			t.Errorf("request %d: seed %v, want the base 3", i, req.Parameters["seed"])
		}
	}
}

// On-tool-success is called with the run's Context and the tool's name
// after a tool call that succeeded, and not after one that failed.
func TestSeedOnToolSuccess(t *testing.T) {
	type call struct{ task, tool string }
	var calls []call
	unknown := `{"type":"tool_call","tool_call":{"thought":"x","tool_name":"nope","tool_params":{}}}`
	_, rc, _ := seedRun(t, []string{unknown, seedCall, seedFinal}, engine.RunOptions{},
		engine.WithOnToolSuccess(func(rc *engine.Context, toolName string) {
			if rc == nil {
				t.Error("on-tool-success given no run Context")
				return
			}
			calls = append(calls, call{rc.Task, toolName})
		}))
	if len(rc.Steps) < 2 {
		t.Fatalf("steps %+v, want the unknown tool's, then lookup's", rc.Steps)
	}
	if step := rc.Steps[0]; step.Action != "nope" || step.Error == "" {
		t.Errorf("first step %+v, want the unknown tool failing", step)
	}
	if step := rc.Steps[1]; step.Action != "lookup" || step.Error != "" {
		t.Errorf("second step %+v, want lookup succeeding", step)
	}
	if len(calls) != 1 {
		t.Fatalf("on-tool-success called %d times (%v), want once: after lookup, not after the unknown tool", len(calls), calls)
	}
	if calls[0] != (call{"the task", "lookup"}) {
		t.Errorf("on-tool-success called with %+v, want the run's task and lookup", calls[0])
	}
}

// The fallback final is the run's final when the run ends without one
// (the model never answers a final, nor does its forced conclusion).
func TestSeedFallbackFinal(t *testing.T) {
	final, rc, _ := seedRun(t, []string{"junk", "junk"}, engine.RunOptions{MaxSteps: 1, ParseRetries: -1},
		engine.WithFallbackFinal(func() *engine.Final {
			return &engine.Final{Thought: "gave up", Output: map[string]any{"answer": "none"}}
		}))
	if rc.StopReason != engine.StopFallback {
		t.Fatalf("stop %s, want %s", rc.StopReason, engine.StopFallback)
	}
	want := `{"thought":"gave up","output":{"answer":"none"}}`
	if got, _ := json.Marshal(final); string(got) != want {
		t.Errorf("final %s, want the fallback's %s", got, want)
	}
	if string(rc.RawFinalAnswer) != want {
		t.Errorf("RawFinalAnswer %s, want the fallback's %s", rc.RawFinalAnswer, want)
	}

	// A final that cannot be written (here a cycle) is refused for the
	// default one, not followed.
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	final, _, _ = seedRun(t, []string{"junk", "junk"}, engine.RunOptions{MaxSteps: 1, ParseRetries: -1},
		engine.WithFallbackFinal(func() *engine.Final { return &engine.Final{Output: cyclic} }))
	if final.Output != engine.DefaultFinalOutput {
		t.Errorf("final %+v for a cyclic fallback, want the default", final)
	}
}
