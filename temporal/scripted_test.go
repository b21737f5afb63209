package temporal

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
)

// The scripted model answers a workflow's model calls in the script's
// order whichever worker makes them: each call's reply is the one the
// workflow's count of its calls names, not a worker's place in the script.
// A session's first turn runs on one worker, its second on another, with a
// script of its own read afresh; the two turns end as the same session's
// run locally (a worker that kept its own place would answer the second
// turn with the first reply).
func TestScriptedModelOnTwoWorkers(t *testing.T) {
	c := dev(t)
	load := func() *config.Config { return loadConfig(t, "", calcTurns...) }
	ctx := context.Background()
	sess := openLocal(t, load()).Engine.NewSession("s")

	queue, id := "q-"+t.Name(), "two-"+time.Now().Format("150405.000000")
	first := startWorkerOn(t, c, load(), queue)
	for i, task := range []string{"what is 6*7?", "and plus one?"} {
		if i == 1 { // the second turn on another worker
			startWorkerOn(t, c, load(), queue)
			first.Stop()
			worker.PurgeStickyWorkflowCache()
		}
		want, wantRC, err := sess.RunTurn(ctx, task, engine.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameAsLocal(t, sessionTurn(t, c, queue, id, SessionLimits{}, task), want, wantRC)
	}
}
