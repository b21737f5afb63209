package pipeline

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm/scripted"
)

// A model without a price in [llm.pricing] costs $0 with its cost marked
// unknown: the mark reaches the stage's usage, the run's result, its
// checkpoint (the journal's encoder: FuzzJournalRecord), and with a cost budget set the run warns
// once (event and log), naming the stage, its model and [llm.pricing],
// instead of running as if the budget held.
func TestCostUnknownReachesRunAndWarnsOnce(t *testing.T) {
	const final = `{"type":"final","final":{"thought":"t","output":"done OUTCOME:SUCCESS"}}`
	const src = "digraph p { start [shape=Mdiamond]; a [prompt=\"x\", llm_model=\"cheap-\x1b[2J\"]; b [prompt=\"y\"]; done [shape=Msquare]; start -> a -> b -> done }"
	for _, budget := range []float64{0, 5} {
		var (
			mu       sync.Mutex
			warnings []Event
			logs     bytes.Buffer
		)
		r := &Runner{
			Backend: &EngineBackend{Engine: engine.New(scripted.New(scripted.Texts(final, final)), engine.NewRegistry())},
			Limits:  Limits{MaxCostUSD: budget},
			Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
			OnEvent: func(ev Event) {
				mu.Lock()
				defer mu.Unlock()
				if ev.Kind == EventWarning {
					warnings = append(warnings, ev)
				}
			},
		}
		res := runGraph(t, r, src)
		if res.State != RunSuccess {
			t.Fatalf("budget %g: %s: %s", budget, res.State, res.FailureReason)
		}
		if !res.Usage.CostUnknown || !res.Nodes["a"].Usage.CostUnknown {
			t.Errorf("budget %g: result usage %+v, a's %+v: want the cost marked unknown", budget, res.Usage, res.Nodes["a"].Usage)
		}
		cp, err := LoadCheckpoint(res.RunDir)
		if err != nil || !cp.Usage.CostUnknown {
			t.Errorf("budget %g: checkpoint usage %+v: %v", budget, cp.Usage, err)
		}
		mu.Lock()
		got := warnings
		mu.Unlock()
		if budget == 0 {
			if len(got) != 0 {
				t.Errorf("no budget, yet warned: %+v", got)
			}
			continue
		}
		if len(got) != 1 {
			t.Fatalf("budget %g: %d warnings, want one: %+v", budget, len(got), got)
		}
		msg := got[0].Message
		for _, want := range []string{CostUnknownMessage, "stage a", `"cheap-\x1b[2J"`, "[llm.pricing]", "--max-cost"} {
			if !strings.Contains(msg, want) {
				t.Errorf("warning %q does not say %q", msg, want)
			}
		}
		if strings.ContainsRune(msg, 0x1b) || got[0].NodeID != "a" {
			t.Errorf("warning %q on node %q: want it escaped, on a", msg, got[0].NodeID)
		}
		if n := strings.Count(logs.String(), CostUnknownMessage); n != 1 {
			t.Errorf("logged %d times, want once: %s", n, logs.String())
		}
	}
}
