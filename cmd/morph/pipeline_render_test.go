package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/morphhost/morph/internal/renderproc"
	"github.com/morphhost/morph/pipeline"
)

const renderDOT = `digraph review {
	start [shape=Mdiamond]
	exit [shape=Msquare]
	start -> plan -> implement -> review
	review -> implement [label="fail"]
	review -> exit
}`

// useMorphRender makes render run the morph-render of this source.
func useMorphRender(t *testing.T) {
	t.Helper()
	t.Setenv(renderproc.EnvVar, morphRenderBinary(t))
}

// runDir writes a run directory: the pipeline's source and a checkpoint
// of a run that failed review once and goes back to implement.
func runDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pipeline.dot"), []byte(renderDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	cp := &pipeline.Checkpoint{
		RunID:       "r1",
		State:       pipeline.RunCanceled,
		CurrentNode: "review",
		NextNode:    "implement",
		Completed:   []string{"start", "plan", "implement", "review"},
		Outcomes: map[string]*pipeline.Outcome{
			"start":     pipeline.Success(),
			"plan":      {Status: pipeline.StatusPartialSuccess},
			"implement": pipeline.Success(),
			"review":    pipeline.Fail("tests fail"),
		},
	}
	if err := pipeline.SaveCheckpoint(dir, cp); err != nil {
		t.Fatal(err)
	}
	return dir
}

// assertWrote checks a render that wrote its SVG to out: exit 0, nothing
// on stdout, and on stderr the one line that names out.
func assertWrote(t *testing.T, code int, stdout, stderr, out string) {
	t.Helper()
	if code != exitOK {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitOK, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want none", stdout)
	}
	if want := "morph: wrote " + out + "\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
}

// assertFailure checks what a failed command printed: nothing on stdout,
// and on stderr a message of morph's own ("morph: ...") that says want.
func assertFailure(t *testing.T, stdout, stderr, want string) {
	t.Helper()
	if stdout != "" {
		t.Errorf("stdout %q, want none", stdout)
	}
	if !strings.HasPrefix(stderr, "morph: ") {
		t.Errorf("stderr %q does not start with \"morph: \"", stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not say %q", stderr, want)
	}
}

// assertNode fails t unless svg draws node id with fill, and with the
// next node's blue outline when next.
func assertNode(t *testing.T, svg, id, fill string, next bool) {
	t.Helper()
	i := strings.Index(svg, "class=\"node\">\n<title>"+id+"</title>")
	if i < 0 {
		t.Fatalf("node %s is not in the SVG:\n%s", id, svg)
	}
	node := svg[i:]
	node = node[:strings.Index(node, "</g>")]
	if !strings.Contains(node, `fill="`+fill+`"`) {
		t.Errorf("node %s is not filled %s:\n%s", id, fill, node)
	}
	if got := strings.Contains(node, `stroke="#1a73e8"`); got != next {
		t.Errorf("node %s: outlined as next %v, want %v:\n%s", id, got, next, node)
	}
}

func TestPipelineRenderRunDir(t *testing.T) {
	useMorphRender(t)
	dir := runDir(t)
	code, stdout, stderr := morph(t, "", "pipeline", "render", dir)
	out := filepath.Join(dir, "pipeline.svg")
	assertWrote(t, code, stdout, stderr, out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	assertNode(t, svg, "start", "#a6e3a1", false)
	assertNode(t, svg, "plan", "#ffd966", false)
	assertNode(t, svg, "implement", "#a6e3a1", true)
	assertNode(t, svg, "review", "#f28b82", false)
	assertNode(t, svg, "exit", "#ffffff", false)
	for _, entry := range []string{">success<", ">partial_success<", ">fail<", ">not run<", ">next<"} {
		if !strings.Contains(svg, entry) {
			t.Errorf("the legend has no %s", entry)
		}
	}
}

func TestPipelineRenderToStdout(t *testing.T) {
	useMorphRender(t)
	dir := runDir(t)
	code, stdout, stderr := morph(t, "", "pipeline", "render", "-o", "-", "--timeout", "10s", dir)
	if code != exitOK {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitOK, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr %q, want none", stderr)
	}
	if !strings.HasPrefix(stdout, "<?xml") {
		t.Fatalf("stdout %.100q, want an SVG document", stdout)
	}
	assertNode(t, stdout, "review", "#f28b82", false)
	if _, err := os.Stat(filepath.Join(dir, "pipeline.svg")); err == nil {
		t.Error("-o - wrote pipeline.svg too")
	}
}

func TestPipelineRenderFile(t *testing.T) {
	useMorphRender(t)
	dir := t.TempDir()
	dot := filepath.Join(dir, "review.dot")
	if err := os.WriteFile(dot, []byte(renderDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := morph(t, "", "pipeline", "render", dot)
	out := filepath.Join(dir, "review.svg")
	if code != exitOK || stderr != "morph: wrote "+out+"\n" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	assertNode(t, svg, "review", "none", false) // drawn as written: no run, no colours
	if strings.Contains(svg, "morph_legend") {
		t.Error("a graph without a run has a legend")
	}

	// -o elsewhere.
	other := filepath.Join(dir, "sub", "x.svg")
	if err := os.Mkdir(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := morph(t, "", "pipeline", "render", "-o", other, dot); code != exitOK || stderr != "morph: wrote "+other+"\n" {
		t.Fatalf("-o: exit %d, stderr %q", code, stderr)
	}
}

func TestPipelineRenderRunDirWithoutCheckpoint(t *testing.T) {
	useMorphRender(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pipeline.dot"), []byte(renderDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := morph(t, "", "pipeline", "render", "-o", "-", dir)
	if code != exitOK || !strings.Contains(stderr, dir+" has no checkpoint.json yet: drawing the graph without statuses") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	assertNode(t, stdout, "start", "none", false)
}

func TestPipelineRenderErrors(t *testing.T) {
	useMorphRender(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing.dot")
	bad := write("bad.dot", "digraph { a -> }")
	big := write("big.dot", "digraph { a }"+strings.Repeat(" ", 4<<20))
	svgIn := write("drawn.svg", renderDOT)
	emptyDir := filepath.Join(dir, "empty")
	if err := os.Mkdir(emptyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	badRun := filepath.Dir(write("badrun/pipeline.dot", renderDOT))
	write("badrun/checkpoint.json", "{")
	ok := write("ok.dot", renderDOT)
	var chain strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&chain, "n%d -> n%d\n", i, i+1)
	}
	many := write("many.dot", "digraph {\n"+chain.String()+"}")

	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing file", []string{missing}, exitUsage, missing + ": no such file or run directory"},
		{"not a run dir", []string{emptyDir}, exitUsage, emptyDir + " is not a run directory: it has no pipeline.dot"},
		{"bad checkpoint", []string{badRun}, exitUsage, filepath.Join(badRun, "checkpoint.json") + ": unexpected end of JSON input"},
		{"no args", nil, exitUsage, "accepts 1 arg(s), received 0"},
		{"bad timeout", []string{"--timeout", "0s", bad}, exitUsage, "--timeout must be positive, not 0s"},
		{"output is the input", []string{svgIn}, exitUsage, svgIn + ": give -o: the default output, FILE.svg, is the input"},
		{"syntax error", []string{bad}, exitUsage, bad + ":1: "},
		{"too big", []string{big}, exitUsage, big + ": source is 4194305 bytes, over the limit of 4194304"},
		{"over the renderer's limits", []string{many}, exitRunFailed, many + ": render: the graph has 1001 nodes, over the limit of 1000"},
		{"timeout", []string{"--timeout", "1ns", ok}, exitRunFailed, ok + ": render: graphviz did not finish in 0s: context deadline exceeded (--timeout 1ns)"},
		{"unwritable output", []string{"-o", filepath.Join(dir, "no", "such", "dir.svg"), ok}, exitRunFailed, "writing the SVG: open " + filepath.Join(dir, "no", "such", "dir.svg")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := morph(t, "", append([]string{"pipeline", "render"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.code, stderr)
			}
			assertFailure(t, stdout, stderr, tt.want)
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.svg")); err == nil {
		t.Error("a failed render wrote its output")
	}
}

// TestPipelineRenderNoMorphRender: without morph-render, render says where
// it looked and how to get one.
func TestPipelineRenderNoMorphRender(t *testing.T) {
	dot := filepath.Join(t.TempDir(), "review.dot")
	if err := os.WriteFile(dot, []byte(renderDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "morph-render")
	for _, tt := range []struct {
		name, env string
		want      []string
	}{
		{"MORPH_RENDER names no program", missing, []string{"morph-render not found: MORPH_RENDER=" + missing + ": "}},
		// The test binary has no morph-render beside it, and PATH has none.
		{"none beside morph or on PATH", "", []string{
			"morph-render not found (looked for ", "then on PATH): `make build` builds bin/morph-render beside bin/morph",
			"`go install ./cmd/morph-render` in morph's source", "or set MORPH_RENDER to its path",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(renderproc.EnvVar, tt.env)
			t.Setenv("PATH", t.TempDir())
			code, stdout, stderr := morph(t, "", "pipeline", "render", dot)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want none", stdout)
			}
			if want := "morph: morph-render not found"; !strings.HasPrefix(stderr, want) {
				t.Errorf("stderr %q does not start with %q", stderr, want)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			if _, err := os.Stat(strings.TrimSuffix(dot, ".dot") + ".svg"); err == nil {
				t.Error("render wrote an SVG")
			}
		})
	}
}

// assertNodes fails t unless svg draws every node of the pipeline in the
// DOT file dot.
func assertNodes(t *testing.T, svg, dot string) {
	t.Helper()
	g, err := pipeline.ParseDOTFile(dot)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range g.Nodes {
		if !strings.Contains(svg, "<title>"+n.ID+"</title>") {
			t.Errorf("node %s is not in the SVG", n.ID)
		}
	}
}

// TestPipelineRenderExamples: render draws the examples, whose sources use
// morph's DOT dialect (dotted keys, durations) that Graphviz refuses, as
// files and as a run directory.
func TestPipelineRenderExamples(t *testing.T) {
	useMorphRender(t)
	files, err := filepath.Glob(examples + "*.dot")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, dot := range files {
		t.Run(filepath.Base(dot), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.svg") // not beside the example
			code, stdout, stderr := morph(t, "", "pipeline", "render", "-o", out, dot)
			assertWrote(t, code, stdout, stderr, out)
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			assertNodes(t, string(b), dot)
		})
	}

	t.Run("release-review run", func(t *testing.T) {
		code, s, stderr := runExample(t, "release-review", "", "--yes")
		if code != exitOK || s.Status != pipeline.RunSuccess {
			t.Fatalf("run: exit %d, status %s: %s", code, s.Status, stderr)
		}
		code, stdout, stderr := morph(t, "", "pipeline", "render", s.RunDir)
		out := filepath.Join(s.RunDir, "pipeline.svg")
		assertWrote(t, code, stdout, stderr, out)
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		svg := string(b)
		assertNodes(t, svg, filepath.Join(s.RunDir, pipeline.SourceFile))
		assertNode(t, svg, "review", "#a6e3a1", false)
		assertNode(t, svg, "publish", "#a6e3a1", false)
		if !strings.Contains(svg, ">success<") {
			t.Error("the legend has no success")
		}
	})

	t.Run("hostile values", func(t *testing.T) {
		dot := filepath.Join(t.TempDir(), "hostile.dot")
		src := `digraph "x\"y" {
			start [shape=Mdiamond, label="<script>alert(1)</script>", human.timeout=10m]
			work [label="left\lC:\\dir\\n \"quoted\" \\", prompt="a\nb", llm_model=claude-sonnet-4, trick="\"]; evil [x=\""]
			start -> work [label="} digraph { z", timeout=30s]
		}`
		if err := os.WriteFile(dot, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := morph(t, "", "pipeline", "render", "-o", "-", dot)
		if code != exitOK || stderr != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		assertNodes(t, stdout, dot)
		if strings.Contains(stdout, "<script") || !strings.Contains(stdout, "&lt;script&gt;") {
			t.Errorf("the label's <script> is not escaped text:\n%s", stdout)
		}
		if strings.Contains(stdout, "<title>evil</title>") {
			t.Errorf("a value escaped its string:\n%s", stdout)
		}
		if !strings.Contains(stdout, `C:\dir\n &quot;quoted&quot; \`) {
			t.Errorf("the backslashes and quotes of a label are not drawn as written:\n%s", stdout)
		}
	})
}
