package main

import (
	"reflect"
	"testing"

	"github.com/morphhost/morph/abi"
)

// The stage, natively: which key it reads, what passes and what fails, and
// that every outcome passes the host's checks.
func TestVerify(t *testing.T) {
	cases := []struct {
		name    string
		attrs   map[string]string
		context map[string]any
		status  string
		label   string
		reason  string
		updates map[string]any
	}{
		{"implement.output first", nil, map[string]any{"implement.output": "ok: 12 Tests Pass", "last_response": "nothing"},
			abi.StageSuccess, "", "", map[string]any{"v.passed": true, "v.attempts": 1}},
		{"last_response otherwise", map[string]string{"pass_label": "ship"}, map[string]any{"last_response": "all tests pass", "v.attempts": 2.0},
			abi.StageSuccess, "ship", "", map[string]any{"v.passed": true, "v.attempts": 3}},
		{"failures counted", nil, map[string]any{"last_response": "tests pass? no: 2 failed, 5 passed"},
			abi.StageFail, DefaultFailLabel, "last_response reports 2 failed", map[string]any{"v.passed": false, "v.attempts": 1}},
		{"no marker", map[string]string{"marker": "LGTM", "fail_label": "again"}, map[string]any{"last_response": "0 failed, looks fine"},
			abi.StageFail, "again", `last_response does not say "LGTM"`, map[string]any{"v.passed": false, "v.attempts": 1}},
		{"named key, not text", map[string]string{"check": "score", "marker": "42"}, map[string]any{"score": 42.0},
			abi.StageSuccess, "", "", map[string]any{"v.passed": true, "v.attempts": 1}},
		{"empty", map[string]string{"check": "review"}, map[string]any{},
			abi.StageFail, DefaultFailLabel, "nothing to verify: the context's review is empty", map[string]any{"v.passed": false, "v.attempts": 1}},
	}
	for _, c := range cases {
		out, err := verify(abi.StageInput{NodeID: "v", Attrs: c.attrs, Context: c.context})
		if err != nil || out.Status != c.status || out.PreferredLabel != c.label || out.FailureReason != c.reason ||
			!reflect.DeepEqual(out.ContextUpdates, c.updates) {
			t.Errorf("%s: %+v, %v", c.name, out, err)
		}
		if err := out.Check(); err != nil {
			t.Errorf("%s: the host would refuse the outcome: %v", c.name, err)
		}
	}
}

func TestFailedCount(t *testing.T) {
	for text, want := range map[string]int{
		"":                         0,
		"failed":                   0,
		"0 failed":                 0,
		"=== 3 passed, 2 failed":   2,
		"(1 failed) and 4 failed.": 4,
		"test result: FAILED. 10 passed; 1 failed;": 1,
	} {
		if got := failedCount(text); got != want {
			t.Errorf("failedCount(%q) = %d, want %d", text, got, want)
		}
	}
}
