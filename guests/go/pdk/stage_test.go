//go:build !wasip1

package pdk

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

// verifyStage is a stage handler as a plugin writes one: success when the
// context's last_response holds the node's marker, else fail with a label.
func verifyStage(in abi.StageInput) (abi.StageOutcome, error) {
	marker := in.Attrs["marker"]
	if marker == "" {
		return abi.StageOutcome{}, &stageError{in.NodeID}
	}
	if text, _ := in.Context["last_response"].(string); strings.Contains(text, marker) {
		return abi.StageOutcome{Status: abi.StageSuccess, ContextUpdates: map[string]any{in.NodeID + ".passed": true}}, nil
	}
	prev := ""
	if in.Previous != nil {
		prev = in.Previous.Status
	}
	return abi.StageOutcome{Status: abi.StageFail, PreferredLabel: "fix", FailureReason: "no marker after " + prev}, nil
}

type stageError struct{ node string }

func (e *stageError) Error() string { return "node " + e.node + " sets no marker" }

// HandleStage registers handle_stage: the manifest lists it, the export
// decodes the input (unknown fields and null maps included) and answers the
// outcome, and an error is a guest-reported error.
func TestHandleStage(t *testing.T) {
	x := fresh(t)
	Plugin("verify", "1")
	HandleStage(verifyStage)
	out, isErr := run(t, x, abi.ExportDescribe, "")
	var m abi.Manifest
	if err := json.Unmarshal([]byte(out), &m); isErr || err != nil || len(m.Hooks) != 1 || m.Hooks[0] != abi.HookHandleStage {
		t.Fatalf("manifest %q (%v): hooks %v", out, isErr, m.Hooks)
	}
	cases := []struct{ in, want string }{
		{`{"node_id":"v","attrs":{"marker":"pass"},"goal":"g","context":{"last_response":"tests pass"},"later":1}`,
			`{"status":"success","context_updates":{"v.passed":true}}`},
		{`{"node_id":"v","attrs":{"marker":"pass"},"context":null,"previous":{"status":"retry"}}`,
			`{"status":"fail","preferred_label":"fix","failure_reason":"no marker after retry"}`},
	}
	for _, c := range cases {
		if out, isErr := run(t, x, abi.ExportHandleStage, c.in); isErr || out != c.want {
			t.Errorf("handle_stage(%s) = %q, %v; want %s", c.in, out, isErr, c.want)
		}
	}
	if out, isErr := run(t, x, abi.ExportHandleStage, `{"node_id":"v","attrs":null}`); !isErr || out != "node v sets no marker" {
		t.Errorf("an error: %q, %v", out, isErr)
	}
	HandleStage(verifyStage)
	if out, isErr := run(t, x, abi.ExportDescribe, ""); !isErr || !strings.Contains(out, "hook handle_stage registered twice") {
		t.Errorf("a second registration: %q, %v", out, isErr)
	}
}
