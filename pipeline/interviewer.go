package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/morphhost/morph/internal/safetext"
)

// Choice is one answer a human gate offers: an outgoing edge.
type Choice struct {
	Key   string `json:"key"`   // the accelerator: "Y" of "[Y] Yes"
	Label string `json:"label"` // the edge's label (its target when it has none)
	To    string `json:"to"`    // the edge's target
}

// QuestionType is what kind of answer a question takes (spec 6.2); on the
// wire it is its lowercase name.
type QuestionType string

// The question types. A gate's human.type attribute (or tracker's mode)
// chooses one; the zero value reads as QuestionMultipleChoice.
const (
	// QuestionMultipleChoice takes one of the gate's choices (its outgoing
	// edges): the default.
	QuestionMultipleChoice QuestionType = "multiple_choice"
	// QuestionYesNo takes yes or no.
	QuestionYesNo QuestionType = "yes_no"
	// QuestionConfirmation takes yes or no, as a confirmation of what the
	// question says is about to happen.
	QuestionConfirmation QuestionType = "confirmation"
	// QuestionFreeform takes free text.
	QuestionFreeform QuestionType = "freeform"
)

// Question is what a human gate asks.
type Question struct {
	NodeID string       `json:"node_id"`
	Type   QuestionType `json:"type"`
	Text   string       `json:"text"`
	// Choices are the gate's outgoing edges (multiple choice), or Yes and
	// No (yes_no, confirmation: To is the edge each leads to, "" when the
	// answer fails the gate); none for freeform.
	Choices []Choice      `json:"choices"`
	Default string        `json:"default,omitempty"` // human.default_choice: taken on a timeout
	Timeout time.Duration `json:"timeout,omitempty"` // 0: none
}

// Kind is the question's type, QuestionMultipleChoice when unset.
func (q Question) Kind() QuestionType {
	if q.Type == "" {
		return QuestionMultipleChoice
	}
	return q.Type
}

// The answer values of spec 6.3 (Answer.Value); a multiple-choice answer's
// value is the choice's key.
const (
	AnswerYes     = "yes"
	AnswerNo      = "no"
	AnswerSkipped = "skipped" // the human skipped the question: the gate fails
	AnswerTimeout = "timeout" // no answer in time: the gate's default, else a retry
)

// Answer is a human's answer: Value (AnswerYes, AnswerNo, AnswerSkipped,
// AnswerTimeout, or a choice's key), Choice (a choice's key, label or
// target) and Text (a freeform answer, or a note with a choice). A gate
// reads Value first, then Choice; a freeform gate reads Text, else Value.
type Answer struct {
	Value  string `json:"value,omitempty"`
	Choice string `json:"choice"`
	Text   string `json:"text,omitempty"`
}

// ErrBadAnswer is the refusal of an answer that does not answer its
// question: a yes/no answer that is neither, a choice the question does not
// offer, nothing at all, or a "timeout" given as an answer.
var ErrBadAnswer = errors.New("the answer does not answer the question")

// Check says whether a answers q as a human gate reads it, so that an
// answer from elsewhere (an HTTP client) is refused before it is taken
// rather than failing the gate after: a multiple-choice answer must name
// a choice (its Choice, else its Value: a key, label or target), a yes/no
// or confirmation answer must be yes or no (its first non-empty field of
// Value, Choice, Text), a freeform answer may be anything. AnswerSkipped
// is an answer (the gate fails on it); AnswerTimeout is not (only the
// gate's clock times out). The error wraps ErrBadAnswer.
func (q Question) Check(a Answer) error {
	_, err := q.read(a)
	return err
}

// read reads a as an answer to q: the choice it picks (a yes/no answer's
// Yes or No, whose keys are Y and N; none for freeform or a skip), or why
// it does not answer q.
func (q Question) read(a Answer) (Choice, error) {
	switch {
	case a == Answer{}:
		return Choice{}, fmt.Errorf("%w: the answer is empty: give a value, a choice or a text", ErrBadAnswer)
	case a.Value == AnswerTimeout:
		return Choice{}, fmt.Errorf("%w: %q is the gate's own clock running out, not an answer to give", ErrBadAnswer, AnswerTimeout)
	case a.Value == AnswerSkipped:
		return Choice{}, nil
	}
	switch q.Kind() {
	case QuestionFreeform:
		return Choice{}, nil
	case QuestionYesNo, QuestionConfirmation:
		for _, s := range []string{a.Value, a.Choice, a.Text} {
			if s == "" {
				continue
			}
			v, ok := yesNoValue(q, s)
			if !ok {
				return Choice{}, fmt.Errorf("%w: the answer %q is neither yes nor no", ErrBadAnswer, safetext.Line(s, 100))
			}
			i, ch := 0, Choice{Key: "Y", Label: "Yes"}
			if v == AnswerNo {
				i, ch = 1, Choice{Key: "N", Label: "No"}
			}
			if len(q.Choices) == 2 {
				ch = q.Choices[i]
			}
			return ch, nil
		}
		return Choice{}, fmt.Errorf("%w: the answer is empty, neither yes nor no", ErrBadAnswer)
	}
	pick := a.Choice
	if pick == "" {
		pick = a.Value
	}
	ch, ok := matchChoice(q.Choices, pick)
	if !ok {
		return Choice{}, fmt.Errorf("%w: the answer %q names none of its choices (give a choice's key, label or target)", ErrBadAnswer, safetext.Line(pick, 100))
	}
	return ch, nil
}

// Interviewer asks a person. Ask returns when they answer or ctx ends (the
// gate's timeout, or the run's end).
type Interviewer interface {
	Ask(ctx context.Context, q Question) (Answer, error)
}

// InterviewerFunc is an Interviewer made of a function, for embedding hosts
// that ask through their own UI.
type InterviewerFunc func(ctx context.Context, q Question) (Answer, error)

// Ask calls f.
func (f InterviewerFunc) Ask(ctx context.Context, q Question) (Answer, error) { return f(ctx, q) }

// AutoApprove approves every question (spec 6.4): yes to a yes/no or
// confirmation question, the default choice else the first to a multiple
// choice one, and to a freeform one the default, else "auto-approved".
// It is morph pipeline run --yes, and a Runner with no Interviewer.
type AutoApprove struct{}

// Ask approves q.
func (AutoApprove) Ask(_ context.Context, q Question) (Answer, error) {
	switch q.Kind() {
	case QuestionYesNo, QuestionConfirmation:
		return Answer{Value: AnswerYes}, nil
	case QuestionFreeform:
		text := q.Default
		if text == "" {
			text = "auto-approved"
		}
		return Answer{Value: text, Text: text}, nil
	}
	if q.Default != "" {
		return Answer{Choice: q.Default}, nil
	}
	if len(q.Choices) == 0 {
		return Answer{}, errors.New("no choices to approve")
	}
	return Answer{Value: q.Choices[0].Key, Choice: q.Choices[0].Label}, nil
}

// QueueInterviewer answers from a queue an embedding host fills (Push),
// waiting for an answer when the queue is empty. Asked returns the
// questions asked so far, for a UI to show.
//
// The spec's QueueInterviewer (6.4) answers SKIPPED when its queue is
// empty, which suits a pre-filled test queue; morph's waits for Push
// instead, because `morph pipeline serve` answers gates as HTTP clients
// post answers, after the question is asked. Push an Answer with Value
// AnswerSkipped to skip.
type QueueInterviewer struct {
	answers   chan Answer
	mu        sync.Mutex
	questions []Question
}

// NewQueueInterviewer returns an empty queue interviewer.
func NewQueueInterviewer() *QueueInterviewer {
	return &QueueInterviewer{answers: make(chan Answer, 64)}
}

// Push queues an answer; it blocks when 64 are queued.
func (q *QueueInterviewer) Push(a Answer) { q.answers <- a }

// Asked returns the questions asked so far.
func (q *QueueInterviewer) Asked() []Question {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]Question(nil), q.questions...)
}

// Ask records the question and takes the next answer.
func (q *QueueInterviewer) Ask(ctx context.Context, qu Question) (Answer, error) {
	q.mu.Lock()
	q.questions = append(q.questions, qu)
	q.mu.Unlock()
	select {
	case a := <-q.answers:
		return a, nil
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	}
}
