package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// badReply is a reply that does not parse, with an escape sequence in it.
const badReply = `{"reply":"not json at all \u001b[31m red"}`

// The result JSON has the run's steps: a reply that did not parse is a
// parse_error step with its error and the reply, escaped, before the step
// that answered; -v prints the reply under the step's line, escaped, and
// without -v it is not printed.
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
			Reply  string `json:"reply"`
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
	const shown = `not json at all \x1b[31m red`
	if res.Steps[0].Reply != shown || res.Steps[1].Reply != "" {
		t.Errorf("replies %q, %q; want %q on the parse_error step only", res.Steps[0].Reply, res.Steps[1].Reply, shown)
	}
	if strings.Contains(stderr, "reply:") {
		t.Errorf("without -v the reply is printed:\n%s", stderr)
	}
	code, _, stderr = morph(t, "", "run", "-v", "--config", setup(t, []string{badReply, finalReply}, ""), "hi")
	if code != 0 {
		t.Fatalf("-v: exit %d: %s", code, stderr)
	}
	assertHas(t, "-v", stderr, "  parse error  ", "\n  reply: "+shown+"\n")
	if strings.Contains(stderr, "\x1b") {
		t.Errorf("-v printed the raw escape:\n%q", stderr)
	}
}
