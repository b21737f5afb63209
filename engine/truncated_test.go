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
	if msg := err.Error(); !strings.HasPrefix(msg, "the reply was cut at max_tokens") || !strings.Contains(msg, "[llm.parameters] max_tokens") {
		t.Errorf("err = %q; want it to start with the cut and name [llm.parameters] max_tokens", msg)
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
