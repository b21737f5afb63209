package pipeline

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm/scripted"
)

// EngineBackend.Close runs in Temporal workflow code (PipelineWorkflow),
// where each Session.Close schedules activities (endSessions): it ends the
// threads' sessions in the order they began, the same in a run and its
// replay, not in a map's.
func TestEngineBackendClosesInOrder(t *testing.T) {
	final := `{"type":"final","final":{"thought":"t","output":"x"}}`
	const threads = 12
	texts := make([]string, threads)
	for i := range texts {
		texts[i] = final
	}
	order := func() []string {
		mw := &endedSessions{started: map[string]string{}}
		n := 0
		eng := engine.New(scripted.New(scripted.Texts(texts...)), engine.NewRegistry(), engine.WithMiddleware(mw),
			engine.WithNonce(func() string { n++; return fmt.Sprint(n) }))
		b := &EngineBackend{Engine: eng}
		for i := range threads {
			if _, err := b.RunAgent(context.Background(), AgentRunConfig{NodeID: fmt.Sprint("n", i), Prompt: fmt.Sprint("p", i),
				FidelityMode: FidelityFull, ThreadID: fmt.Sprint("th", i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		return mw.ids
	}
	first := order()
	for range 5 {
		if again := order(); !slices.Equal(first, again) {
			t.Fatalf("sessions ended in %v, then (same inputs, same nonces) in %v: workflow code must not depend on map order", first, again)
		}
	}
}
