package pipeline_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/internal/dotcorpus"
	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/pipeline"
)

// expectation is a row of testdata/published.txt: what morph makes of one
// distinct file, named by its content's SHA-256.
type expectation struct {
	line    int
	name    string
	verdict string // dotcorpus.Verdict.String()
	// end is how a run of a runs* file ends on the stub backend:
	// "success", or "fail@NODE" for the node it fails at; "-" otherwise.
	end    string
	reason string
}

const (
	publishedTable = "testdata/published.txt"
	conformanceDir = "testdata/conformance"
)

// readExpectations reads the table: tab-separated sha256, project/path,
// verdict, end, reason; '#' starts a comment line.
func readExpectations(t *testing.T) map[string]*expectation {
	t.Helper()
	f, err := os.Open(publishedTable)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]*expectation{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != 5 || len(cols[0]) != 64 {
			t.Fatalf("%s:%d: want 5 tab-separated columns (sha256, project/path, verdict, end, reason), got %q", publishedTable, n, line)
		}
		if _, dup := rows[cols[0]]; dup {
			t.Fatalf("%s:%d: a second row for %s", publishedTable, n, cols[0])
		}
		rows[cols[0]] = &expectation{line: n, name: cols[1], verdict: cols[2], end: cols[3], reason: cols[4]}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestPublishedPipelines runs the published pipelines (the modules
// scripts/dot-corpus.sh pins, which `make test` downloads) and our own
// files for what they lack (testdata/conformance): each distinct file is
// classified as the table says, and each that validates runs to the end
// the table says on a stub backend, never refused. A file not in the
// table, or a row whose file is gone, fails: the table is the record of
// what morph takes.
func TestPublishedPipelines(t *testing.T) {
	rows := readExpectations(t)
	t.Run("conformance", func(t *testing.T) {
		checkCorpus(t, rows, []string{conformanceDir}, func(name string) bool { return strings.HasPrefix(name, "conformance/") })
	})
	t.Run("published", func(t *testing.T) {
		dirs := testenv.DotCorpus(t)
		checkCorpus(t, rows, dirs, func(name string) bool { return !strings.HasPrefix(name, "conformance/") })
	})
}

// checkCorpus checks the distinct files under dirs against the rows that
// mine selects.
func checkCorpus(t *testing.T, rows map[string]*expectation, dirs []string, mine func(name string) bool) {
	files, err := dotcorpus.Walk(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		seen[f.Sum] = true
		row, ok := rows[f.Sum]
		got := dotcorpus.Classify(f)
		if !ok {
			t.Errorf("%s is not in %s: add\n%s\t%s\t%s\t%s\t<why>", f.Name, publishedTable, f.Sum, f.Name, got, endOf(t, f, got))
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			if got.String() != row.verdict {
				t.Fatalf("%s (%s:%d): %s, the table says %s (%s); error: %v", f.Name, publishedTable, row.line, got, row.verdict, row.reason, got.Err)
			}
			if end := endOf(t, f, got); end != row.end {
				t.Errorf("%s (%s:%d): the run ended %s, the table says %s (%s)", f.Name, publishedTable, row.line, end, row.end, row.reason)
			}
		})
	}
	for sum, row := range rows {
		if mine(row.name) && !seen[sum] {
			t.Errorf("%s:%d: %s (%s) is not among the files: remove the row, or restore the file", publishedTable, row.line, row.name, sum)
		}
	}
}

// endOf runs f when it validates and says how the run ended: "success",
// "fail@NODE", or "-" when it is not run.
func endOf(t *testing.T, f dotcorpus.File, v dotcorpus.Verdict) string {
	if v.Kind != dotcorpus.Runs && v.Kind != dotcorpus.RunsShell {
		return "-"
	}
	g, err := pipeline.ParseDOTNamed(f.Path, f.Src)
	if err != nil {
		t.Fatal(err)
	}
	handlers := pipeline.DefaultHandlerRegistry()
	handlers.Register(pipeline.NewHandler(pipeline.TypeTool, stubTool))
	r := &pipeline.Runner{
		Handlers:   handlers,
		Backend:    stubAgent{},
		AllowShell: v.Kind == dotcorpus.RunsShell, // validated only: stubTool runs no shell
		// MaxWallTime is a safety net for a run that would not end;
		// no assertion depends on it.
		Limits: pipeline.Limits{MaxSteps: 2000, MaxWallTime: 2 * time.Minute},
		Clock:  noWait{},
	}
	res, err := r.Run(context.Background(), g, pipeline.RunConfig{RunDir: filepath.Join(runsDir(t), "run"), Source: f.Src, DotFile: f.Path})
	if err != nil {
		t.Fatalf("%s: refused at its run (it validated): %v", f.Name, err)
	}
	switch res.State {
	case pipeline.RunSuccess:
		return res.State
	case pipeline.RunFail:
		return "fail@" + res.FailedNode
	}
	return fmt.Sprintf("%s (%s)", res.State, res.FailureReason)
}

// runsDir is a directory for a run, removed at the end of t: on tmpfs
// where there is one, since the runs' fsyncs (two a stage) would otherwise
// make the test take half a minute on a loaded disk.
func runsDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "morph-published"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// noWait is a clock whose sleeps (a retry's backoff) end at once.
type noWait struct{}

func (noWait) Now() time.Time { return time.Now() }

func (noWait) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// stubAgent is the agent of every stage: it succeeds at once, with the
// marker auto_status=false stages want.
type stubAgent struct{}

func (stubAgent) RunAgent(_ context.Context, cfg pipeline.AgentRunConfig) (*pipeline.AgentRunResult, error) {
	return &pipeline.AgentRunResult{Output: "done. OUTCOME:SUCCESS", Success: true, StopReason: "final", Steps: 1}, nil
}

// stubTool is every tool node: it succeeds without running anything. The
// published files' tool_command lines are their authors' shell, which a
// test must not run.
func stubTool(_ context.Context, node *pipeline.Node, _ *pipeline.Context, _ *pipeline.ArtifactStore) (*pipeline.Outcome, error) {
	return pipeline.Success(), nil
}
