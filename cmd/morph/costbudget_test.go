package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/morphhost/morph/pipeline"
)

// A cost budget with no [llm.pricing] table cannot trip: `morph pipeline
// run --max-cost` says so before the run, and the run warns once that its
// stages' model has no price (an event, and a log line), and its summary
// says cost_unknown; with the example's table, neither.
func TestPipelineRunCostBudgetWithoutPricing(t *testing.T) {
	replies, err := filepath.Abs(examples + "plan-implement-verify.replies.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "unpriced.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "[llm]\nprovider = \"scripted\"\nscripted_replies = %q\n\n[agent]\nmax_steps = 5\n", replies), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := morph(t, "", "pipeline", "run", "--config", cfg, "--max-cost", "5", "--run-dir", filepath.Join(t.TempDir(), "run"), examples+"plan-implement-verify.dot")
	var sum pipelineSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || code != 0 || sum.Status != pipeline.RunSuccess || !sum.CostUnknown {
		t.Fatalf("exit %d, summary %+v (%v), want success with cost_unknown:\n%s", code, sum, err, stderr)
	}
	for _, want := range []string{"no [llm.pricing] table", "warning: " + pipeline.CostUnknownMessage} {
		if n := strings.Count(stderr, want); n != 1 {
			t.Errorf("stderr says %q %d times, want once:\n%s", want, n, stderr)
		}
	}
	code, s, stderr := runExample(t, "plan-implement-verify", "", "--max-cost", "5")
	if code != 0 || s.Status != pipeline.RunSuccess || strings.Contains(stderr, "[llm.pricing]") {
		t.Errorf("priced: exit %d, status %s, stderr:\n%s", code, s.Status, stderr)
	}
}
