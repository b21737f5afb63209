package abi

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Adding the stage handler leaves the engine's and the middleware's hook
// lists as they were: the engine and the host derive their wiring from them.
func TestHookNamesByKind(t *testing.T) {
	engine := []string{HookBuildPrompt, HookBuildParams, HookOnToolSuccess, HookFallbackFinal}
	middleware := []string{HookOnTurnStart, HookOnAction, HookOnObservation, HookOnFinal, HookBeforeRun, HookAfterRun,
		HookBeforeToolCall, HookAfterToolCall}
	for _, c := range []struct {
		kind HookKind
		want []string
	}{{EngineHook, engine}, {Middleware, middleware}, {StageHandler, []string{HookHandleStage}}} {
		if got := HookNames(c.kind); !slices.Equal(got, c.want) {
			t.Errorf("HookNames(%s) = %v, want %v", c.kind, got, c.want)
		}
	}
	h, ok := HookByName(HookHandleStage)
	if !ok {
		t.Fatalf("HookByName(%q) found no hook", HookHandleStage)
	}
	if h.Export != ExportHandleStage {
		t.Errorf("HookByName(%q).Export = %q, want %q", HookHandleStage, h.Export, ExportHandleStage)
	}
	if got := h.Kind.String(); got != "stage handler" {
		t.Errorf("HookByName(%q).Kind = %q, want %q", HookHandleStage, got, "stage handler")
	}
}

// Check accepts what SPEC section 11 allows, up to each bound, and refuses
// each way past it, naming the field.
func TestStageOutcomeCheck(t *testing.T) {
	updates := func(n, size int) map[string]any {
		m := map[string]any{}
		for i := range n {
			m[fmt.Sprintf("k%02d", i)] = strings.Repeat("x", size)
		}
		return m
	}
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint("n", i)
		}
		return out
	}
	// 64 keys of 3 bytes with values of size+2 bytes (the quotes): the size
	// that fills MaxStageContextBytes exactly.
	full := MaxStageContextBytes/MaxStageContextUpdates - 3 - 2
	good := []StageOutcome{
		{Status: StageSuccess},
		{Status: StageFail, FailureReason: strings.Repeat("r", MaxStageTextBytes)},
		{Status: StagePartialSuccess, PreferredLabel: "needs fixes ✓", SuggestedNextIDs: ids(MaxStageSuggestedIDs)},
		{Status: StageRetry, ContextUpdates: updates(MaxStageContextUpdates, full)},
		{Status: StageSkipped, Notes: strings.Repeat("n", MaxStageTextBytes), ContextUpdates: map[string]any{
			"last_response": "ok", "verify.graph.x": nil, strings.Repeat("k", MaxStageNameBytes): []any{1, "two"}}},
	}
	for i, o := range good {
		if err := o.Check(); err != nil {
			t.Errorf("good outcome %d: %v", i, err)
		}
	}
	bad := []struct {
		o    StageOutcome
		want string
	}{
		{StageOutcome{}, `status "": want one of success, fail, partial_success, retry, skipped`},
		{StageOutcome{Status: "Success"}, `status "Success"`},
		{StageOutcome{Status: StageSuccess, PreferredLabel: "a\x1b[2Jb"}, `preferred_label: "a\x1b[2Jb" holds the character U+001B`},
		{StageOutcome{Status: StageSuccess, PreferredLabel: "a\u202eb"}, `preferred_label: "a\u202eb" holds the character U+202E`},
		{StageOutcome{Status: StageSuccess, SuggestedNextIDs: ids(MaxStageSuggestedIDs + 1)}, "suggested_next_ids: 17 ids, more than 16"},
		{StageOutcome{Status: StageSuccess, SuggestedNextIDs: []string{"a", ""}}, "suggested_next_ids[1]: is empty"},
		{StageOutcome{Status: StageSuccess, SuggestedNextIDs: []string{strings.Repeat("i", MaxStageNameBytes+1)}}, "is 257 bytes, more than 256"},
		{StageOutcome{Status: StageSuccess, SuggestedNextIDs: []string{"a\xffb"}}, `"a\xffb" is not UTF-8`},
		{StageOutcome{Status: StageSuccess, ContextUpdates: updates(MaxStageContextUpdates+1, 1)}, "context_updates: 65 keys, more than 64"},
		{StageOutcome{Status: StageSuccess, ContextUpdates: updates(MaxStageContextUpdates, full+1)}, "context_updates: more than 262144 bytes"},
		{StageOutcome{Status: StageSuccess, ContextUpdates: map[string]any{"": 1}}, "context_updates: key is empty"},
		{StageOutcome{Status: StageSuccess, ContextUpdates: map[string]any{"a\nb": 1}}, `context_updates: key "a\nb" holds`},
		{StageOutcome{Status: StageSuccess, ContextUpdates: map[string]any{"ok": 1, "outcome": "success"}}, `context_updates: key "outcome" is the pipeline runner's`},
		{StageOutcome{Status: StageSuccess, ContextUpdates: map[string]any{"internal.retry_count.x": 0}}, `key "internal.retry_count.x" is the pipeline runner's`},
		{StageOutcome{Status: StageSuccess, ContextUpdates: map[string]any{"f": func() {}}}, `context_updates: key "f": json: unsupported type`},
		{StageOutcome{Status: StageFail, FailureReason: strings.Repeat("r", MaxStageTextBytes+1)}, "failure_reason: 16385 bytes, more than 16384"},
		{StageOutcome{Status: StageSuccess, Notes: strings.Repeat("n", MaxStageTextBytes+1)}, "notes: 16385 bytes"},
	}
	for _, c := range bad {
		err := c.o.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%.80v) = %v, want an error saying %q", c.o, err, c.want)
		}
	}
	// A long guest value is quoted cut, so a message stays short.
	err := (&StageOutcome{Status: strings.Repeat("s", 1<<20)}).Check()
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("a 1 MiB status: error of %d bytes", len(err.Error()))
	}
}

// The runner's keys, exactly: keys beside them (a prefix without its dot,
// a key that merely contains one) are the stage's.
func TestReservedStageKey(t *testing.T) {
	for _, k := range []string{"outcome", "preferred_label", "current_node", "parallel.results", "base_url", "system_prompt", "graph.goal", "graph.", "internal.retry_count.n"} {
		if !ReservedStageKey(k) {
			t.Errorf("%q is not reserved", k)
		}
	}
	for _, k := range []string{"outcomes", "graph", "graphs.x", "x.internal.y", "last_response", "last_stage", "parallel", "verify.outcome"} {
		if ReservedStageKey(k) {
			t.Errorf("%q is reserved", k)
		}
	}
}
