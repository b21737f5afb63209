package temporal

import (
	"errors"
	"fmt"

	"github.com/morphhost/morph/config"
)

// ErrTooLarge is matched (errors.Is) by the refusal of a turn's task or a
// human gate's answer larger than its [temporal] cap: a *TooLargeError.
var ErrTooLarge = errors.New("too large")

// TooLargeError is a turn's task or a gate's answer that a workflow
// refuses for its size: it names what, its size, the cap and the
// [temporal] key that sets it.
type TooLargeError struct {
	What      string // "a turn's task", "an answer to a human gate"
	Size, Max int    // in bytes
	Key       string // "temporal.turn_max_kb", ...
}

// Error says what was refused, its size and the cap, and names the key.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is %d bytes, more than %d: refused (raise %s to allow it)", e.What, e.Size, e.Max, e.Key)
}

// Is reports whether target is ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// CheckTask refuses a turn's task larger than l.MaxTaskBytes (the
// [temporal] table's turn_max_kb): before a turn is asked for, and in a
// session's workflow, the turn update's validator.
func (l SessionLimits) CheckTask(task string) error {
	if max := l.withDefaults().MaxTaskBytes; len(task) > max {
		return &TooLargeError{What: "a turn's task", Size: len(task), Max: max, Key: "temporal.turn_max_kb"}
	}
	return nil
}

// AnswerMaxBytes is the largest answer to a human gate that t's pipelines
// accept (answer_max_kb).
func AnswerMaxBytes(t config.Temporal) int { return t.WithDefaults().AnswerMaxKB << 10 }

// checkAnswer refuses an answer larger than max bytes (its node, choice
// and text); max 0 is the default.
func checkAnswer(a AnswerSignal, max int) error {
	if max <= 0 {
		max = AnswerMaxBytes(config.Temporal{})
	}
	if n := len(a.Node) + len(a.Value) + len(a.Choice) + len(a.Text); n > max {
		return &TooLargeError{What: "an answer to a human gate", Size: n, Max: max, Key: "temporal.answer_max_kb"}
	}
	return nil
}
