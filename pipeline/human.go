package pipeline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/morphhost/morph/internal/safetext"
)

// ConsoleInterviewer asks on a terminal: it prints the question and its
// choices on Out and reads a line from In, asking again until the answer
// names a choice (its key, label or target) or an empty line takes the
// default. Labels come from the DOT file, so they are printed escaped.
type ConsoleInterviewer struct {
	In  io.Reader
	Out io.Writer

	once  sync.Once
	lines chan string
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
			for sc.Scan() {
				c.lines <- sc.Text()
			}
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
	for {
		prompt := "choice"
		if q.Default != "" {
			prompt += " (default " + safetext.Line(q.Default, 200) + ")"
		}
		if q.Timeout > 0 {
			prompt += fmt.Sprintf(" [%s]", q.Timeout)
		}
		fmt.Fprint(c.Out, prompt+": ")
		select {
		case <-ctx.Done():
			fmt.Fprintln(c.Out)
			return Answer{}, ctx.Err()
		case line, ok := <-c.lines:
			if !ok {
				return Answer{}, errors.New("standard input closed before an answer (use --yes to approve gates without asking)")
			}
			line = strings.TrimSpace(line)
			if line == "" && q.Default != "" {
				return Answer{Choice: q.Default}, nil
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
		if na != "" && na == NormalizeLabel(c.Label) || a == c.To {
			return c, true
		}
	}
	return Choice{}, false
}

// HumanHandler is a human gate (hexagon): it asks the Interviewer to pick
// one of the outgoing edges and routes there. On a timeout (the shorter
// of human.timeout and the node's timeout) it takes human.default_choice,
// else it asks to be retried.
type HumanHandler struct {
	// Interviewer asks (nil: the Runner's, else AutoApprove).
	Interviewer Interviewer
}

// Type returns "wait.human".
func (*HumanHandler) Type() string { return TypeHuman }

// Execute asks and routes on the answer.
func (h *HumanHandler) Execute(ctx context.Context, node *Node, pctx *Context, _ *ArtifactStore) (*Outcome, error) {
	x := ExecutionFrom(ctx)
	q := Question{NodeID: node.ID, Text: ExpandVars(node.Prompt(), pctx), Default: node.Attrs["human.default_choice"]}
	if q.Text == "" {
		q.Text = node.ID
	}
	var err error
	if q.Timeout, err = node.Duration("human.timeout", 0); err != nil {
		return nil, err
	}
	if t, err := node.Duration("timeout", 0); err != nil {
		return nil, err
	} else if t > 0 && (q.Timeout == 0 || t < q.Timeout) {
		q.Timeout = t
	}
	if x != nil && x.Graph != nil {
		q.Choices = humanChoices(x.Graph.Outgoing(node.ID))
	}
	if len(q.Choices) == 0 {
		return Fail("human gate %s has no outgoing edges to choose from", node.ID), nil
	}
	iv := h.Interviewer
	if iv == nil && x != nil && x.Runner != nil {
		iv = x.Runner.Interviewer
	}
	if iv == nil {
		iv = AutoApprove{}
	}
	x.Emit(Event{Kind: EventInterviewStarted, NodeID: node.ID, Message: q.Text})
	actx, cancel := ctx, context.CancelFunc(func() {})
	if q.Timeout > 0 {
		var r *Runner
		if x != nil {
			r = x.Runner
		}
		actx, cancel = r.executor().WithTimeout(ctx, q.Timeout)
	}
	ans, err := iv.Ask(actx, q)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) && !timedOut(actx) {
			return Fail("human gate %s: %v", node.ID, err), nil
		}
		if q.Default == "" {
			x.Emit(Event{Kind: EventInterviewTimeout, NodeID: node.ID, Message: "no answer in time and no human.default_choice: the stage asks to be retried"})
			return &Outcome{Status: StatusRetry, FailureReason: fmt.Sprintf("no answer within %s and no human.default_choice", q.Timeout)}, nil
		}
		x.Emit(Event{Kind: EventInterviewTimeout, NodeID: node.ID, Message: "no answer in time: taking the default choice " + q.Default})
		ans = Answer{Choice: q.Default}
	}
	ch, ok := matchChoice(q.Choices, ans.Choice)
	if !ok {
		return Fail("human gate %s: the answer %q names none of its choices", node.ID, safetext.Line(ans.Choice, 100)), nil
	}
	x.Emit(Event{Kind: EventInterviewDone, NodeID: node.ID, Message: ch.Label})
	// Spec 4.6: "human.gate.selected": selected.key, "human.gate.label":
	// selected.label; human.choice is morph's older name of the label.
	updates := map[string]any{"human.choice": ch.Label, KeyHumanGateSelected: ch.Key, KeyHumanGateLabel: ch.Label}
	if ans.Text != "" {
		updates["human.text"] = ans.Text
	}
	return &Outcome{Status: StatusSuccess, PreferredLabel: ch.Label, SuggestedNextIDs: []string{ch.To}, ContextUpdates: updates}, nil
}
