package serve

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/pipeline"
)

// Event kinds the server adds to a run's stream beside the runner's.
const (
	// KindRunEnded is the last event of a run's goroutine: the state it
	// ended in. A stream ends after it unless the run was resumed.
	KindRunEnded = "run.ended"
	// KindRunResumed starts the events of a resume.
	KindRunResumed = "run.resumed"
	// KindGap tells a client that resumed from an event the ring no
	// longer holds which is the first one it still has.
	KindGap = "gap"
	// KindOverflow is the last event a subscriber gets when it fell
	// behind the ring: it is dropped, and may reconnect with
	// Last-Event-ID (it will get a gap).
	KindOverflow = "overflow"
)

// maxMessage bounds an event's message on the wire: a stage's failure
// reason can be a model's whole answer.
const maxMessage = 8 << 10

// Event is a run's event on the wire: the data of an SSE event, and of the
// ring a stream resumes from.
type Event struct {
	Seq        int64                `json:"seq"`
	Kind       string               `json:"kind"`
	RunID      string               `json:"run_id"`
	NodeID     string               `json:"node_id,omitempty"`
	Branch     string               `json:"branch,omitempty"`
	Attempt    int                  `json:"attempt,omitempty"`
	Status     pipeline.StageStatus `json:"status,omitempty"`
	Message    string               `json:"message,omitempty"`
	Time       time.Time            `json:"time"`
	DurationNS time.Duration        `json:"duration_ns,omitempty"`
	Usage      *pipeline.Usage      `json:"usage,omitempty"`
	// Agent is a stage agent's event (kind "agent"), in short.
	Agent *AgentEvent `json:"agent,omitempty"`
	// State is the run's state (run.ended).
	State string `json:"state,omitempty"`
}

// AgentEvent is what a stream carries of a stage agent's event.
type AgentEvent struct {
	Kind    string `json:"kind"`
	Step    int    `json:"step,omitempty"`
	Action  string `json:"action,omitempty"`
	Message string `json:"message,omitempty"`
}

// wireEvent converts a runner's event.
func wireEvent(ev pipeline.Event) Event {
	out := Event{Kind: string(ev.Kind), RunID: ev.RunID, NodeID: ev.NodeID, Branch: ev.Branch, Attempt: ev.Attempt,
		Status: ev.Status, Message: safetext.Truncate(ev.Message, maxMessage), Time: ev.Time.UTC(), DurationNS: ev.Duration}
	if ev.Usage != (pipeline.Usage{}) {
		u := ev.Usage
		out.Usage = &u
	}
	if ev.Agent != nil {
		out.Agent = &AgentEvent{Kind: string(ev.Agent.Kind), Step: ev.Agent.Step, Action: ev.Agent.Action,
			Message: safetext.Truncate(ev.Agent.Message, maxMessage)}
	}
	return out
}

// entry is one event in the ring, encoded once for every subscriber.
type entry struct {
	seq   int64
	kind  string
	data  []byte
	final bool // run.ended
}

// eventLog is a run's events: a ring bounded by count and bytes, which
// subscribers read at their own pace. Appending never waits for a
// subscriber: it wakes them all by closing a channel.
type eventLog struct {
	maxEvents, maxBytes int

	mu      sync.Mutex
	entries []entry // oldest first
	bytes   int
	last    int64         // the last seq given (0: none)
	wake    chan struct{} // closed at the next append
}

func newEventLog(maxEvents, maxBytes int) *eventLog {
	return &eventLog{maxEvents: maxEvents, maxBytes: maxBytes, wake: make(chan struct{})}
}

// add appends ev, numbering it, and evicts the oldest events past the
// bounds (the newest is always kept).
func (l *eventLog) add(ev Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	ev.Seq = l.last
	data, err := json.Marshal(ev)
	if err != nil { // a cost that is not a number
		data = []byte(`{"seq":` + strconv.FormatInt(ev.Seq, 10) + `,"kind":"error"}`)
	}
	l.entries = append(l.entries, entry{seq: ev.Seq, kind: ev.Kind, data: data, final: ev.Kind == KindRunEnded})
	l.bytes += len(data)
	drop := 0
	for len(l.entries)-drop > 1 && (len(l.entries)-drop > l.maxEvents || l.bytes > l.maxBytes) {
		l.bytes -= len(l.entries[drop].data)
		drop++
	}
	if drop > 0 {
		// A new backing array now and then, so that the evicted entries'
		// data is not held by the old one.
		if cap(l.entries) > 2*l.maxEvents {
			l.entries = append([]entry(nil), l.entries[drop:]...)
		} else {
			clear(l.entries[:drop])
			l.entries = l.entries[drop:]
		}
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// since returns the events after seq after, the first seq the ring still
// holds (last+1 when it is empty), the last seq given and a channel closed
// at the next append.
func (l *eventLog) since(after int64) (events []entry, first, last int64, wake <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last = l.last
	first = l.last + 1
	if len(l.entries) > 0 {
		first = l.entries[0].seq
	}
	i := 0
	if after >= first {
		i = int(after - first + 1)
	}
	if i < len(l.entries) {
		events = append(events, l.entries[i:]...)
	}
	return events, first, last, l.wake
}
