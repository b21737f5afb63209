package temporal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
)

// A tool call with no answer (every attempt lost, or the result journal
// failing it) ends the turn with a *CallError naming the activity, rather
// than reaching the model as the tool's observation, which would have it
// call the tool again under a new call ID: the model is called once, and
// the lost call is tried as many times as the worker's [temporal]
// lost_attempts allows (the default when its Setup does not say, as a
// worker from before the key answers), the journaled one once. The error
// states the attempts allowed and the key.
func TestUnansweredCallEndsTheTurn(t *testing.T) {
	lost := temporal.NewApplicationError("the activity's attempt ended before its call did", AttemptLost)
	for _, c := range []struct {
		name     string
		fail     error
		config   string // the worker's [temporal] table, whose Setup's Timeouts the workflow gets; none: a Setup without Timeouts
		attempts int
		journal  bool
	}{
		{"every attempt lost, an old worker's Setup", lost, "", config.DefaultLostAttempts, false},
		{"every attempt lost, lost_attempts = 3", lost, "lost_attempts = 3\n", 3, false},
		{"the journal fails", temporal.NewNonRetryableApplicationError("result journal: disk full", journalFailure, nil), "", 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			setup := Setup{Tools: []abi.ToolSpec{{Name: "ledger", Description: "Appends.", Parameters: []byte(`{"type":"object"}`)}}}
			if c.config != "" {
				cfg, err := config.Load(appendConfig(t, writeConfig(t, `{"type":"final","final":{"thought":"t","output":1}}`), "\n[temporal]\n"+c.config))
				if err != nil {
					t.Fatal(err)
				}
				s, err := newActivities(t, cfg).Setup(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				setup.Timeouts = s.Timeouts
			}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(TurnWorkflow)
			env.RegisterActivity(&Activities{})
			env.OnActivity(acts.Setup, mock.Anything).Return(setup, nil)
			chats, tools := 0, 0
			env.OnActivity(acts.Chat, mock.Anything, mock.Anything).Return(func(context.Context, ChatRequest) (llm.Result, error) {
				chats++
				return llm.Result{Text: `{"type":"tool_call","tool_call":{"thought":"t","tool_name":"ledger","tool_params":{}}}`}, nil
			})
			env.OnActivity(acts.CallTool, mock.Anything, mock.Anything).Return(func(context.Context, ToolCall) (ToolResult, error) {
				tools++
				return ToolResult{}, c.fail
			})
			env.ExecuteWorkflow(TurnWorkflow, TurnInput{SessionID: "s", Task: "append"})
			var res TurnResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.Final != nil || !strings.Contains(res.Error, "call CallTool has no answer") {
				t.Errorf("turn ended with final %v, error %q: want the CallTool activity's *CallError", res.Final, res.Error)
			}
			if c.journal != strings.Contains(res.Error, "result journal failed it") {
				t.Errorf("error %q: journal failure %v", res.Error, c.journal)
			}
			if want := fmt.Sprintf("every attempt was lost (%d at most: [temporal] lost_attempts;", c.attempts); !c.journal && !strings.Contains(res.Error, want) {
				t.Errorf("error %q: want %q", res.Error, want)
			}
			if chats != 1 || tools != c.attempts {
				t.Errorf("%d model calls and %d tool attempts, want 1 and %d", chats, tools, c.attempts)
			}
		})
	}
}

// Once a call has no answer and aborts its turn, the calls the engine
// still asks for (on_final, after_run) are not made, nor counted: the
// session's numbers of its plugins' calls and of its model calls count
// the calls made, so that the session's next call, on the worker that
// served it, is not taken for moved.
func TestNoCountAfterAbort(t *testing.T) {
	calls := sessionCalls{}
	gctx, abort := withAbort(engine.WithSession(context.Background(), "s", 1), func(error) {})
	if cs := calls.of(gctx, "p"); cs.ID != "s" {
		t.Fatalf("a call before the abort: %+v", cs)
	}
	lost := &CallError{Activity: "CallTool", Err: errors.New("lost")}
	abort.abort(lost)
	if cs := calls.of(gctx, "p"); cs.ID != "" || calls["s"]["p"] != 1 {
		t.Errorf("a call after the abort: %+v, counts %v; want none made, one counted", cs, calls)
	}
	n := 3
	if _, err := (chatStub{calls: &n}).Chat(gctx, llm.Request{}); !errors.Is(err, lost) || n != 3 {
		t.Errorf("a model call after the abort: %v, count %d; want the abort's error, the count 3", err, n)
	}
}
