package llm

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// TestPricer checks that a priced model gets its cost, and that a model
// without a price costs 0 marked unknown, with one warning per model (even
// from concurrent calls), whether or not other models have prices.
func TestPricer(t *testing.T) {
	var logs bytes.Buffer
	p := NewPricer(Pricing{"priced": {InputPerMillion: 1e6, OutputPerMillion: 2e6}}, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	u := Usage{InputTokens: 3, OutputTokens: 4, TotalTokens: 7}

	if got := p.Price(ctx, "priced", u); got.Cost != 3+8 || got.CostUnknown {
		t.Errorf("priced model: %+v, want cost 11, known", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range []string{"unpriced", "other"} {
				if got := p.Price(ctx, m, u); got.Cost != 0 || !got.CostUnknown || got.TotalTokens != 7 {
					t.Errorf("%s: %+v, want cost 0, unknown, tokens kept", m, got)
				}
			}
		}()
	}
	wg.Wait()
	for _, m := range []string{"model=unpriced", "model=other"} {
		if n := strings.Count(logs.String(), m+" "); n != 1 {
			t.Errorf("%d warnings for %s, want 1:\n%s", n, m, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "priced=[priced]") || !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("warning does not list the priced models at WARN:\n%s", logs.String())
	}

	logs.Reset()
	none := NewPricer(nil, slog.New(slog.NewTextHandler(&logs, nil)))
	for range 2 {
		if got := none.Price(ctx, "local", u); !got.CostUnknown || got.Cost != 0 {
			t.Errorf("no pricing: %+v, want cost 0, unknown", got)
		}
	}
	if n := strings.Count(logs.String(), UnpricedMessage); n != 1 || !strings.Contains(logs.String(), "model=local") {
		t.Errorf("no pricing at all: %d warnings, want 1 naming the model:\n%s", n, logs.String())
	}
}
