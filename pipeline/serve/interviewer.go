package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/morphhost/morph/pipeline"
)

// ErrNotPending is the refusal of an answer to a question that is not
// waiting for one: never asked, answered already, or timed out.
var ErrNotPending = errors.New("the question is not pending (answered, timed out or never asked)")

// ErrBadAnswer is the refusal of an answer that says nothing or does not
// answer the question (pipeline.Question.Check): the gate's own error.
var ErrBadAnswer = pipeline.ErrBadAnswer

// PendingQuestion is a question waiting for an answer, with the id an
// answer names it by.
type PendingQuestion struct {
	QID string `json:"qid"`
	pipeline.Question
	AskedAt time.Time `json:"asked_at"`
	// TimeoutAt is when the gate stops waiting (absent: never).
	TimeoutAt *time.Time `json:"timeout_at,omitempty"`
}

// PendingInterviewer is an Interviewer whose questions wait for answers
// that come from elsewhere (an HTTP client): Ask registers the question and
// blocks until Answer answers it or ctx ends; Pending lists the questions
// waiting.
type PendingInterviewer struct {
	mu      sync.Mutex
	seq     int
	pending map[string]*waiting
}

type waiting struct {
	q      PendingQuestion
	answer chan pipeline.Answer // one buffered: Answer never blocks
}

// NewPendingInterviewer returns an interviewer with no questions.
func NewPendingInterviewer() *PendingInterviewer {
	return &PendingInterviewer{pending: map[string]*waiting{}}
}

// Ask registers q under a new qid ("<node>-<n>": n counts the questions
// this interviewer was asked) and waits for its answer.
func (p *PendingInterviewer) Ask(ctx context.Context, q pipeline.Question) (pipeline.Answer, error) {
	now := time.Now()
	w := &waiting{q: PendingQuestion{Question: q, AskedAt: now.UTC()}, answer: make(chan pipeline.Answer, 1)}
	if q.Timeout > 0 {
		t := now.Add(q.Timeout).UTC()
		w.q.TimeoutAt = &t
	}
	p.mu.Lock()
	p.seq++
	w.q.QID = q.NodeID + "-" + strconv.Itoa(p.seq)
	p.pending[w.q.QID] = w
	p.mu.Unlock()
	select {
	case a := <-w.answer:
		return a, nil
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.pending, w.q.QID)
		p.mu.Unlock()
		// An answer that raced the end is not lost silently: it was
		// accepted, so it is the answer.
		select {
		case a := <-w.answer:
			return a, nil
		default:
		}
		return pipeline.Answer{}, ctx.Err()
	}
}

// Pending returns the questions waiting, oldest first.
func (p *PendingInterviewer) Pending() []PendingQuestion {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PendingQuestion, 0, len(p.pending))
	for _, w := range p.pending {
		out = append(out, w.q)
	}
	slices.SortFunc(out, func(a, b PendingQuestion) int { return a.AskedAt.Compare(b.AskedAt) })
	return out
}

// Answer answers the question qid: ErrNotPending when it is not waiting,
// ErrBadAnswer when a says nothing or the gate would refuse it
// (pipeline.Question.Check: not yes or no, no choice of the question's, a
// "timeout"); a refused question stays pending. "skipped" is an answer: it
// fails the gate.
func (p *PendingInterviewer) Answer(qid string, a pipeline.Answer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.pending[qid]
	if w == nil {
		return fmt.Errorf("question %q: %w", qid, ErrNotPending)
	}
	if err := w.q.Check(a); err != nil {
		return err
	}
	delete(p.pending, qid)
	w.answer <- a
	return nil
}

// Len is the number of pending questions (what a status poll shows,
// without Pending's copy and sort).
func (p *PendingInterviewer) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}
