package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
	"github.com/morphhost/morph/llm/scripted"
)

// TestParseErrorShowsReply checks that a reply that does not parse is kept
// in its step and the step's event, escaped (no control character or line
// break of the model's survives) and capped at the observation limit,
// while the steps that parse do not repeat their replies.
func TestParseErrorShowsReply(t *testing.T) {
	const maxObs = 1 << 10
	huge := strings.Repeat("x", 1<<20)
	client := scripted.New(scripted.Texts("not json at all \x1b[31m\nsecond line", huge, seedFinal))
	var events []engine.Event
	e := engine.New(client, engine.NewRegistry(), engine.WithMaxObservationBytes(maxObs),
		engine.WithEventHandler(func(ev engine.Event) {
			if ev.Kind == engine.EventStep {
				events = append(events, ev)
			}
		}))
	_, rc, err := e.Run(context.Background(), "task", engine.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.Steps) != 3 || rc.Steps[0].Action != "parse_error" || rc.Steps[1].Action != "parse_error" || rc.Steps[2].Action != "final" {
		t.Fatalf("steps %+v; want two parse errors and the final", rc.Steps)
	}
	if got, want := rc.Steps[0].Reply, `not json at all \x1b[31m\nsecond line`; got != want {
		t.Errorf("step 1 reply %q, want %q", got, want)
	}
	long := rc.Steps[1].Reply
	if !strings.HasPrefix(long, "xxxx") || len(long) > maxObs+64 || !strings.Contains(long, "more bytes") {
		t.Errorf("step 2 reply is %d bytes (%.40q...); want the 1 MB reply cut to the %d-byte limit, saying so", len(long), long, maxObs)
	}
	if rc.Steps[2].Reply != "" {
		t.Errorf("final step has a reply %q; want none", rc.Steps[2].Reply)
	}
	for i, ev := range events {
		if ev.Reply != rc.Steps[i].Reply {
			t.Errorf("step %d event reply %.40q, want the step's %.40q", i+1, ev.Reply, rc.Steps[i].Reply)
		}
	}
	b, err := json.Marshal(rc.Steps[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"reply":"not json at all \\x1b[31m\\nsecond line"`) {
		t.Errorf("step JSON %s lacks the reply", b)
	}
}

// TestCostUnknown checks that calls of a model without a price mark the
// run's cost unknown, in its metrics and their JSON, and warn once, and
// that a priced model's run does neither.
func TestCostUnknown(t *testing.T) {
	run := func(t *testing.T, pricing llm.Pricing) (*engine.Context, string) {
		t.Helper()
		var logs bytes.Buffer
		client := scripted.New(scripted.Texts("not json", seedFinal), scripted.WithModel("m"),
			scripted.WithPricing(pricing), scripted.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		_, rc, err := engine.New(client, engine.NewRegistry()).Run(context.Background(), "task", engine.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rc.Metrics.LLMRounds != 2 {
			t.Fatalf("%d model calls, want 2", rc.Metrics.LLMRounds)
		}
		return rc, logs.String()
	}

	rc, logs := run(t, llm.Pricing{"other": {InputPerMillion: 1, OutputPerMillion: 1}})
	if !rc.Metrics.CostUnknown || rc.Metrics.TotalCost != 0 || !rc.Steps[0].Usage.CostUnknown {
		t.Errorf("unpriced model: metrics %+v, step usage %+v; want the cost unknown", rc.Metrics, rc.Steps[0].Usage)
	}
	if b, _ := json.Marshal(rc.Metrics); !strings.Contains(string(b), `"cost_unknown":true`) {
		t.Errorf("metrics JSON %s does not mark the cost unknown", b)
	}
	if n := strings.Count(logs, llm.UnpricedMessage); n != 1 || !strings.Contains(logs, "model=m") {
		t.Errorf("%d warnings, want 1 naming the model:\n%s", n, logs)
	}

	rc, logs = run(t, llm.Pricing{"m": {InputPerMillion: 1e6, OutputPerMillion: 1e6}})
	if rc.Metrics.CostUnknown || rc.Metrics.TotalCost == 0 {
		t.Errorf("priced model: metrics %+v; want a known cost", rc.Metrics)
	}
	if b, _ := json.Marshal(rc); strings.Contains(string(b), "cost_unknown") {
		t.Errorf("priced run's JSON mentions cost_unknown: %s", b)
	}
	if logs != "" {
		t.Errorf("priced model warned:\n%s", logs)
	}
}
