package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
)

// A run with a call of a model without a price shows "cost unknown" (or
// "$X + unknown") on its progress lines, never a free run, and the CLI's
// default logger lets the pricer's once-per-model warning through.
func TestProgressCostUnknown(t *testing.T) {
	for _, c := range []struct {
		total llm.Usage
		want  string
	}{
		{llm.Usage{TotalTokens: 5, Cost: 0.5}, "cost $0.500000 "},
		{llm.Usage{TotalTokens: 5, CostUnknown: true}, "cost unknown "},
		{llm.Usage{TotalTokens: 5, Cost: 0.5, CostUnknown: true}, "cost $0.500000 + unknown "},
	} {
		var out bytes.Buffer
		progress(&out, false)(engine.Event{Kind: engine.EventStep, Step: 1, Action: "final", Total: c.total})
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("progress line %q, want %q in it", out.String(), c.want)
		}
	}

	var logs bytes.Buffer
	logger := slog.New(&errorsAndRetries{slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})})
	llm.NewPricer(nil, logger).Price(context.Background(), "no-such-model", llm.Usage{TotalTokens: 5})
	if !strings.Contains(logs.String(), "model=no-such-model") || !strings.Contains(logs.String(), "[llm.pricing]") {
		t.Errorf("the unpriced-model warning did not get through the CLI's logger:\n%s", logs.String())
	}
}
