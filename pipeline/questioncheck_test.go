package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Question.Check reads an answer as the gate of its type does; a refusal
// wraps ErrBadAnswer and shows the answer escaped and cut. A timeout is the
// gate's own clock, never an answer to give.
func TestQuestionCheck(t *testing.T) {
	conf := Question{Type: QuestionConfirmation, Choices: []Choice{{Key: "Y", Label: "Yes", To: "go"}, {Key: "N", Label: "No"}}}
	free := Question{Type: QuestionFreeform}
	multi := Question{Choices: []Choice{{Key: "A", Label: "Approve", To: "ship"}, {Key: "R", Label: "Reject", To: "redo"}}}
	for _, c := range []struct {
		q  Question
		a  Answer
		ok bool
	}{
		{conf, Answer{Value: AnswerYes}, true},
		{conf, Answer{Choice: "n"}, true},
		{conf, Answer{Text: "No"}, true},
		{conf, Answer{Value: AnswerTimeout}, false},
		{conf, Answer{Value: "later"}, false},
		{conf, Answer{}, false},
		{free, Answer{Text: "x"}, true},
		{free, Answer{Choice: "x"}, true},
		{free, Answer{}, false}, // an answer that says nothing answers nothing
		{multi, Answer{Value: "R"}, true},
		{multi, Answer{Choice: "approve"}, true},
		{multi, Answer{Choice: "redo"}, true},
		{multi, Answer{Value: AnswerSkipped}, true},
		{multi, Answer{Value: "maybe", Choice: "A"}, true}, // Choice is read first, as the gate reads it
		{multi, Answer{Text: "A"}, false},
	} {
		err := c.q.Check(c.a)
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrBadAnswer) {
			t.Errorf("%s question, answer %+v: %v; want ok=%v", c.q.Kind(), c.a, err, c.ok)
		}
	}
	// An empty line at the console is no answer, not the No that leads
	// nowhere: the question is asked again.
	var out strings.Builder
	a, err := (&ConsoleInterviewer{In: strings.NewReader("\ny\n"), Out: &out}).Ask(context.Background(), conf)
	if err != nil || a.Value != AnswerYes {
		t.Errorf("console answer %+v, %v; want yes after an empty line (output %q)", a, err, out.String())
	}
	err = multi.Check(Answer{Choice: "\x1b[2J" + strings.Repeat("x", 1<<20)})
	if err == nil || strings.Contains(err.Error(), "\x1b") || len(err.Error()) > 400 {
		t.Errorf("a hostile choice: %d bytes: %.200q", len(err.Error()), err)
	}
}
