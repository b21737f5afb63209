package temporal

import (
	"strings"
	"testing"

	"github.com/morphhost/morph/pipeline"
)

// loop_restart across continue-as-new: a workflow that continues as new
// at every checkpoint folds its state back through the journal, restart
// records included, and ends as the local run does: failed past
// max_restarts, its loops counted, none lost at a continuation.
func TestPipelineRestartAcrossContinueAsNew(t *testing.T) {
	c := dev(t)
	src := `digraph restarts {
	  max_restarts=2
	  start [shape=Mdiamond]
	  one   [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"1+1\"}", max_node_visits=1]
	  two   [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"${tool.output}*3\"}"]
	  done  [shape=Msquare]
	  start -> one -> two
	  two -> one [condition="outcome=success", loop_restart=true]
	  two -> done [condition="outcome=fail"]
	}`
	want := runLocalPipeline(t, loadConfig(t, "", planReplies...), src, pipeline.NewQueueInterviewer())
	if want.State != pipeline.RunFail || !strings.Contains(want.FailureReason, "restarted 2 times") {
		t.Fatalf("the local run: %s %s", want.State, want.FailureReason)
	}
	queue := startWorker(t, c, loadConfig(t, "", planReplies...))
	got := pipelineResult(t, startPipeline(t, c, queue, src, PipelineInput{ContinueAfter: 1}))
	samePipelineAsLocal(t, got, want)
	if got.State.Checkpoint.Restarts != 2 {
		t.Errorf("restarts in the last state: %d, want 2", got.State.Checkpoint.Restarts)
	}
}
