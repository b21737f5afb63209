package pipeline

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Choice is one answer a human gate offers: an outgoing edge.
type Choice struct {
	Key   string `json:"key"`   // the accelerator: "Y" of "[Y] Yes"
	Label string `json:"label"` // the edge's label (its target when it has none)
	To    string `json:"to"`    // the edge's target
}

// Question is what a human gate asks.
type Question struct {
	NodeID  string        `json:"node_id"`
	Text    string        `json:"text"`
	Choices []Choice      `json:"choices"`
	Default string        `json:"default,omitempty"` // human.default_choice: taken on a timeout
	Timeout time.Duration `json:"timeout,omitempty"` // 0: none
}

// Answer is a human's answer: a choice's key, label or target, and free
// text if the interviewer takes any.
type Answer struct {
	Choice string `json:"choice"`
	Text   string `json:"text,omitempty"`
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

// AutoApprove answers every question with its default choice, else the
// first: morph pipeline run --yes, and a Runner with no Interviewer.
type AutoApprove struct{}

// Ask picks the default or the first choice.
func (AutoApprove) Ask(_ context.Context, q Question) (Answer, error) {
	if q.Default != "" {
		return Answer{Choice: q.Default}, nil
	}
	if len(q.Choices) == 0 {
		return Answer{}, errors.New("no choices to approve")
	}
	return Answer{Choice: q.Choices[0].Label}, nil
}

// QueueInterviewer answers from a queue an embedding host fills (Push),
// waiting for an answer when the queue is empty. Asked returns the
// questions asked so far, for a UI to show.
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
