package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/builtin"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
	"github.com/morphhost/morph/llm/scripted"
)

// TestExamplePlanImplementVerify runs the example pipeline on morph's
// engine and its scripted model: the diamond's agent fails the first
// verification and passes the second.
func TestExamplePlanImplementVerify(t *testing.T) {
	const dir = "../examples/pipelines"
	client, err := scripted.Load(filepath.Join(dir, "plan-implement-verify.replies.json"), llm.Pricing{"scripted-demo": {InputPerMillion: 2.5, OutputPerMillion: 10}})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(client, engine.NewRegistry())
	src, err := os.ReadFile(filepath.Join(dir, "plan-implement-verify.dot"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseDOTNamed("plan-implement-verify.dot", src)
	if err != nil {
		t.Fatal(err)
	}
	b := &EngineBackend{Engine: eng}
	res, err := (&Runner{Backend: b, Tools: b}).Run(context.Background(), g, RunConfig{RunDir: t.TempDir() + "/run", Source: src})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != RunSuccess {
		t.Fatalf("%s at %s: %s", res.State, res.FailedNode, res.FailureReason)
	}
	if got, want := strings.Join(res.Path, ","), "start,plan,implement,verify,implement,verify,done"; got != want {
		t.Errorf("path %s, want %s", got, want)
	}
	if res.Usage.TotalTokens == 0 || res.Usage.CostUSD == 0 {
		t.Errorf("usage %+v", res.Usage)
	}
	if !strings.Contains(res.Context["verify.output"].(string), "OUTCOME:PASS") {
		t.Errorf("verify.output %v", res.Context["verify.output"])
	}
}

func TestEngineBackendFidelity(t *testing.T) {
	client := scripted.New(scripted.Texts(
		`{"type":"final","final":{"thought":"t","output":"one"}}`,
		`{"type":"final","final":{"thought":"t","output":"two"}}`,
		`{"type":"final","final":{"thought":"t","output":"three"}}`,
	))
	b := &EngineBackend{Engine: engine.New(client, engine.NewRegistry())}
	ctx := context.Background()
	for i, cfg := range []AgentRunConfig{
		{NodeID: "a", Prompt: "first", FidelityMode: FidelityFull, ThreadID: "th"},
		{NodeID: "b", Prompt: "second", FidelityMode: FidelityFull, ThreadID: "th"},
		{NodeID: "c", Prompt: "third", FidelityMode: FidelityCompact, Preamble: "Stages so far: a, b"},
	} {
		res, err := b.RunAgent(ctx, cfg)
		if err != nil || !res.Success {
			t.Fatalf("run %d: %+v, %v", i, res, err)
		}
	}
	hist := b.sessions["th"].History()
	var joined []string
	for _, m := range hist {
		joined = append(joined, m.Content)
	}
	s := strings.Join(joined, "|")
	for _, want := range []string{"first", "second"} {
		if !strings.Contains(s, want) {
			t.Errorf("thread th's history %q lacks %q", s, want)
		}
	}
	if strings.Contains(s, "third") {
		t.Errorf("thread th's history %q holds %q, from a run outside the thread", s, "third")
	}
	// A thread kept in the run directory is resumed by a new backend.
	dir := t.TempDir()
	b1 := &EngineBackend{Engine: engine.New(scripted.New(scripted.Texts(`{"type":"final","final":{"thought":"t","output":"one"}}`)), engine.NewRegistry())}
	if _, err := b1.RunAgent(ctx, AgentRunConfig{NodeID: "a", Prompt: "remember 42", FidelityMode: FidelityFull, ThreadID: "th", StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	b2 := &EngineBackend{Engine: engine.New(scripted.New(scripted.Texts(`{"type":"final","final":{"thought":"t","output":"two"}}`)), engine.NewRegistry())}
	if _, err := b2.RunAgent(ctx, AgentRunConfig{NodeID: "b", Prompt: "what was it?", FidelityMode: FidelityFull, ThreadID: "th", StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, m := range b2.sessions["th"].History() {
		seen = seen || strings.Contains(m.Content, "remember 42")
	}
	if !seen {
		t.Error("the resumed backend's thread does not hold the first turn")
	}

	if _, err := b.RunAgent(ctx, AgentRunConfig{NodeID: "x", BaseURL: "http://elsewhere/v1"}); err == nil || !strings.Contains(err.Error(), "base_url") {
		t.Errorf("another endpoint without ForEndpoint: %v", err)
	}
}

func TestEngineBackendTools(t *testing.T) {
	reg := engine.NewRegistry()
	calc, _ := builtin.Lookup(builtin.CalcName)
	reg.Register(calc)
	b := &EngineBackend{Engine: engine.New(scripted.New(nil), reg)}
	if !b.HasTool("calc") || b.HasTool("rm") {
		t.Fatal("HasTool")
	}
	out, err := b.RunTool(context.Background(), "calc", map[string]any{"expression": "6 * 7"})
	if err != nil || !strings.Contains(out, "42") {
		t.Fatalf("calc: %q, %v", out, err)
	}
	if _, err := b.RunTool(context.Background(), "calc", map[string]any{"expr": 1}); err == nil {
		t.Error("input that breaks the schema was run")
	}
}

// endedSessions is a middleware that keeps the ids of the sessions it is
// told ended, and of the sessions whose turns started, by task.
type endedSessions struct {
	ids     []string
	started map[string]string
}

func (*endedSessions) Name() string { return "ended" }

func (m *endedSessions) OnSessionEnd(_ context.Context, id string) error {
	m.ids = append(m.ids, id)
	return nil
}

func (m *endedSessions) OnTurnStart(_ context.Context, ev abi.TurnStart) error {
	m.started[ev.Input] = ev.SessionID
	return nil
}

// Close ends the threads' sessions, so that their plugins release what
// they keep of them; the runs of other fidelities closed their own. Two
// runs on one engine (the pipeline workflows of a worker) whose threads
// have one name have sessions apart.
func TestEngineBackendCloseEndsThreads(t *testing.T) {
	final := `{"type":"final","final":{"thought":"t","output":"x"}}`
	mw := &endedSessions{started: map[string]string{}}
	eng := engine.New(scripted.New(scripted.Texts(final, final, final, final)), engine.NewRegistry(), engine.WithMiddleware(mw))
	b, other := &EngineBackend{Engine: eng}, &EngineBackend{Engine: eng}
	ctx := context.Background()
	for _, run := range []struct {
		b   *EngineBackend
		cfg AgentRunConfig
	}{
		{b, AgentRunConfig{NodeID: "a", Prompt: "first", FidelityMode: FidelityFull, ThreadID: "th"}},
		{b, AgentRunConfig{NodeID: "b", Prompt: "second", FidelityMode: FidelityFull, ThreadID: "th"}},
		{b, AgentRunConfig{NodeID: "c", Prompt: "third", FidelityMode: FidelityCompact}},
		{other, AgentRunConfig{NodeID: "a", Prompt: "other run", FidelityMode: FidelityFull, ThreadID: "th"}},
	} {
		if _, err := run.b.RunAgent(ctx, run.cfg); err != nil {
			t.Fatal(err)
		}
	}
	thread, third := mw.started["first"], mw.started["third"]
	if mw.started["second"] != thread || mw.started["other run"] == thread {
		t.Fatalf("sessions by turn: %v; want the thread's turns in one session, the other run's thread in another", mw.started)
	}
	if len(mw.ids) != 1 || mw.ids[0] != third {
		t.Fatalf("before Close: %v ended; want the compact run's session alone (%s)", mw.ids, third)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(mw.ids) != 2 || mw.ids[1] != thread {
		t.Fatalf("after Close: %v ended; want the thread's session %s too, not the other run's", mw.ids, thread)
	}
}
