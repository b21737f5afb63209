package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/morphhost/morph/llm"
)

// TestParseResponseNamesMaxTokensWhenCut checks that an unusable reply the
// server cut at its token limit says so, naming the TOML key to raise,
// instead of only "no JSON object in the reply".
func TestParseResponseNamesMaxTokensWhenCut(t *testing.T) {
	cut := llm.Result{Text: `{"type":"final","final":{"output":"a long ans`, FinishReason: llm.FinishLength}
	_, err := ParseResponse(cut)
	if !errors.Is(err, llm.ErrTruncated) || !errors.Is(err, ErrNoJSON) {
		t.Fatalf("err = %v; want it to wrap llm.ErrTruncated and ErrNoJSON", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "the reply was cut at its token limit") {
		t.Errorf("err = %q; want it to start with the cut", msg)
	}
	for _, key := range []string{"[llm.parameters] max_tokens", "max_completion_tokens"} {
		if !strings.Contains(msg, key) {
			t.Errorf("err = %q; want it to name %s", msg, key)
		}
	}

	// A reply that was cut but still holds a whole object is used.
	whole := llm.Result{Text: `{"type":"final","final":{"output":"ok"}} and then`, FinishReason: llm.FinishLength}
	if _, err := ParseResponse(whole); err != nil {
		t.Errorf("whole object in a cut reply: %v", err)
	}
	// A reply that stopped normally keeps the plain error.
	_, err = ParseResponse(llm.Result{Text: "no object", FinishReason: "stop"})
	if errors.Is(err, llm.ErrTruncated) {
		t.Errorf("stop reply: err %v wraps ErrTruncated", err)
	}
}
