package pipeline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"strings"
	"sync"

	"github.com/morphhost/morph/internal/safetext"
)

// ConsoleInterviewer asks on a terminal: it prints the question and its
// choices on Out and reads a line from In. A multiple-choice question is
// asked again until the answer names a choice (its key, label or target),
// a yes/no or confirmation question until the answer is y, yes, n, no or
// names one of its two choices, and a freeform question takes the line as
// it is; an empty line takes the default. Labels come from the DOT file,
// so they are printed escaped.
type ConsoleInterviewer struct {
	In  io.Reader
	Out io.Writer

	once    sync.Once
	lines   chan string
	readErr error // why the reader stopped, set before lines closes
	// asking makes gates of parallel branches ask one after the other, so
	// an answer goes to the question on the screen.
	asking sync.Mutex
}

// Ask asks on the console.
func (c *ConsoleInterviewer) Ask(ctx context.Context, q Question) (Answer, error) {
	c.asking.Lock()
	defer c.asking.Unlock()
	c.once.Do(func() {
		// One reader for the interviewer's life: a read cannot be
		// abandoned, so a timed-out question's reader serves the next one.
		c.lines = make(chan string)
		go func() {
			sc := bufio.NewScanner(c.In)
			sc.Buffer(make([]byte, 0, 4096), maxAnswerBytes)
			for sc.Scan() {
				c.lines <- sc.Text()
			}
			c.readErr = sc.Err() // bufio.ErrTooLong: a line past maxAnswerBytes
			close(c.lines)
		}()
	})
	// The question may hold lines (a model's words, expanded into it):
	// indented, so none can pass for a choice.
	text := strings.ReplaceAll(safetext.Escape(q.Text), "\n", "\n    | ")
	fmt.Fprintf(c.Out, "\n[%s] %s\n", safetext.Line(q.NodeID, 100), text)
	for _, ch := range q.Choices {
		_, rest := Accelerator(ch.Label)
		fmt.Fprintf(c.Out, "  [%s] %s\n", safetext.Line(ch.Key, 20), safetext.Line(rest, 200))
	}
	prompt := map[QuestionType]string{QuestionMultipleChoice: "choice", QuestionYesNo: "[Y/N]",
		QuestionConfirmation: "confirm [Y/N]", QuestionFreeform: ">"}[q.Kind()]
	if q.Default != "" {
		prompt += " (default " + safetext.Line(q.Default, 200) + ")"
	}
	if q.Timeout > 0 {
		prompt += fmt.Sprintf(" [%s]", q.Timeout)
	}
	for {
		fmt.Fprint(c.Out, prompt+": ")
		select {
		case <-ctx.Done():
			fmt.Fprintln(c.Out)
			return Answer{}, ctx.Err()
		case line, ok := <-c.lines:
			if !ok && c.readErr != nil {
				return Answer{}, fmt.Errorf("reading the answer (at most %d KiB a line): %w", maxAnswerBytes>>10, c.readErr)
			}
			if !ok {
				return Answer{}, errors.New("standard input closed before an answer (use --yes to approve gates without asking)")
			}
			line = strings.TrimSpace(line)
			if line == "" && q.Default != "" {
				return Answer{Choice: q.Default}, nil
			}
			switch q.Kind() {
			case QuestionFreeform:
				return Answer{Text: line}, nil
			case QuestionYesNo, QuestionConfirmation:
				if v, ok := yesNoValue(q, line); ok {
					return Answer{Value: v}, nil
				}
				fmt.Fprintf(c.Out, "answer y or n, not: %s\n", safetext.Line(line, 100))
				continue
			}
			if _, ok := matchChoice(q.Choices, line); ok {
				return Answer{Choice: line}, nil
			}
			fmt.Fprintf(c.Out, "not a choice: %s\n", safetext.Line(line, 100))
		}
	}
}

// Match finds the choice an answer names, as a human gate does: its key,
// its label (normalised) or its target.
func (q Question) Match(answer string) (Choice, bool) { return matchChoice(q.Choices, answer) }

// matchChoice finds the choice an answer names: its key, its label
// (normalised), or its target.
func matchChoice(choices []Choice, answer string) (Choice, bool) {
	a := strings.TrimSpace(answer)
	for _, c := range choices {
		if strings.EqualFold(a, c.Key) {
			return c, true
		}
	}
	na := NormalizeLabel(a)
	for _, c := range choices {
		if na != "" && na == NormalizeLabel(c.Label) || a != "" && a == c.To { // a yes/no question's No may lead nowhere (To "")
			return c, true
		}
	}
	return Choice{}, false
}

// maxAnswerBytes bounds the text of an answer a gate keeps (the context,
// answer.md, interviews.jsonl) and a console line it reads: a pasted log
// or a hostile client's megabytes are cut, saying so.
const maxAnswerBytes = 64 << 10

// humanModes are the values of tracker's mode, and but for "choice" of a
// gate's human.type, with the type each means.
var humanModes = map[string]QuestionType{
	"multiple_choice": QuestionMultipleChoice, "choice": QuestionMultipleChoice,
	"yes_no": QuestionYesNo, "confirmation": QuestionConfirmation, "freeform": QuestionFreeform,
}

// gateType is a human gate's question type: human.type, else tracker's
// mode (whose unknown values, as in tracker, ask multiple choice), else
// multiple choice.
func gateType(n *Node) (QuestionType, error) {
	if v := strings.TrimSpace(n.Attrs["human.type"]); v != "" {
		if t, ok := humanModes[v]; ok && v != "choice" {
			return t, nil
		}
		return "", fmt.Errorf("human gate %s: human.type=%q is not a question type (multiple_choice, yes_no, confirmation or freeform)", n.ID, safetext.Line(v, 100))
	}
	if t, ok := humanModes[strings.TrimSpace(n.Attrs["mode"])]; ok {
		return t, nil
	}
	return QuestionMultipleChoice, nil
}

// yesNoEdges are where a yes/no gate's answers lead: the edges labelled
// yes and no ("Yes", "[Y] Approve", "[N] Revise"), else, when no edge has
// a condition, the first and second edges. When edges have conditions
// (tracker's gates route on outcome=success and outcome=fail), yes is a
// SUCCESS and no a FAIL whatever the labels, so the conditions route.
type yesNoEdges struct {
	yes, no     *Edge
	conditioned bool
}

func mapYesNo(edges []*Edge) yesNoEdges {
	var m yesNoEdges
	for _, e := range edges {
		if strings.TrimSpace(e.Attrs["condition"]) != "" {
			m.conditioned = true
		}
	}
	for _, e := range edges {
		label := strings.TrimSpace(e.Label())
		key, _, prefixed := acceleratorPrefix(label)
		switch n := NormalizeLabel(label); {
		case m.yes == nil && (n == AnswerYes || prefixed && strings.EqualFold(key, "Y")):
			m.yes = e
		case m.no == nil && (n == AnswerNo || prefixed && strings.EqualFold(key, "N")):
			m.no = e
		}
	}
	if m.yes == nil && m.no == nil && !m.conditioned && len(edges) > 0 {
		m.yes = edges[0]
		if len(edges) > 1 {
			m.no = edges[1]
		}
	}
	return m
}

// choices are the question's Yes and No, labelled as their edges are.
func (m yesNoEdges) choices() []Choice {
	ch := func(key, label string, e *Edge) Choice {
		if e == nil {
			return Choice{Key: key, Label: label}
		}
		c := humanChoices([]*Edge{e})[0]
		c.Key = key
		return c
	}
	return []Choice{ch("Y", "Yes", m.yes), ch("N", "No", m.no)}
}

// yesNoValue reads s as a yes/no answer: y, yes, true, n, no, false, or
// one of the question's two choices.
func yesNoValue(q Question, s string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "y", "yes", "true":
		return AnswerYes, true
	case "n", "no", "false":
		return AnswerNo, true
	}
	if c, ok := matchChoice(q.Choices, s); ok {
		if c.Key == "Y" {
			return AnswerYes, true
		}
		return AnswerNo, true
	}
	return "", false
}

// HumanHandler is a human gate (hexagon): it asks the Interviewer a
// question of the gate's human.type (spec 6.2) and routes on the answer. A
// multiple-choice gate routes to the outgoing edge picked; a yes/no or
// confirmation gate to its yes or no edge (see yesNoEdges), failing when
// no edge takes a no; a freeform gate keeps the text in the context
// (human.gate.text, human.response.<node>) and routes to the edge whose
// label is the text, else as the edges' conditions say. A skipped question
// fails the gate. On a timeout (the shorter of human.timeout and the
// node's timeout) it takes human.default_choice, else it asks to be
// retried. With a run directory, every question and answer is appended to
// interviews.jsonl there (RecordingInterviewer).
type HumanHandler struct {
	// Interviewer asks (nil: the Runner's, else AutoApprove).
	Interviewer Interviewer
}

// Type returns "wait.human".
func (*HumanHandler) Type() string { return TypeHuman }

// Execute asks and routes on the answer.
func (h *HumanHandler) Execute(ctx context.Context, node *Node, pctx *Context, _ *ArtifactStore) (*Outcome, error) {
	x := ExecutionFrom(ctx)
	qt, err := gateType(node)
	if err != nil {
		return Fail("%v", err), nil
	}
	q := Question{NodeID: node.ID, Type: qt, Text: ExpandVars(node.Prompt(), pctx), Default: node.Attrs["human.default_choice"]}
	if q.Text == "" {
		q.Text = node.ID
	}
	if q.Timeout, err = node.Duration("human.timeout", 0); err != nil {
		return nil, err
	}
	if t, err := node.Duration("timeout", 0); err != nil {
		return nil, err
	} else if t > 0 && (q.Timeout == 0 || t < q.Timeout) {
		q.Timeout = t
	}
	var edges []*Edge
	if x != nil && x.Graph != nil {
		edges = x.Graph.Outgoing(node.ID)
	}
	if len(edges) == 0 {
		return Fail("human gate %s has no outgoing edges to choose from", node.ID), nil
	}
	yn := mapYesNo(edges)
	switch qt {
	case QuestionMultipleChoice:
		q.Choices = humanChoices(edges)
	case QuestionYesNo, QuestionConfirmation:
		q.Choices = yn.choices()
	}
	_ = x.WriteStageFile("question.md", []byte(questionFile(q))) // for people: a failed write does not fail the gate
	x.Emit(Event{Kind: EventInterviewStarted, NodeID: node.ID, Message: q.Text})
	ans, out, err := h.ask(ctx, x, q)
	if out != nil || err != nil {
		return out, err
	}
	_ = x.WriteStageFile("answer.md", []byte(answerFile(ans)))
	if ans.Value == AnswerSkipped {
		x.Emit(Event{Kind: EventInterviewDone, NodeID: node.ID, Message: AnswerSkipped})
		return Fail("human gate %s: the human skipped the question", node.ID), nil
	}
	ch, err := q.read(ans)
	if err != nil {
		return Fail("human gate %s: %v", node.ID, err), nil
	}
	switch qt {
	case QuestionYesNo, QuestionConfirmation:
		out = yn.outcome(node, ch, ans)
	case QuestionFreeform:
		out = freeformOutcome(node, ans, edges)
	default:
		out = &Outcome{Status: StatusSuccess, PreferredLabel: ch.Label, SuggestedNextIDs: []string{ch.To}, ContextUpdates: gateUpdates(ch, ans)}
	}
	msg := out.PreferredLabel
	if msg == "" {
		msg = string(out.Status)
	}
	x.Emit(Event{Kind: EventInterviewDone, NodeID: node.ID, Message: msg})
	return out, nil
}

// ask asks q through the gate's interviewer, under the question's timeout:
// the answer, or the outcome that ends the gate without one (a failure,
// a retry on a timeout without a default), or ctx's error.
func (h *HumanHandler) ask(ctx context.Context, x *Execution, q Question) (Answer, *Outcome, error) {
	var r *Runner
	if x != nil {
		r = x.Runner
	}
	actx, cancel := ctx, context.CancelFunc(func() {})
	if q.Timeout > 0 {
		actx, cancel = r.executor().WithTimeout(ctx, q.Timeout)
	}
	ans, err := h.interviewer(x, ctx).Ask(actx, q)
	cancel()
	if errors.Is(err, ErrInterviewRecord) {
		x.Emit(Event{Kind: EventWarning, NodeID: q.NodeID, Message: safetext.Line(err.Error(), 500)})
		err = nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return Answer{}, nil, ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) && !timedOut(actx) {
			return Answer{}, Fail("human gate %s: %s", q.NodeID, safetext.Line(err.Error(), 500)), nil
		}
		ans = Answer{Value: AnswerTimeout}
	}
	if ans.Value != AnswerTimeout {
		return ans, nil, nil
	}
	if q.Default == "" {
		x.Emit(Event{Kind: EventInterviewTimeout, NodeID: q.NodeID, Message: "no answer in time and no human.default_choice: the stage asks to be retried"})
		return Answer{}, &Outcome{Status: StatusRetry, FailureReason: fmt.Sprintf("no answer within %s and no human.default_choice", q.Timeout)}, nil
	}
	x.Emit(Event{Kind: EventInterviewTimeout, NodeID: q.NodeID, Message: "no answer in time: taking the default choice " + safetext.Line(q.Default, 200)})
	return Answer{Choice: q.Default}, nil, nil
}

// interviewer is who asks: the handler's, else the Runner's, else
// AutoApprove; recorded to the run directory's interviews.jsonl when the
// run has one (ctx is the gate's, without the question's timeout).
func (h *HumanHandler) interviewer(x *Execution, ctx context.Context) Interviewer {
	iv := h.Interviewer
	if iv == nil && x != nil && x.Runner != nil {
		iv = x.Runner.Interviewer
	}
	if iv == nil {
		iv = AutoApprove{}
	}
	if x != nil && x.RunDir != "" {
		iv = &RecordingInterviewer{Inner: iv, Path: filepath.Join(x.RunDir, InterviewsFile), clock: x.Runner.clock(), outer: ctx}
	}
	return iv
}

// gateUpdates are the context updates of a gate's answer. Spec 4.6:
// "human.gate.selected": selected.key, "human.gate.label": selected.label;
// human.choice is morph's older name of the label.
func gateUpdates(c Choice, ans Answer) map[string]any {
	updates := map[string]any{"human.choice": c.Label, KeyHumanGateSelected: c.Key, KeyHumanGateLabel: c.Label}
	if ans.Text != "" {
		updates["human.text"] = safetext.Truncate(ans.Text, maxAnswerBytes)
	}
	return updates
}

// outcome routes a yes/no or confirmation gate on ch, the Yes or No the
// answer picked: yes to its yes edge, no to its no edge; a no with no edge
// of its own (or where conditions route) fails the gate, "declined".
func (m yesNoEdges) outcome(node *Node, ch Choice, ans Answer) *Outcome {
	v, e := AnswerYes, m.yes
	if ch.Key == "N" {
		v, e = AnswerNo, m.no
	}
	updates := gateUpdates(ch, ans)
	updates["human.gate.answer"] = v
	if v == AnswerNo && (e == nil || m.conditioned) {
		return &Outcome{Status: StatusFail, FailureReason: "declined at gate " + node.ID, ContextUpdates: updates}
	}
	out := &Outcome{Status: StatusSuccess, ContextUpdates: updates}
	if e != nil {
		out.PreferredLabel, out.SuggestedNextIDs = ch.Label, []string{e.To}
	}
	return out
}

// freeformOutcome keeps a freeform gate's text (its Text, else Value,
// else Choice) and routes to the edge whose label (or target) is the
// text; else it suggests none, and the edges' conditions and weights
// route.
func freeformOutcome(node *Node, ans Answer, edges []*Edge) *Outcome {
	text := ans.Text
	for _, s := range []string{ans.Value, ans.Choice} {
		if text == "" {
			text = s
		}
	}
	text = safetext.Truncate(text, maxAnswerBytes)
	updates := map[string]any{"human.text": text, "human.gate.text": text, "human.response." + node.ID: text}
	out := &Outcome{Status: StatusSuccess, ContextUpdates: updates}
	nt := NormalizeLabel(text)
	for _, c := range humanChoices(edges) {
		if nt != "" && nt == NormalizeLabel(c.Label) || strings.TrimSpace(text) == c.To {
			maps.Copy(updates, gateUpdates(c, Answer{})) // the gate's keys; human.text stays the text
			out.PreferredLabel, out.SuggestedNextIDs = c.Label, []string{c.To}
			break
		}
	}
	return out
}

// questionFile is a gate's question.md: the question and its choices,
// escaped (the text may hold a model's words).
func questionFile(q Question) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s (%s)\n\n%s\n", q.NodeID, q.Kind(), safetext.Escape(safetext.Truncate(q.Text, maxAnswerBytes)))
	if len(q.Choices) > 0 {
		b.WriteString("\n")
	}
	for _, c := range q.Choices {
		fmt.Fprintf(&b, "- [%s] %s -> %s\n", safetext.Line(c.Key, 20), safetext.Line(c.Label, 200), safetext.Line(c.To, 200))
	}
	if q.Default != "" {
		fmt.Fprintf(&b, "\ndefault: %s\n", safetext.Line(q.Default, 200))
	}
	return b.String()
}

// answerFile is a gate's answer.md, escaped and cut.
func answerFile(a Answer) string {
	var b strings.Builder
	for _, f := range [][2]string{{"value", a.Value}, {"choice", a.Choice}} {
		if f[1] != "" {
			fmt.Fprintf(&b, "%s: %s\n", f[0], safetext.Line(f[1], 200))
		}
	}
	if a.Text != "" {
		fmt.Fprintf(&b, "\n%s\n", safetext.Escape(safetext.Truncate(a.Text, maxAnswerBytes)))
	}
	return b.String()
}
