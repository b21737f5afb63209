package pipeline

import (
	"errors"
	"fmt"

	"github.com/morphhost/morph/internal/safetext"
)

// ErrAnswerMismatch is Question.Check's refusal: the answer says nothing,
// or names nothing the question offers.
var ErrAnswerMismatch = errors.New("the answer does not answer the question")

// Check tells whether a answers q as a human gate reads it, so that an
// interviewer taking answers from elsewhere (a durable workflow's update,
// an HTTP client) refuses a bad one while the gate still waits, rather
// than the gate failing on it. Value skipped or timeout answers any
// question. A yes/no or confirmation question takes yes or no (y, true,
// a choice's key or label) in Value, else Choice, else Text; a freeform
// question any text (Text, else Value, else Choice); a multiple-choice
// question a Value or Choice naming one of its choices. The error wraps
// ErrAnswerMismatch.
func (q Question) Check(a Answer) error {
	if a.Value == AnswerSkipped || a.Value == AnswerTimeout {
		return nil
	}
	first := a.Value
	if first == "" {
		first = a.Choice
	}
	switch q.Kind() {
	case QuestionFreeform:
		if first == "" && a.Text == "" {
			return fmt.Errorf("%w: give the text", ErrAnswerMismatch)
		}
		return nil
	case QuestionYesNo, QuestionConfirmation:
		if first == "" {
			first = a.Text
		}
		if _, ok := yesNoValue(q, first); !ok {
			return fmt.Errorf("%w: %q is neither yes nor no", ErrAnswerMismatch, safetext.Line(first, 100))
		}
		return nil
	}
	if first == "" {
		return fmt.Errorf("%w: give a choice (its key, label or target)", ErrAnswerMismatch)
	}
	if _, ok := q.Match(first); !ok {
		return fmt.Errorf("%w: %q names none of the choices", ErrAnswerMismatch, safetext.Line(first, 100))
	}
	return nil
}
