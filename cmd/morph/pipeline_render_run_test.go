package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/morphhost/morph/internal/renderproc"
	"github.com/morphhost/morph/pipeline"
)

// loopDOT has two edges from verify to implement: a run's edge index
// names which one it took.
const loopDOT = `digraph loop {
	start [shape=Mdiamond]
	done [shape=Msquare]
	start -> implement -> verify
	verify -> implement [label="fix"]
	verify -> done [label="pass"]
	verify -> implement [label="redo"]
}`

// loopCheckpoint is a finished run of loopDOT: verify failed, the run
// went back by "redo" (verify's third edge), then verify passed.
func loopCheckpoint() *pipeline.Checkpoint {
	ok, fail := pipeline.StatusSuccess, pipeline.StatusFail
	return &pipeline.Checkpoint{
		RunID:     "r1",
		State:     pipeline.RunSuccess,
		Completed: []string{"start", "implement", "verify", "implement", "verify", "done"},
		Outcomes: map[string]*pipeline.Outcome{
			"start": pipeline.Success(), "implement": pipeline.Success(), "verify": pipeline.Success(), "done": pipeline.Success(),
		},
		Nodes: map[string]*pipeline.NodeResult{
			"start":     {Status: ok, Visits: 1, Attempts: 1, History: []pipeline.StageStatus{ok}, EdgesTaken: map[int]int{0: 1}},
			"implement": {Status: ok, Visits: 2, Attempts: 3, History: []pipeline.StageStatus{ok, ok}, EdgesTaken: map[int]int{0: 2}},
			// 7 and -1: indices the graph does not have (a checkpoint of
			// another source): left out.
			"verify": {Status: ok, Visits: 2, Attempts: 2, History: []pipeline.StageStatus{fail, ok}, EdgesTaken: map[int]int{2: 1, 1: 1, 7: 4, -1: 2}},
			"done":   {Status: ok, Visits: 1, Attempts: 1, History: []pipeline.StageStatus{ok}},
		},
	}
}

func TestRunViewNamesEdgesByTheirEnds(t *testing.T) {
	g, err := pipeline.ParseDOT([]byte(loopDOT))
	if err != nil {
		t.Fatal(err)
	}
	nodes, edges := renderproc.RunView(g, loopCheckpoint())
	slices.SortFunc(edges, func(a, b renderproc.EdgeTaken) int {
		return strings.Compare(a.From+">"+a.To, b.From+">"+b.To)
	})
	want := []renderproc.EdgeTaken{
		{From: "implement", To: "verify", Count: 2},
		{From: "start", To: "implement", Count: 1},
		{From: "verify", To: "done", Count: 1},
		{From: "verify", To: "implement", Nth: 1, Count: 1}, // "redo", the second verify -> implement
	}
	if !slices.Equal(edges, want) {
		t.Errorf("edges %+v, want %+v", edges, want)
	}
	if v := nodes["verify"]; v.Visits != 2 || v.Attempts != 2 || !slices.Equal(v.History, []string{"fail", "success"}) {
		t.Errorf("verify: %+v", v)
	}
}

func TestPipelineRenderDrawsTheRun(t *testing.T) {
	useMorphRender(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, pipeline.SourceFile), []byte(loopDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pipeline.SaveCheckpoint(dir, loopCheckpoint()); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := morph(t, "", "pipeline", "render", dir, "-o", "-")
	if code != exitOK {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	node := func(id string) string {
		_, after, ok := strings.Cut(stdout, "<title>"+id+"</title>")
		if !ok {
			t.Fatalf("no node %s in the SVG:\n%s", id, stdout)
		}
		g, _, _ := strings.Cut(after, "</g>\n</g>")
		return g
	}
	for _, want := range []string{">x2, 2 attempts<", ">fail &gt; success<", `xlink:title="success (x2, 2 attempts) visits: fail, success"`} {
		if !strings.Contains(node("verify"), want) {
			t.Errorf("verify's drawing has no %s:\n%s", want, node("verify"))
		}
	}
	// The edges verify -> implement, in source order: "fix" not taken,
	// "redo" taken.
	var drawn []string
	for _, m := range regexp.MustCompile(`(?s)<title>verify&#45;&gt;implement</title>.*?stroke="([^"]+)".*?<text[^>]*>([^<]*)</text>`).FindAllStringSubmatch(stdout, -1) {
		drawn = append(drawn, strings.TrimSpace(strings.ReplaceAll(m[2], "\u00a0", " "))+" "+m[1])
	}
	slices.Sort(drawn)
	if want := []string{"fix #b0b0b0", "redo #1b5e20"}; !slices.Equal(drawn, want) {
		t.Errorf("verify -> implement drawn %q, want %q", drawn, want)
	}
}

// TestPipelineRenderOfARealRun: a run of plan-implement-verify on the
// scripted model (verify fails, then passes) keeps what the drawing shows:
// verify's two visits and their statuses, and the fix edge taken once.
func TestPipelineRenderOfARealRun(t *testing.T) {
	useMorphRender(t)
	code, s, stderr := runExample(t, "plan-implement-verify", "")
	if code != 0 {
		t.Fatalf("the run: exit %d: %s", code, stderr)
	}
	code, svg, stderr := morph(t, "", "pipeline", "render", s.RunDir, "-o", "-")
	if code != exitOK {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	for _, want := range []string{
		`xlink:title="success (x2, 2 attempts) visits: fail, success"`, // verify
		">fail &gt; success<",
		`xlink:title="taken 2 times"`, // implement -> verify
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("the drawing has no %s:\n%s", want, svg)
		}
	}
	fix := regexp.MustCompile(`(?s)<title>verify&#45;&gt;implement</title>.*?xlink:title="([^"]+)"`).FindStringSubmatch(svg)
	if fix == nil || fix[1] != "taken once" {
		t.Errorf("verify -> implement (fix): %q, want taken once", fix)
	}
}
