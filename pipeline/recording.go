package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/morphhost/morph/internal/safetext"
)

// InterviewsFile is the run directory's record of its human gates: one
// JSON line (a Recording) per question asked, appended as each is
// answered, so that a run's gates can be audited and replayed
// (LoadRecordings, ReplayInterviewer).
const InterviewsFile = "interviews.jsonl"

// maxRecordingLine bounds a line LoadRecordings reads: a recording's texts
// are cut to maxAnswerBytes, which JSON's escapes may make six times
// longer, so a longer line is not one morph wrote.
const maxRecordingLine = 4 << 20

// ErrInterviewRecord is RecordingInterviewer's error when it could not
// append a recording to its file: the answer came (and Ask returns it
// too), the audit trail lacks it. A human gate reports it as a warning
// event and goes on.
var ErrInterviewRecord = errors.New("interview not recorded")

// ErrNoRecording is ReplayInterviewer's error for a question the
// recordings do not answer.
var ErrNoRecording = errors.New("no recorded answer")

// Recording is one question a gate asked and its answer (spec 6.4's
// RecordingInterviewer pair). Err is the interviewer's error, if any; a
// timeout is recorded as an Answer of Value AnswerTimeout.
type Recording struct {
	Question   Question  `json:"question"`
	Answer     Answer    `json:"answer"`
	Err        string    `json:"error,omitempty"`
	AskedAt    time.Time `json:"asked_at"`
	AnsweredAt time.Time `json:"answered_at"`
}

// RecordingInterviewer asks Inner and records each question with its
// answer: in memory (Recordings), and appended to the file Path as one
// JSON line when Path is set (a run's interviews.jsonl: the human gates
// of a run with a run directory record there whatever their
// interviewer). Texts are cut to 64 KiB. A question whose run ended
// before an answer (context.Canceled, or a human gate's stage or run
// deadline) is not recorded: a resumed run asks it again. Used on its
// own, it records any deadline of Ask's context as a timeout.
type RecordingInterviewer struct {
	Inner Interviewer
	Path  string

	clock Clock // nil: the real one
	// outer is a human gate's context without the question's timeout:
	// when it ended too, the deadline was the stage's or the run's, not
	// the question timing out.
	outer context.Context
	mu    sync.Mutex
	recs  []Recording
}

// Ask asks Inner and records the pair. When the file cannot be written,
// it returns the answer with an error wrapping ErrInterviewRecord.
func (r *RecordingInterviewer) Ask(ctx context.Context, q Question) (Answer, error) {
	clock := r.clock
	if clock == nil {
		clock = realClock{}
	}
	rec := Recording{Question: q, AskedAt: clock.Now().UTC()}
	ans, err := r.Inner.Ask(ctx, q)
	if errors.Is(err, context.Canceled) || err != nil && r.outer != nil && r.outer.Err() != nil {
		return ans, err
	}
	rec.AnsweredAt, rec.Answer = clock.Now().UTC(), ans
	if err != nil {
		rec.Err = safetext.Truncate(err.Error(), 2000)
		if errors.Is(err, context.DeadlineExceeded) {
			rec.Answer = Answer{Value: AnswerTimeout}
		}
	}
	rec = rec.capped()
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	if r.Path == "" {
		return ans, err
	}
	b, merr := json.Marshal(rec)
	if merr == nil {
		merr = appendLine(r.Path, b)
	}
	if merr != nil && err == nil {
		return ans, fmt.Errorf("%w: %s: %w", ErrInterviewRecord, r.Path, merr)
	}
	return ans, err
}

// Recordings returns the pairs recorded so far, in the order answered.
func (r *RecordingInterviewer) Recordings() []Recording {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Recording(nil), r.recs...)
}

// capped is rec with its texts cut to maxAnswerBytes.
func (rec Recording) capped() Recording {
	cut := func(s *string) { *s = safetext.Truncate(*s, maxAnswerBytes) }
	cut(&rec.Question.Text)
	cut(&rec.Question.Default)
	cut(&rec.Answer.Value)
	cut(&rec.Answer.Choice)
	cut(&rec.Answer.Text)
	return rec
}

// appendMu makes the appends of parallel branches' gates whole lines.
var appendMu sync.Mutex

// appendLine appends b and a newline to the file path, creating it.
func appendLine(path string, b []byte) error {
	appendMu.Lock()
	defer appendMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	return errors.Join(err, f.Close())
}

// LoadRecordings reads a run's interviews.jsonl, line by line (a looping
// gate can make it large; a line is at most maxRecordingLine). A last line
// cut short (a crash while appending) is ignored; any other line that is
// not a recording is an error naming it.
func LoadRecordings(path string) ([]Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("interviews: %w", err)
	}
	defer f.Close()
	var recs []Recording
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, maxRecordingLine)
	sc.Split(scanLinesKeepingEnd)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec Recording
		if err := json.Unmarshal(line, &rec); err != nil {
			if !bytes.HasSuffix(line, []byte("\n")) {
				break // the torn tail of an append: only the last line lacks its newline
			}
			return nil, fmt.Errorf("interviews: %s:%d: %w", path, n, err)
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("interviews: %s: %w", path, err)
	}
	return recs, nil
}

// scanLinesKeepingEnd splits lines as bufio.ScanLines does, but keeps each
// line's newline, so that a last line without one can be told apart.
func scanLinesKeepingEnd(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i+1], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// ReplayInterviewer answers questions from recordings (a run's
// interviews.jsonl, LoadRecordings): each gate gets its recorded answers
// in the order they were given, a recorded timeout as a timeout and a
// recorded error as that error. A question with no recorded answer left
// is an error wrapping ErrNoRecording. It replays a run's path for a test,
// or answers a rerun's gates as a person did.
type ReplayInterviewer struct {
	mu     sync.Mutex
	byNode map[string][]Recording
}

// NewReplayInterviewer returns an interviewer that replays recs.
func NewReplayInterviewer(recs []Recording) *ReplayInterviewer {
	r := &ReplayInterviewer{byNode: map[string][]Recording{}}
	for _, rec := range recs {
		r.byNode[rec.Question.NodeID] = append(r.byNode[rec.Question.NodeID], rec)
	}
	return r
}

// Ask returns the gate's next recorded answer.
func (r *ReplayInterviewer) Ask(_ context.Context, q Question) (Answer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	left := r.byNode[q.NodeID]
	if len(left) == 0 {
		return Answer{}, fmt.Errorf("%w for gate %s", ErrNoRecording, q.NodeID)
	}
	rec := left[0]
	r.byNode[q.NodeID] = left[1:]
	if rec.Err != "" && rec.Answer.Value != AnswerTimeout {
		return Answer{}, errors.New(rec.Err)
	}
	return rec.Answer, nil
}
