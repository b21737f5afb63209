package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gateTypes is a gate of each question type (%s: human.type) before two
// agent stages; hold is the heavier edge, which a freeform text that names
// no edge takes.
const gateTypes = `digraph p {
  start [shape=Mdiamond]
  gate [shape=hexagon, label="Ship it?", human.type="%s"]
  ship [prompt="ship"]; hold [prompt="hold"]
  done [shape=Msquare]
  start -> gate
  gate -> ship [label="Ship"]
  gate -> hold [label="Hold", weight=1]
  ship -> done; hold -> done
}`

func TestQuestionTypesByInterviewer(t *testing.T) {
	queue := func(a Answer) Interviewer {
		q := NewQueueInterviewer()
		q.Push(a)
		return q
	}
	console := func(in string) Interviewer {
		return &ConsoleInterviewer{In: strings.NewReader(in), Out: &strings.Builder{}}
	}
	for _, tc := range []struct {
		typ  QuestionType
		name string
		iv   Interviewer
		path string
	}{
		{QuestionMultipleChoice, "auto", AutoApprove{}, "ship"},
		{QuestionMultipleChoice, "queue", queue(Answer{Choice: "hold"}), "hold"},
		{QuestionMultipleChoice, "console", console("maybe\nH\n"), "hold"},
		{QuestionYesNo, "auto", AutoApprove{}, "ship"},
		{QuestionYesNo, "queue", queue(Answer{Value: AnswerNo}), "hold"},
		{QuestionYesNo, "console", console("perhaps\nn\n"), "hold"},
		{QuestionConfirmation, "auto", AutoApprove{}, "ship"},
		{QuestionConfirmation, "queue", queue(Answer{Value: AnswerYes}), "ship"},
		{QuestionConfirmation, "console", console("no\n"), "hold"},
		{QuestionFreeform, "auto", AutoApprove{}, "hold"}, // "auto-approved" names no edge: the weight routes
		{QuestionFreeform, "queue", queue(Answer{Text: "ship"}), "ship"},
		{QuestionFreeform, "console", console("Ship\n"), "ship"},
	} {
		t.Run(string(tc.typ)+"/"+tc.name, func(t *testing.T) {
			res := runGraph(t, &Runner{Backend: &fakeBackend{}, Interviewer: tc.iv}, strings.Replace(gateTypes, "%s", string(tc.typ), 1))
			if got, want := strings.Join(res.Path, ","), "start,gate,"+tc.path+",done"; got != want {
				t.Fatalf("path %s, want %s (%s: %s)", got, want, res.State, res.FailureReason)
			}
			if tc.typ == QuestionFreeform {
				text := map[string]string{"auto": "auto-approved", "queue": "ship", "console": "Ship"}[tc.name]
				if res.Context["human.response.gate"] != text || res.Context["human.gate.text"] != text {
					t.Errorf("freeform text in the context: %v, %v; want %q", res.Context["human.response.gate"], res.Context["human.gate.text"], text)
				}
			}
		})
	}
}

func TestAutoApproveByType(t *testing.T) {
	choices := []Choice{{Key: "A", Label: "Alpha", To: "a"}, {Key: "B", Label: "Beta", To: "b"}}
	for _, tc := range []struct {
		q    Question
		want Answer
	}{
		{Question{Choices: choices}, Answer{Value: "A", Choice: "Alpha"}},
		{Question{Type: QuestionMultipleChoice, Choices: choices, Default: "Beta"}, Answer{Choice: "Beta"}},
		{Question{Type: QuestionYesNo}, Answer{Value: AnswerYes}},
		{Question{Type: QuestionConfirmation}, Answer{Value: AnswerYes}},
		{Question{Type: QuestionFreeform}, Answer{Value: "auto-approved", Text: "auto-approved"}},
	} {
		if got, err := (AutoApprove{}).Ask(context.Background(), tc.q); err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.q.Kind(), got, err, tc.want)
		}
	}
}

func TestHumanGateDeclinedAndSkipped(t *testing.T) {
	one := `digraph p {
	  start [shape=Mdiamond]
	  gate [shape=hexagon, label="Deploy?", human.type="confirmation"]
	  deploy [prompt="deploy"]; done [shape=Msquare]
	  start -> gate -> deploy -> done
	}`
	q := NewQueueInterviewer()
	q.Push(Answer{Value: AnswerNo})
	res := runGraph(t, &Runner{Backend: &fakeBackend{}, Interviewer: q}, one)
	if res.State != RunFail || res.FailedNode != "gate" || !strings.Contains(res.FailureReason, "declined at gate gate") {
		t.Errorf("no at a gate with one edge: %s at %s: %s", res.State, res.FailedNode, res.FailureReason)
	}
	// Spec 4.6 step 4: a SKIPPED answer fails the gate, whatever its type.
	for _, typ := range []QuestionType{QuestionMultipleChoice, QuestionYesNo, QuestionFreeform} {
		q := NewQueueInterviewer()
		q.Push(Answer{Value: AnswerSkipped})
		res := runGraph(t, &Runner{Backend: &fakeBackend{}, Interviewer: q}, strings.Replace(gateTypes, "%s", string(typ), 1))
		if res.State != RunFail || res.FailedNode != "gate" || !strings.Contains(res.FailureReason, "skipped") {
			t.Errorf("%s skipped: %s at %s: %s", typ, res.State, res.FailedNode, res.FailureReason)
		}
	}
}

// TestYesNoTrackerGate runs a gate as tracker writes them: mode="yes_no"
// and edges routed by outcome conditions; no is a FAIL the condition takes.
func TestYesNoTrackerGate(t *testing.T) {
	src := `digraph p {
	  start [shape=Mdiamond]
	  gate [shape=hexagon, mode="yes_no", label="Approve?"]
	  commit [prompt="c"]; revise [prompt="r"]; done [shape=Msquare]
	  start -> gate
	  gate -> commit [label="[Y] Approve", condition="outcome=success", weight=2]
	  gate -> revise [label="[N] Revise", condition="outcome=fail"]
	  commit -> done; revise -> done
	}`
	g := mustParse(t, src)
	diags, err := (&Runner{}).Prepare(g.Clone())
	if err != nil {
		t.Fatal(err)
	}
	if !hasDiag(diags, RuleAttrValue, "human.type") {
		t.Errorf("mode: no warning suggesting human.type: %v", diags)
	}
	for answer, want := range map[string]string{AnswerYes: "commit", AnswerNo: "revise"} {
		q := NewQueueInterviewer()
		q.Push(Answer{Value: answer})
		res := runGraph(t, &Runner{Backend: &fakeBackend{}, Interviewer: q}, src)
		if got := strings.Join(res.Path, ","); got != "start,gate,"+want+",done" {
			t.Errorf("%s: path %s (%s)", answer, got, res.FailureReason)
		}
	}
	// tracker asks an unknown mode (its interview) as multiple choice: a
	// warning, and the gate picks an edge.
	interview := strings.Replace(src, `mode="yes_no"`, `mode="interview"`, 1)
	if diags, err := (&Runner{}).Prepare(mustParse(t, interview)); err != nil || !hasDiag(diags, RuleAttrValue, "multiple choice") {
		t.Errorf("mode=interview: %v, %v", diags, err)
	}
	q := NewQueueInterviewer()
	q.Push(Answer{Choice: "revise"})
	if res := runGraph(t, &Runner{Backend: &fakeBackend{}, Interviewer: q}, interview); q.Asked()[0].Kind() != QuestionMultipleChoice || res.Context[KeyHumanGateSelected] != "N" {
		t.Errorf("mode=interview: asked %+v, selected %v", q.Asked(), res.Context[KeyHumanGateSelected])
	}
	bad := strings.Replace(src, `mode="yes_no"`, `human.type="maybe"`, 1)
	if _, err := (&Runner{}).Prepare(mustParse(t, bad)); err == nil || !strings.Contains(err.Error(), "human.type") {
		t.Errorf("human.type=maybe: %v", err)
	}
}

func hasDiag(diags []Diagnostic, rule, text string) bool {
	for _, d := range diags {
		if d.Rule == rule && strings.Contains(d.Message+d.Fix, text) {
			return true
		}
	}
	return false
}

// twoGates asks a multiple-choice gate, then a freeform one, then a gate
// whose timeout takes its default.
const twoGates = `digraph p {
  start [shape=Mdiamond]
  pick [shape=hexagon, label="Which way?"]
  left [prompt="l"]; right [prompt="r"]
  why [shape=hexagon, human.type="freeform", label="Why?"]
  wait [shape=hexagon, human.type="yes_no", human.timeout="1ms", human.default_choice="no"]
  more [prompt="m"]
  done [shape=Msquare]
  start -> pick
  pick -> left [label="Left"]; pick -> right [label="Right"]
  left -> why; right -> why
  why -> wait
  wait -> more [label="Yes"]; wait -> done [label="No"]
  more -> done
}`

func TestInterviewsRecordedAndReplayed(t *testing.T) {
	q := NewQueueInterviewer()
	q.Push(Answer{Choice: "right"})
	q.Push(Answer{Text: "because\nit is shorter"})
	dir := filepath.Join(t.TempDir(), "run")
	first, err := (&Runner{Backend: &fakeBackend{}, Interviewer: q}).Run(context.Background(), mustParse(t, twoGates), RunConfig{RunDir: dir, Source: []byte(twoGates)})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(first.Path, ","); got != "start,pick,right,why,wait,done" {
		t.Fatalf("path %s (%s)", got, first.FailureReason)
	}
	recs, err := LoadRecordings(filepath.Join(dir, InterviewsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d recordings, want 3: %+v", len(recs), recs)
	}
	for i, want := range []struct {
		node string
		typ  QuestionType
		ans  Answer
	}{
		{"pick", QuestionMultipleChoice, Answer{Choice: "right"}},
		{"why", QuestionFreeform, Answer{Text: "because\nit is shorter"}},
		{"wait", QuestionYesNo, Answer{Value: AnswerTimeout}},
	} {
		r := recs[i]
		if r.Question.NodeID != want.node || r.Question.Type != want.typ || r.Answer != want.ans {
			t.Errorf("recording %d: %s %s %+v, want %s %s %+v", i, r.Question.NodeID, r.Question.Type, r.Answer, want.node, want.typ, want.ans)
		}
		if r.AskedAt.IsZero() || r.AnsweredAt.Before(r.AskedAt) {
			t.Errorf("recording %d: asked %v, answered %v", i, r.AskedAt, r.AnsweredAt)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "why", "answer.md")); err != nil || !strings.Contains(string(b), "it is shorter") {
		t.Errorf("why/answer.md: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "pick", "question.md")); err != nil || !strings.Contains(string(b), "Which way?") || !strings.Contains(string(b), "-> right") {
		t.Errorf("pick/question.md: %q, %v", b, err)
	}

	// The recordings replayed take the same path, with the same text.
	replay := NewReplayInterviewer(recs)
	second := runGraph(t, &Runner{Backend: &fakeBackend{}, Interviewer: replay}, twoGates)
	if got, want := strings.Join(second.Path, ","), strings.Join(first.Path, ","); got != want {
		t.Errorf("replayed path %s, want %s", got, want)
	}
	if second.Context["human.response.why"] != "because\nit is shorter" {
		t.Errorf("replayed text %v", second.Context["human.response.why"])
	}
	if _, err := replay.Ask(context.Background(), Question{NodeID: "pick"}); !errors.Is(err, ErrNoRecording) {
		t.Errorf("a question past the recordings: %v", err)
	}
}

func TestInterviewsHostileAnswer(t *testing.T) {
	src := strings.Replace(gateTypes, "%s", string(QuestionFreeform), 1)
	hostile := strings.Repeat("\x1b[2J\x00\r\x07 line\n", 10<<20/14) // 10 MiB of control characters
	q := NewQueueInterviewer()
	q.Push(Answer{Text: hostile, Choice: "\x1b]0;title\x07"})
	dir := filepath.Join(t.TempDir(), "run")
	res, err := (&Runner{Backend: &fakeBackend{}, Interviewer: q}).Run(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)})
	if err != nil || res.State != RunSuccess {
		t.Fatalf("run: %v, %+v", err, res)
	}
	if n := len(res.Context["human.gate.text"].(string)); n > maxAnswerBytes+64 {
		t.Errorf("the context keeps %d bytes of the answer, want at most %d", n, maxAnswerBytes+64)
	}
	line, err := os.ReadFile(filepath.Join(dir, InterviewsFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(line, []byte("\n")) != 1 || len(line) > maxRecordingLine/4 {
		t.Errorf("interviews.jsonl: %d lines, %d bytes", bytes.Count(line, []byte("\n")), len(line))
	}
	if bytes.ContainsAny(line[:len(line)-1], "\x1b\x00\r\n\x07") {
		t.Error("interviews.jsonl holds raw control characters")
	}
	recs, err := LoadRecordings(filepath.Join(dir, InterviewsFile))
	if err != nil || len(recs) != 1 || len(recs[0].Answer.Text) > maxAnswerBytes+64 {
		t.Fatalf("recordings: %d, %v", len(recs), err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "gate", "answer.md"))
	if err != nil || bytes.ContainsAny(md, "\x1b\x00\x07") || len(md) > 8*maxAnswerBytes {
		t.Errorf("answer.md: %d bytes, raw control characters: %v, %v", len(md), bytes.ContainsAny(md, "\x1b\x00\x07"), err)
	}
}

func TestConsoleHostileLine(t *testing.T) {
	var out strings.Builder
	c := &ConsoleInterviewer{In: strings.NewReader(strings.Repeat("\x1b[2J", 10<<20/4) + "\n"), Out: &out}
	_, err := c.Ask(context.Background(), Question{NodeID: "g", Type: QuestionFreeform, Text: "Why?"})
	if !errors.Is(err, bufio.ErrTooLong) {
		t.Errorf("a 10 MiB line: %v", err)
	}
	if strings.Contains(out.String(), "\x1b") {
		t.Error("the console echoed raw escapes")
	}
}

func TestLoadRecordingsDamage(t *testing.T) {
	dir := t.TempDir()
	good := `{"question":{"node_id":"g","type":"yes_no","text":"?","choices":null},"answer":{"value":"yes","choice":""},"asked_at":"2026-01-01T00:00:00Z","answered_at":"2026-01-01T00:00:01Z"}`
	torn := filepath.Join(dir, "torn.jsonl")
	if err := os.WriteFile(torn, []byte(good+"\n"+good[:40]), 0o644); err != nil {
		t.Fatal(err)
	}
	if recs, err := LoadRecordings(torn); err != nil || len(recs) != 1 || recs[0].Answer.Value != AnswerYes {
		t.Errorf("a torn last line: %+v, %v", recs, err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(good+"\n{not json\n"+good+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRecordings(bad); err == nil || !strings.Contains(err.Error(), "bad.jsonl:2") {
		t.Errorf("a bad line in the middle: %v", err)
	}
}

func TestRecordingInterviewerWriteFailure(t *testing.T) {
	r := &RecordingInterviewer{Inner: AutoApprove{}, Path: filepath.Join(t.TempDir(), "no", "such", "dir", InterviewsFile)}
	ans, err := r.Ask(context.Background(), Question{NodeID: "g", Type: QuestionYesNo})
	if !errors.Is(err, ErrInterviewRecord) || ans.Value != AnswerYes {
		t.Errorf("unwritable file: %+v, %v", ans, err)
	}
	if recs := r.Recordings(); len(recs) != 1 || recs[0].Answer.Value != AnswerYes {
		t.Errorf("in memory: %+v", recs)
	}
	// A gate goes on with the answer, warning.
	var warned bool
	events := &Runner{OnEvent: func(ev Event) {
		warned = warned || ev.Kind == EventWarning && strings.Contains(ev.Message, "not recorded")
	}}
	x := &Execution{Graph: mustParse(t, strings.Replace(gateTypes, "%s", "yes_no", 1)), run: &run{r: events, cp: &Checkpoint{}}}
	h := &HumanHandler{Interviewer: InterviewerFunc(func(ctx context.Context, q Question) (Answer, error) { return r.Ask(ctx, q) })}
	out, err := h.Execute(withExecution(context.Background(), x), x.Graph.Node("gate"), NewContext(), nil)
	if err != nil || out.Status != StatusSuccess || !warned {
		t.Errorf("gate: %+v, %v, warned %v", out, err, warned)
	}
}

// A gate whose stage (or run) deadline ends it before the question's own
// timeout records nothing: the human did not time out, and a replay must
// not take a timeout's default there.
func TestRecordingSkipsOuterDeadline(t *testing.T) {
	src := strings.Replace(gateTypes, "%s", "yes_no", 1)
	dir := t.TempDir()
	x := &Execution{Graph: mustParse(t, src), RunDir: dir, Runner: &Runner{}}
	x.Graph.Node("gate").Attrs["human.timeout"] = "1h"
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	h := &HumanHandler{Interviewer: NewQueueInterviewer()}
	if _, err := h.Execute(withExecution(ctx, x), x.Graph.Node("gate"), NewContext(), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the gate at its stage's deadline: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, InterviewsFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("interviews.jsonl after the stage's deadline: %q, %v; want none", b, err)
	}
}
