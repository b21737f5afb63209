package pipeline

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// customMarkerLoop routes review on a custom outcome its agent reports.
const customMarkerLoop = `digraph p {
  start [shape=Mdiamond]
  review [prompt="review it"]
  fix [prompt="fix it"]
  done [shape=Msquare]
  start -> review
  review -> fix [condition="outcome=needs_dod"]
  review -> done [condition="outcome=success"]
  fix -> review
}`

// TestMarkerTakesTheEdgesCustomOutcomes: an agent's OUTCOME marker may
// name a custom outcome a condition on its node's edges tests, in any
// case; a word no edge tests is no marker, and the agent's success
// decides as before.
func TestMarkerTakesTheEdgesCustomOutcomes(t *testing.T) {
	b := &fakeBackend{outputs: map[string][]string{"review": {"missing docs OUTCOME: NEEDS_DOD", "OUTCOME: banana", "all good OUTCOME: success"}}}
	res := runGraph(t, &Runner{Backend: b}, customMarkerLoop)
	want := []string{"start", "review", "fix", "review", "done"}
	if res.State != RunSuccess || !reflect.DeepEqual(res.Path, want) {
		t.Fatalf("run %s (%s), path %v; want %v", res.State, res.FailureReason, res.Path, want)
	}
	if h := res.Nodes["review"].History; !reflect.DeepEqual(h, []StageStatus{"needs_dod", StatusSuccess}) {
		t.Fatalf("review's history %v", h)
	}

	// "banana" is tested by no edge: the agent's success decides.
	b = &fakeBackend{outputs: map[string][]string{"review": {"OUTCOME: banana"}}}
	res = runGraph(t, &Runner{Backend: b}, customMarkerLoop)
	if res.State != RunSuccess || !reflect.DeepEqual(res.Path, []string{"start", "review", "done"}) {
		t.Fatalf("an unknown word: %s %v", res.State, res.Path)
	}
	b = &fakeBackend{outputs: map[string][]string{"review": {"OUTCOME: banana"}}, fail: map[string]bool{"review": true}}
	res = runGraph(t, &Runner{Backend: b}, customMarkerLoop)
	if res.State != RunFail || res.FailedNode != "review" || !strings.Contains(res.FailureReason, "did not succeed") {
		t.Fatalf("an unknown word from an agent that failed: %s at %s: %s", res.State, res.FailedNode, res.FailureReason)
	}
}

// TestGraphMaxSteps: the graph's max_steps bounds a run when the runner
// sets no limit; the runner's (morph.toml's [pipeline] max_steps) wins.
func TestGraphMaxSteps(t *testing.T) {
	const loop = `digraph p { max_steps=30; start [shape=Mdiamond]; a [max_node_visits=1000]; b [max_node_visits=1000]; done [shape=Msquare]
	  start -> a -> b; b -> a [condition="outcome=success"]; b -> done [condition="outcome=fail"] }`
	r, _, _ := journalChain(t, 0)
	res := runGraph(t, r, loop)
	if res.State != RunFail || len(res.Path) != 30 || !strings.Contains(res.FailureReason, "the graph's max_steps") {
		t.Fatalf("graph's limit: %s after %d stages: %s", res.State, len(res.Path), res.FailureReason)
	}
	r.Limits.MaxSteps = 40
	if res := runGraph(t, r, loop); res.State != RunFail || len(res.Path) != 40 {
		t.Fatalf("runner's limit: %s after %d stages", res.State, len(res.Path))
	}
	d := Validate(mustParse(t, strings.Replace(loop, "max_steps=30", "max_steps=many", 1)), ValidateOptions{})
	if !slices.ContainsFunc(d, func(d Diagnostic) bool { return d.Rule == RuleAttrValue && strings.Contains(d.Message, "max_steps") }) {
		t.Fatalf("max_steps=many: %v", d)
	}
}
