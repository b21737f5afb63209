package pipeline

import (
	"strings"
	"testing"
)

func TestConditionEval(t *testing.T) {
	pctx := NewContext()
	pctx.Set("tests", "passed")
	pctx.Set("count", 3)
	pctx.Set("flag", true)
	pctx.Set("context.legacy", "full-key")
	pctx.Set("both", "bare")
	pctx.Set("context.both", "prefixed")
	pctx.Set("review", map[string]any{"verdict": "ok", "inner": map[string]any{"score": 7}})
	pctx.Set("review.verdict", "flat wins")
	pctx.Set("typed", struct {
		Name string `json:"name"`
	}{"widget"})
	pctx.Set("internal.retry_count.build", 2)
	o := &Outcome{Status: StatusSuccess, PreferredLabel: "Approve"}

	cases := []struct {
		cond string
		want bool
	}{
		{"", true},
		{"   ", true},
		{"outcome=success", true},
		{"outcome==success", true},
		{"outcome = SUCCESS", true},
		{"outcome=pass", true}, // an alias of success
		{"outcome!=success", false},
		{"outcome=fail", false},
		{"outcome!=fail", true},
		{"outcome=needs_dod", false}, // a custom status (spec 10.2: any literal)
		{"outcome!=needs_dod", true},
		{"preferred_label=Approve", true},
		{"preferred_label=approve", false}, // labels compare exactly
		{`preferred_label="Approve"`, true},
		{"context.tests=passed", true},
		{"tests=passed", true},
		{"context.tests!=passed", false},
		{"context.count=3", true},
		{"context.flag=true", true},
		{"context.legacy=full-key", true},              // falls back to the key as written
		{"context.both=bare", true},                    // the path first
		{"context.missing=\"\"", true},                 // a missing key is ""
		{"context.missing!=\"\"", false},               //
		{"context.review.inner.score=7", true},         // descends into maps
		{"context.review.verdict=\"flat wins\"", true}, // a set key before descent
		{"context.review.nope=\"\"", true},
		{"context.typed.name=widget", true}, // a struct, seen as its JSON
		{"internal.retry_count.build=2", true},
		{"context.tests.deeper=\"\"", true}, // a string has no fields
		{"outcome=success && context.tests=passed", true},
		{"outcome=success && context.tests=failed", false},
		{"outcome=success&&tests=passed&&count!=4", true},
		{`context.tests="pas\"sed"`, false},
	}
	for _, c := range cases {
		got, err := EvalCondition(c.cond, o, pctx)
		if err != nil {
			t.Errorf("EvalCondition(%q): %v", c.cond, err)
			continue
		}
		if got != c.want {
			t.Errorf("EvalCondition(%q) = %v, want %v", c.cond, got, c.want)
		}
	}
}

func TestConditionQuotedEscapes(t *testing.T) {
	pctx := NewContext()
	pctx.Set("msg", `say "hi" \ bye && more`)
	ok, err := EvalCondition(`msg="say \"hi\" \\ bye && more"`, Success(), pctx)
	if err != nil || !ok {
		t.Fatalf("got %v, %v; want true", ok, err)
	}
}

// Without an outcome, outcome and preferred_label come from the context,
// where the runner keeps the last stage's.
func TestConditionNilOutcomeReadsContext(t *testing.T) {
	pctx := NewContext()
	pctx.Set(KeyOutcome, StatusFail)
	pctx.Set(KeyPreferredLabel, "Retry")
	for cond, want := range map[string]bool{
		"outcome=fail":            true,
		"outcome=success":         false,
		"preferred_label=Retry":   true,
		"context.outcome=fail":    true,
		"preferred_label!=Retry":  false,
		"outcome=FAIL && x=\"\"":  true,
		"outcome=fail && x=there": false,
	} {
		if got, err := EvalCondition(cond, nil, pctx); err != nil || got != want {
			t.Errorf("EvalCondition(%q, nil) = %v, %v; want %v", cond, got, err, want)
		}
	}
	// No context at all: every key is "".
	if got, _ := EvalCondition(`context.x="" && outcome!=success`, nil, nil); !got {
		t.Error(`with no outcome and no context, context.x="" && outcome!=success should hold`)
	}
}

// A status written in another case by a plugin still compares.
func TestConditionOutcomeCaseInsensitive(t *testing.T) {
	o := &Outcome{Status: "PARTIAL_SUCCESS"}
	if got, _ := EvalCondition("outcome=partial_success", o, nil); !got {
		t.Error("outcome=partial_success should match status PARTIAL_SUCCESS")
	}
}

// Spec 10.2: "Literal ::= String | Integer | Boolean | BareLiteral" and
// 10.3: "outcome refers to the executing node's outcome status": a stage
// that reports a custom status (as published pipelines' agents do:
// needs_dod, succeeded, disagree) routes on it.
func TestConditionCustomOutcome(t *testing.T) {
	for _, c := range []struct {
		status StageStatus
		cond   string
		want   bool
	}{
		{"needs_dod", "outcome=needs_dod", true},
		{"NEEDS_DOD", "outcome=needs_dod", true}, // outcome compares case-insensitively
		{"needs_dod", "outcome=NEEDS_DOD", true},
		{"disagree", "outcome=needs_dod", false},
		{"disagree", "outcome!=success && outcome!=fail", true},
		{StatusSuccess, "outcome=succeeded", true}, // an alias, as passed is
		{"review:v2", "outcome=review:v2", true},
	} {
		got, err := EvalCondition(c.cond, &Outcome{Status: c.status}, nil)
		if err != nil || got != c.want {
			t.Errorf("status %q, EvalCondition(%q) = %v, %v; want %v", c.status, c.cond, got, err, c.want)
		}
	}
}

func TestParseConditionErrors(t *testing.T) {
	cases := []struct {
		cond string
		want string // in the error
	}{
		{"outcome", "column 8: expected = or !="},
		{"outcome=", "column 9: missing value"},
		{"outcome=9lives", "column 9: bad stage status"},
		{`outcome=""`, "column 9: bad stage status"},
		{`outcome="needs dod"`, "column 9: bad stage status"},
		{"=x", "column 1: expected a key"},
		{"1abc=x", "column 1: expected a key"},
		{"a=b c=d", "column 5: expected && or the end"},
		{"a=b || c=d", "column 5: || is not supported"},
		{"a=b &&", "column 7: missing clause after &&"},
		{"a=b && && c=d", "column 8: expected a key"},
		{"a>3", "column 2: expected = or !="},
		{"a=b=c", "column 4: expected && or the end"},
		{`a="open`, "column 3: unterminated quoted value"},
		{`a="x\n"`, `column 5: unknown escape`},
		{"context.=x", `column 1: key "context." has an empty segment`},
		{"a..b=x", "empty segment"},
		{"é=x", "column 1: expected a key"},
		{`a="ééé" y`, "column 9: expected && or the end"}, // columns count runes
		{strings.Repeat("a.", MaxConditionKeyDepth) + "a=x", "segments"},
		{strings.Repeat("a=b && ", MaxConditionClauses) + "a=b", "more than 32 clauses"},
		{"a=" + strings.Repeat("x", MaxConditionBytes), "more than the 4096 allowed"},
	}
	for _, c := range cases {
		_, err := ParseCondition(c.cond)
		if err == nil {
			t.Errorf("ParseCondition(%.40q): no error, want %q", c.cond, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseCondition(%.40q) = %q, want it to contain %q", c.cond, err, c.want)
		}
	}
	// The most clauses allowed parse.
	if _, err := ParseCondition(strings.Repeat("a=b && ", MaxConditionClauses-1) + "a=b"); err != nil {
		t.Errorf("%d clauses: %v", MaxConditionClauses, err)
	}
	if _, err := EvalCondition("a=", nil, nil); err == nil {
		t.Error("EvalCondition of a bad condition gave no error")
	}
}

func FuzzParseCondition(f *testing.F) {
	for _, s := range []string{"outcome=success", `a="b\"c" && x!=y`, "context.a.b==1", "a=b ||", `"`} {
		f.Add(s)
	}
	pctx := NewContext()
	pctx.Set("a", map[string]any{"b": "1"})
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCondition(s)
		if err != nil {
			if !strings.Contains(err.Error(), "condition") {
				t.Fatalf("error %q does not say it is about a condition", err)
			}
			return
		}
		c.Eval(Success(), pctx)
	})
}
