package pipeline

import (
	"reflect"
	"strings"
	"testing"
)

// Spec 4.3/4.4 name the start and exit by id ("start/Start", "exit/end");
// published pipelines write Exit, END and START too: any case counts, and
// the run starts and ends there.
func TestStartAndExitByIDAnyCase(t *testing.T) {
	const src = `digraph p {
  goal = "g"
  START
  work [prompt="do it"]
  End
  START -> work -> End
}`
	g := mustParse(t, src)
	if s := g.StartNode(); s == nil || s.ID != "START" || s.Type() != TypeStart {
		t.Fatalf("start node %+v, want START of type start", s)
	}
	if ex := g.ExitNodes(); len(ex) != 1 || ex[0].ID != "End" {
		t.Fatalf("exit nodes %v, want End", ex)
	}
	if ds := Validate(g, ValidateOptions{}); HasErrors(ds) {
		t.Fatalf("diagnostics %v", ds)
	}
	res := runGraph(t, &Runner{Backend: &fakeBackend{}}, src)
	if want := []string{"START", "work", "End"}; res.State != RunSuccess || !reflect.DeepEqual(res.Path, want) {
		t.Fatalf("state %s (%s), path %v; want success over %v", res.State, res.FailureReason, res.Path, want)
	}

	// Of two nodes named start in different cases, the one named exactly
	// start is the start; the other stays an agent stage.
	g = mustParse(t, `digraph p { Start -> start; start -> w -> exit }`)
	if s := g.StartNode(); s == nil || s.ID != "start" {
		t.Fatalf("start node %+v, want start", s)
	}
	if got := g.Node("Start").Type(); got != TypeCodergen {
		t.Errorf("Start has type %s, want codergen", got)
	}

	// A node named exit that names another handler keeps it.
	g = mustParse(t, `digraph p { s [shape=Mdiamond]; EXIT [shape=hexagon]; s -> EXIT }`)
	if got := g.Node("EXIT").Type(); got != TypeHuman {
		t.Errorf("EXIT [shape=hexagon] has type %s, want %s", got, TypeHuman)
	}
}

// Spec 2.6: the attribute is type, an implementation may call it
// node_type inside. kilroy's and fabro's files write node_type="exit" on a
// doublecircle named Exit: read as type, with a warning suggesting type;
// type wins over it.
func TestNodeTypeIsReadAsType(t *testing.T) {
	const src = `digraph p {
  goal = "g"
  Begin [shape=circle, node_type="start"]
  work [shape=box, prompt="do it", node_type="stack.observe"]
  both [shape=box, prompt="x", type="codergen", node_type="exit"]
  Fin [shape=doublecircle, node_type="exit"]
  Begin -> work -> both -> Fin
}`
	g := mustParse(t, src)
	if s := g.StartNode(); s == nil || s.ID != "Begin" {
		t.Fatalf("start node %+v, want Begin", s)
	}
	if ex := g.ExitNodes(); len(ex) != 1 || ex[0].ID != "Fin" {
		t.Fatalf("exit nodes %v, want Fin only (both has type=codergen)", ex)
	}
	ds := Validate(g, ValidateOptions{})
	if HasErrors(ds) {
		t.Fatalf("diagnostics %v", ds)
	}
	var got []string
	for _, d := range withRule(ds, RuleAttrValue) {
		if strings.Contains(d.Message, "node_type") {
			got = append(got, string(d.Severity)+" "+d.NodeID+": "+d.Message+" | "+d.Fix)
		}
	}
	want := []string{
		`warning Begin: node Begin: node_type="start" is read as type | write type="start" instead of node_type`,
		`warning work: node work: node_type="stack.observe" is read as type | write type="stack.observe" instead of node_type`,
		`warning both: node both: node_type="exit" is ignored: type="codergen" is the node's type | remove node_type`,
		`warning Fin: node Fin: node_type="exit" is read as type | write type="exit" instead of node_type`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("node_type warnings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A type no handler runs warns and runs as its shape: an agent stage.
	if tk := withRule(ds, RuleTypeKnown); len(tk) != 1 || tk[0].NodeID != "work" {
		t.Errorf("type_known %v, want one for work", tk)
	}
	b := &fakeBackend{}
	res := runGraph(t, &Runner{Backend: b}, src)
	if want := []string{"Begin", "work", "both", "Fin"}; res.State != RunSuccess || !reflect.DeepEqual(res.Path, want) {
		t.Fatalf("state %s (%s), path %v; want success over %v", res.State, res.FailureReason, res.Path, want)
	}
	if len(b.calls) != 2 {
		t.Errorf("%d agent calls, want 2 (work and both)", len(b.calls))
	}
}
