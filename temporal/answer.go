package temporal

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/morphhost/morph/internal/safetext"
)

// The refusals of an answer to a human gate (UpdateAnswer) besides its
// size (ErrTooLarge), matched with errors.Is.
var (
	// ErrNoGate: no human gate of the pipeline waits at the answer's node.
	ErrNoGate = errors.New("no human gate waits at that node")
	// ErrNoChoice: the answer does not answer its gate's question: it
	// names none of its choices (key, label or target), is neither yes
	// nor no at a yes/no gate, or is empty (pipeline.Question.Check).
	ErrNoChoice = errors.New("the answer names none of the gate's choices")
	// ErrAnswered: the gate has an answer already.
	ErrAnswered = errors.New("the gate has an answer already")
)

// answerRefusals name the refusals for the ApplicationError (its Type)
// that carries them from the workflow to the sender.
var answerRefusals = []struct {
	typ string
	err error
}{{"AnswerNoGate", ErrNoGate}, {"AnswerNoChoice", ErrNoChoice}, {"AnswerAnswered", ErrAnswered}}

// answerTooLarge is the Type of the ApplicationError carrying a
// *TooLargeError (its details).
const answerTooLarge = "AnswerTooLarge"

// answerFailure is the refusal err as the workflow gives it to the
// sender: an ApplicationError that answerRefusal turns back into err.
func answerFailure(err error) error {
	var tl *TooLargeError
	if errors.As(err, &tl) {
		return temporal.NewApplicationError(err.Error(), answerTooLarge, *tl)
	}
	for _, r := range answerRefusals {
		if errors.Is(err, r.err) {
			return temporal.NewApplicationError(err.Error(), r.typ)
		}
	}
	return err
}

// answerRefusal is the refusal an update's failure err carries (from
// answerFailure), or err.
func answerRefusal(err error) error {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return err
	}
	if appErr.Type() == answerTooLarge {
		var tl TooLargeError
		if appErr.Details(&tl) == nil {
			return &tl
		}
	}
	for _, r := range answerRefusals {
		if appErr.Type() == r.typ {
			return r.err
		}
	}
	return err
}

// AnswerGate answers a human gate of pipeline workflow id (its current
// run) with an UpdateAnswer, and returns once the gate took the answer.
// An answer larger than maxBytes (answer_max_kb, AnswerMaxBytes; 0 is its
// default) is refused before it is sent, as the workflow would; the
// workflow refuses one larger than its own cap (a *TooLargeError), for no
// gate waiting (ErrNoGate), naming none of the gate's choices
// (ErrNoChoice), or for a gate answered already (ErrAnswered), leaving
// nothing of it in its history. A failure of a busy service (an RPC's
// deadline, unavailable) is retried while ctx lives, with the same update
// ID, which the workflow dedupes.
func AnswerGate(ctx context.Context, c client.Client, id string, maxBytes int, a AnswerSignal) error {
	err := checkAnswer(a, maxBytes)
	if err == nil {
		// one update ID for every attempt: a request that reached the
		// workflow and whose reply was lost (a busy service) is deduped by
		// it when sent again, not refused as a gate answered already
		updateID := "answer-" + rand.Text()
		var h client.WorkflowUpdateHandle
		h, err = retryTransient(ctx, func() (client.WorkflowUpdateHandle, error) {
			return c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateID: updateID, UpdateName: UpdateAnswer, Args: []any{a},
				WaitForStage: client.WorkflowUpdateStageCompleted})
		})
		if err == nil {
			_, err = retryTransient(ctx, func() (struct{}, error) { return struct{}{}, h.Get(ctx, nil) })
		}
	}
	if err != nil {
		return fmt.Errorf("answering the gate %s of workflow %s: %w", safetext.Line(a.Node, 100), id, answerRefusal(err))
	}
	return nil
}
