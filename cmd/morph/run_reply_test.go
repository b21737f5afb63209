package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// badReply is a reply that does not parse, with an escape sequence in it.
const badReply = `{"reply":"not json at all \u001b[31m red"}`

// The result JSON has the run's steps: a reply that did not parse is a
// parse_error step with its error, before the step that answered.
func TestRunResultSteps(t *testing.T) {
	cfg := setup(t, []string{badReply, finalReply}, "")
	code, stdout, stderr := morph(t, "", "run", "--config", cfg, "hi")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	decode(t, stdout)
	var res struct {
		Steps []struct {
			Step   int    `json:"step"`
			Action string `json:"action"`
			Error  string `json:"error"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 2 || res.Steps[0].Action != "parse_error" || res.Steps[0].Error == "" || res.Steps[1].Action != "final" {
		t.Fatalf("steps: %+v\n%s", res.Steps, stdout)
	}
	if strings.Contains(stdout, "\x1b") {
		t.Errorf("the result has the raw escape:\n%q", stdout)
	}
}
