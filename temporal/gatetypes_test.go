package temporal

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/pipeline"
)

// An answer's Value reaches the gate (pipeline.Answer's): the validator
// checks each question type as the gate reads it, so that a freeform gate
// takes text (it has no choices to name), a yes/no gate yes or no in
// Value, Choice or Text, and skipped answers any gate; what does not
// answer is refused while the gate waits.
func TestGateAnswerTypesChecked(t *testing.T) {
	yn := pipeline.Question{NodeID: "yn", Type: pipeline.QuestionYesNo, Choices: []pipeline.Choice{{Key: "Y", Label: "Yes", To: "ship"}, {Key: "N", Label: "No"}}}
	ff := pipeline.Question{NodeID: "ff", Type: pipeline.QuestionFreeform}
	mc := pipeline.Question{NodeID: "mc", Choices: []pipeline.Choice{{Key: "S", Label: "Ship", To: "ship"}}}
	g := &gates{waiting: []*gate{{q: yn}, {q: ff}, {q: mc}}}
	for _, c := range []struct {
		a  AnswerSignal
		ok bool
	}{
		{AnswerSignal{Node: "yn", Value: pipeline.AnswerNo}, true},
		{AnswerSignal{Node: "yn", Choice: "Y"}, true},
		{AnswerSignal{Node: "yn", Text: "yes"}, true},
		{AnswerSignal{Node: "yn", Value: pipeline.AnswerSkipped}, true},
		{AnswerSignal{Node: "yn", Value: "maybe"}, false},
		{AnswerSignal{Node: "yn"}, false},
		{AnswerSignal{Node: "ff", Text: "use the blue one"}, true},
		{AnswerSignal{Node: "ff", Value: "blue"}, true},
		{AnswerSignal{Node: "ff"}, false},
		{AnswerSignal{Node: "mc", Value: "S"}, true},
		{AnswerSignal{Node: "mc", Choice: "ship"}, true},
		{AnswerSignal{Node: "mc", Value: pipeline.AnswerSkipped}, true},
		{AnswerSignal{Node: "mc", Value: "yes"}, false},
		{AnswerSignal{Node: "mc", Text: "ship"}, false},
	} {
		w, err := g.check(c.a)
		switch {
		case c.ok && (err != nil || w == nil || w.q.NodeID != c.a.Node):
			t.Errorf("answer %+v: %v; want it taken by its gate", c.a, err)
		case !c.ok && (!errors.Is(err, ErrNoChoice) || !errors.Is(answerRefusal(answerFailure(err)), ErrNoChoice)):
			t.Errorf("answer %+v: %v; want ErrNoChoice, also past the workflow", c.a, err)
		}
	}
	// The cap counts Value too.
	g.max = 64
	if _, err := g.check(AnswerSignal{Node: "ff", Value: strings.Repeat("v", 64)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a Value over the cap: %v, want ErrTooLarge", err)
	}
}

const typedGatePipeline = `digraph typed {
  start [shape=Mdiamond]
  note  [shape=hexagon, prompt="Any note?", human.type=freeform]
  go    [shape=hexagon, prompt="Ship?", human.type=yes_no]
  ship  [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"1+1\"}"]
  redo  [shape=parallelogram, tool=calc, tool_input="{\"expression\": \"2+2\"}"]
  done  [shape=Msquare]
  start -> note -> go
  go -> ship [label="yes"]
  go -> redo [label="no"]
  ship -> done
  redo -> done
}`

// A durable run's gates take every answer type: a freeform gate its text,
// a yes/no gate a Value of no (routing to its no edge); and a Value of
// skipped fails the gate, as it does locally.
func TestGateAnswerValueDurable(t *testing.T) {
	c := dev(t)
	queue := startWorker(t, c, loadConfig(t, "", planReplies...))
	ctx := context.Background()

	run := startPipeline(t, c, queue, typedGatePipeline, PipelineInput{})
	if _, q := waitQuestion(t, c, run); q.NodeID != "note" || q.Type != pipeline.QuestionFreeform {
		t.Fatalf("question %+v, want note's freeform", q)
	}
	if err := AnswerGate(ctx, c, run.GetID(), 0, AnswerSignal{Node: "note", Text: "mind the gap"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, q := waitQuestion(t, c, run); q.NodeID == "go" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gate go was never asked")
		}
	}
	if err := AnswerGate(ctx, c, run.GetID(), 0, AnswerSignal{Node: "go", Value: "perhaps"}); !errors.Is(err, ErrNoChoice) {
		t.Errorf("a yes/no answer of perhaps: %v; want ErrNoChoice", err)
	}
	if err := AnswerGate(ctx, c, run.GetID(), 0, AnswerSignal{Node: "go", Value: pipeline.AnswerNo}); err != nil {
		t.Fatal(err)
	}
	got := pipelineResult(t, run)
	checkPath(t, "the typed run", got, "redo", "ship")
	checkHumanText(t, "the typed run", got, "mind the gap")

	run = startPipeline(t, c, queue, typedGatePipeline, PipelineInput{})
	waitQuestion(t, c, run)
	if err := AnswerGate(ctx, c, run.GetID(), 0, AnswerSignal{Node: "note", Value: pipeline.AnswerSkipped}); err != nil {
		t.Fatal(err)
	}
	got = pipelineResult(t, run)
	if got.Result == nil || got.Result.State == pipeline.RunSuccess {
		t.Fatalf("the skipped run: %+v; want it to fail at note", got.Result)
	}
	checkPath(t, "the skipped run", got, "note", "go", "ship", "redo")
}
