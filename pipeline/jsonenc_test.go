package pipeline

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// decodeAny decodes a JSON document into Go's generic values.
func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %q", err, b)
	}
	return v
}

// sameAsMarshal checks that the hand-written encoding of rec decodes to
// what json.Marshal's does, with the values of the context and of the
// outcome's context updates copied as the journal copied the context
// before (a value JSON cannot hold, such as NaN, as its fmt text), and
// that both fail together.
func sameAsMarshal(t *testing.T, rec *journalRecord) {
	t.Helper()
	hand, herr := rec.appendJSON([]byte("prefix"))
	ref := *rec
	if rec.Context != nil {
		ref.Context = deepCopy(rec.Context)
	}
	if rec.Outcome != nil && rec.Outcome.ContextUpdates != nil {
		out := *rec.Outcome
		out.ContextUpdates = deepCopy(out.ContextUpdates)
		ref.Outcome = &out
	}
	want, werr := json.Marshal(&ref)
	if (herr != nil) != (werr != nil) {
		t.Fatalf("hand-written encoder error %v, json.Marshal's %v", herr, werr)
	}
	if werr != nil {
		return
	}
	if string(hand[:6]) != "prefix" {
		t.Fatalf("the encoder did not append: %q", hand)
	}
	got := decodeAny(t, hand[6:])
	if w := decodeAny(t, want); !reflect.DeepEqual(got, w) {
		t.Fatalf("hand-written\n%s\njson.Marshal\n%s", hand[6:], want)
	}
	var back journalRecord // and it reads back as a record
	if err := json.Unmarshal(hand[6:], &back); err != nil || back.Seq != rec.Seq || back.Elapsed != rec.Elapsed || !back.Time.Equal(rec.Time) {
		t.Fatalf("read back: %v %+v", err, back)
	}
}

// fuzzRecord is a record with s in every string it has and n, f in its
// numbers; v is a context update's number, apart from f so that a NaN
// there alone is fuzzed.
func fuzzRecord(s string, n int64, f, v float64) *journalRecord {
	return &journalRecord{Seq: n, Node: s, Next: s + "x",
		Outcome: &Outcome{Status: StageStatus(s), PreferredLabel: s, SuggestedNextIDs: []string{s, ""},
			ContextUpdates: map[string]any{s: s, "n": n, "f": v, "nil": nil, "b": true, "m": map[string]any{s: []any{s, 1.5}}},
			Notes:          s, FailureReason: s, JumpTo: s, Usage: Usage{InputTokens: int(n), CostUSD: f}},
		Visits: int(n),
		Nodes: map[string]*NodeResult{s: {Status: StatusSuccess, Visits: 2, Attempts: 3, FailureReason: s, Notes: s, Duration: time.Duration(n),
			Usage: Usage{TotalTokens: 7, CostUSD: f, CostUnknown: n%2 == 0}, History: []StageStatus{StageStatus(s), StatusFail}, HistoryDropped: int(n), EdgesTaken: map[int]int{0: 1, 12: int(n)}},
			"empty": {}},
		Retries: map[string]int{s: int(n)}, GoalGateRetries: 1, Usage: Usage{OutputTokens: 3, CostUSD: f},
		Context: map[string]any{s: s, "ch": make(chan int), "bad": math.NaN(), "t": time.Unix(n%1e9, 0).UTC(), "st": StatusFail, "i64": n, "u": uint8(7)},
		Deleted: []string{s}, Log: []string{s, s + ": success"}, Elapsed: time.Duration(n), Time: time.Unix(0, n).UTC(), Restart: int(n % 7)}
}

// FuzzJournalRecord: the hand-written record encoder writes what
// encoding/json does, whatever the strings (control characters, invalid
// UTF-8, U+2028, quotes) and numbers.
func FuzzJournalRecord(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "\x00\x1f\x7f ctl\n\r\t", "\xff\xfe bad utf-8 \xc3", "\u2028\u2029 <>&", "é ü 日本 🎉", "\x1b[31mred"} {
		f.Add(s, int64(42), 0.25, 0.5)
	}
	f.Add("big", int64(math.MaxInt64), 1e300, -1e300)
	f.Add("neg", int64(-5), -1e-9, 3.0)
	f.Add("nan", int64(1), math.NaN(), math.NaN())
	f.Add("inf", int64(1), math.Inf(1), 1.0)
	f.Add("nan update", int64(1), 1.0, math.NaN())
	f.Fuzz(func(t *testing.T, s string, n int64, x, v float64) {
		sameAsMarshal(t, fuzzRecord(s, n, x, v))
		sameAsMarshal(t, &journalRecord{Node: s}) // every omitempty field empty
		if b := appendJSONString(nil, s); !json.Valid(b) {
			t.Fatalf("appendJSONString(%q) = %q: not JSON", s, b)
		} else if want, _ := json.Marshal(s); !reflect.DeepEqual(decodeAny(t, b), decodeAny(t, want)) {
			t.Fatalf("appendJSONString(%q) = %s, json.Marshal %s", s, b, want)
		}
	})
}

// TestJournalEncoderAllocates: a no-op stage's record costs a handful of
// allocations (the sorted keys), not encoding/json's reflection per value.
func TestJournalEncoderAllocates(t *testing.T) {
	rec := &journalRecord{Node: "s1", Next: "s2", Outcome: &Outcome{Status: StatusSuccess, ContextUpdates: map[string]any{KeyLastStage: "s1"}},
		Visits: 1, Nodes: map[string]*NodeResult{"s1": {Status: StatusSuccess, Visits: 1, Attempts: 1, History: []StageStatus{StatusSuccess}}},
		Context: map[string]any{KeyLastStage: "s1", KeyOutcome: "success", KeyCurrentNode: "s1", KeyPreferredLabel: ""}, Log: []string{"s1: success"}}
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := rec.appendJSON(buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.0f allocations per record", allocs)
	if allocs > 4 {
		t.Errorf("%.0f allocations per record", allocs)
	}
}
