// Command verify is an example pipeline stage handler: a morph plugin,
// written with the Go PDK (github.com/morphhost/morph/guests/go/pdk), whose
// handle_stage hook (abi/SPEC.md section 11) checks what an earlier stage
// wrote to the run's context, so that a pipeline can loop back to the
// stage that must try again.
//
// A node runs it as `type="wasm:verify"` (or `handler="verify"`), with
// these attributes, all optional:
//
//   - check: the context key to read; default implement.output when the
//     context has it, else last_response (what an agent stage answered);
//   - marker: the text that must appear, case-insensitively; default
//     "tests pass";
//   - fail_label, pass_label: the preferred edge label of a failed stage
//     (default "fix") and of a passed one (default none).
//
// The stage fails, with a reason and the fail label, when the text is
// empty, reports failed tests ("3 failed", "1 failed;"), or lacks the
// marker; otherwise it succeeds. Either way it records in the context
// <node>.passed (true or false) and <node>.attempts (how often the node
// ran, counting this time).
//
// Build (from this directory; `make examples` from the checkout):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags='-s -w' -o verify.wasm .
//
// go.mod stays at go 1.23 so that TinyGo 0.34 builds it too.
package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/guests/go/pdk"
)

// Registration happens in init: a c-shared module never runs main.
func init() {
	pdk.Plugin("verify", "0.1.0")
	pdk.Capabilities() // neither logs nor reads its config: it asks for nothing
	pdk.HandleStage(verify)
}

func main() {}

// Defaults of the node's attributes.
const (
	DefaultMarker    = "tests pass"
	DefaultFailLabel = "fix"
)

// verify is the stage: see the package comment.
func verify(in abi.StageInput) (abi.StageOutcome, error) {
	key := in.Attrs["check"]
	if key == "" {
		key = "last_response"
		if _, ok := in.Context["implement.output"]; ok {
			key = "implement.output"
		}
	}
	marker := in.Attrs["marker"]
	if marker == "" {
		marker = DefaultMarker
	}
	attempts := 1
	if n, ok := in.Context[in.NodeID+".attempts"].(float64); ok { // JSON numbers decode as float64
		attempts += int(n)
	}
	text := text(in.Context[key])
	var why string
	switch failed := failedCount(text); {
	case strings.TrimSpace(text) == "":
		why = fmt.Sprintf("nothing to verify: the context's %s is empty", key)
	case failed > 0:
		why = fmt.Sprintf("%s reports %d failed", key, failed)
	case !strings.Contains(strings.ToLower(text), strings.ToLower(marker)):
		why = fmt.Sprintf("%s does not say %q", key, marker)
	}
	out := abi.StageOutcome{Status: abi.StageSuccess, PreferredLabel: in.Attrs["pass_label"],
		ContextUpdates: map[string]any{in.NodeID + ".passed": why == "", in.NodeID + ".attempts": attempts},
		Notes:          fmt.Sprintf("attempt %d: checked %s for %q", attempts, key, marker)}
	if why != "" {
		out.Status, out.FailureReason, out.PreferredLabel = abi.StageFail, why, in.Attrs["fail_label"]
		if out.PreferredLabel == "" {
			out.PreferredLabel = DefaultFailLabel
		}
	}
	return out, nil
}

// text is a context value as text: a string as it is, anything else as
// fmt prints it (a stage may have written a number or a list).
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// failedCount is the largest count of failures the text reports as
// "<n> failed" (pytest's "2 failed, 5 passed", cargo's "1 failed;"), 0
// when it reports none.
func failedCount(text string) int {
	words := strings.Fields(strings.ToLower(text))
	most := 0
	for i := 1; i < len(words); i++ {
		if strings.TrimRight(words[i], ",.;:)") != "failed" {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimLeft(words[i-1], "(")); err == nil && n > most {
			most = n
		}
	}
	return most
}
