package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/pipeline"
)

const examples = "../../examples/pipelines/"

// runExample runs an example pipeline through the CLI into a fresh run
// directory and decodes its summary.
func runExample(t *testing.T, name, stdin string, flags ...string) (int, pipelineSummary, string) {
	t.Helper()
	args := append([]string{"pipeline", "run", "--config", examples + name + ".toml", "--run-dir", filepath.Join(t.TempDir(), "run")}, flags...)
	args = append(args, examples+name+".dot")
	code, stdout, stderr := morph(t, stdin, args...)
	var s pipelineSummary
	if stdout != "" {
		if err := json.Unmarshal([]byte(stdout), &s); err != nil {
			t.Fatalf("summary %q: %v", stdout, err)
		}
	}
	return code, s, stderr
}

// In parallel with the package's other parallel tests: wasm-verify's
// compilation of verify.wasm, a standard Go guest (the only test here that
// loads it), is most of its time, and it overlaps TestPluginNew's builds.
func TestPipelineRunExamples(t *testing.T) {
	t.Parallel()
	testenv.Built(t, examples+"verify/verify.wasm", "examples")
	for _, tc := range []struct {
		name  string
		flags []string
		path  string
	}{
		{"plan-implement-verify", nil, "start,plan,implement,verify,implement,verify,done"},
		{"release-review", []string{"--yes"}, "start,draft,review,checks,join,publish,done"},
		{"wasm-verify", nil, "start,implement,verify,implement,verify,done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, s, stderr := runExample(t, tc.name, "", tc.flags...)
			if code != 0 || s.Status != pipeline.RunSuccess {
				t.Fatalf("exit %d, status %s: %s", code, s.Status, stderr)
			}
			if got := strings.Join(s.Path, ","); got != tc.path {
				t.Errorf("path %s, want %s", got, tc.path)
			}
			if s.TotalTokens == 0 {
				t.Errorf("total_tokens = 0, want the run's (summary %+v)", s)
			}
			if s.CostUSD == 0 {
				t.Errorf("cost_usd = 0, want the run's (summary %+v)", s)
			}
			if s.Nodes["implement"].Status == "" && s.Nodes["draft"].Status == "" {
				t.Errorf("the summary has no status for implement or draft: %+v", s.Nodes)
			}
			// One progress line per stage run.
			if n := strings.Count(stderr, "\nstage "); n != len(s.Path)+countBranches(s) {
				t.Errorf("%d stage lines for %d stages:\n%s", n, len(s.Path), stderr)
			}
			for _, f := range []string{pipeline.CheckpointFile, pipeline.ManifestFile, pipeline.SourceFile} {
				if _, err := os.Stat(filepath.Join(s.RunDir, f)); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// countBranches counts the stages that ran inside parallel branches, which
// are not on the run's path.
func countBranches(s pipelineSummary) int {
	on := map[string]bool{}
	for _, id := range s.Path {
		on[id] = true
	}
	n := 0
	for id := range s.Nodes {
		if !on[id] {
			n++
		}
	}
	return n
}

func TestPipelineHumanGateOnConsole(t *testing.T) {
	code, s, stderr := runExample(t, "release-review", "x\nA\n")
	if code != 0 || s.Status != pipeline.RunSuccess {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Publish these notes?", "  [A] Approve", "  [R] Revise", "not a choice: x"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestPipelineBudgetAndResume(t *testing.T) {
	code, s, stderr := runExample(t, "plan-implement-verify", "", "--max-tokens", "300")
	if code != exitStopped {
		t.Fatalf("exit %d, want %d: %s", code, exitStopped, stderr)
	}
	if s.Status != pipeline.RunBudget {
		t.Fatalf("status %s, want %s: %s", s.Status, pipeline.RunBudget, stderr)
	}
	if s.NextNode != "implement" {
		t.Fatalf("next node %q, want implement", s.NextNode)
	}
	if !strings.Contains(stderr, "--resume "+s.RunDir) {
		t.Errorf("no resume hint: %s", stderr)
	}
	// The replies file is replayed from its start by the new process, as a
	// real model would answer anew: skip the two replies already used.
	cfg := setup(t, skipReplies(t, examples+"plan-implement-verify.replies.json", 1), "")
	code, stdout, stderr := morph(t, "", "pipeline", "run", "--config", cfg, "--resume", s.RunDir)
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	var r pipelineSummary
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Path, ","); got != "start,plan,implement,verify,implement,verify,done" || r.Status != pipeline.RunSuccess {
		t.Errorf("resumed run: %s %s", r.Status, got)
	}
	if r.TotalTokens <= s.TotalTokens {
		t.Errorf("tokens %d after resume, %d before: the usage before the stop was lost", r.TotalTokens, s.TotalTokens)
	}
	// Resumed again, the run that is over prints the summary it ended with
	// and exits as it did (as run --resume).
	code, again, stderr := morph(t, "", "pipeline", "resume", "--config", cfg, s.RunDir)
	if code != 0 {
		t.Errorf("resuming a finished run: exit %d, want 0: %s", code, stderr)
	}
	if again != stdout {
		t.Errorf("resuming a finished run printed\n%s\nwant the summary\n%s", again, stdout)
	}
	assertHas(t, "resuming a finished run: stderr", stderr, "is over (success): nothing ran")
	code, _, stderr = morph(t, "", "pipeline", "run", "--temporal", "--config", cfg, "--resume", s.RunDir, examples+"plan-implement-verify.dot")
	if code != exitUsage || !strings.Contains(stderr, "morph pipeline resume --temporal WORKFLOW_ID") {
		t.Errorf("run --temporal --resume: exit %d: %s", code, stderr)
	}
}

// skipReplies returns a replies file's replies after the first n, as JSON
// texts for setup.
func skipReplies(t *testing.T, path string, n int) []string {
	t.Helper()
	var f struct {
		Replies []json.RawMessage `json:"replies"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range f.Replies[n:] {
		out = append(out, string(r))
	}
	return out
}

func TestPipelineValidate(t *testing.T) {
	code, stdout, stderr := morph(t, "", "pipeline", "validate", examples+"plan-implement-verify.dot")
	if code != 0 {
		t.Errorf("a valid pipeline: exit %d, want 0: %s", code, stderr)
	}
	if stdout != "" {
		t.Errorf("a valid pipeline: stdout %q, want none", stdout)
	}
	assertHas(t, "a valid pipeline: stderr", stderr, "0 error(s), 0 warning(s)")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.dot")
	src := "digraph p {\n  start [shape=Mdiamond]\n  build [shape=parallelogram, tool_command=\"make\"]\n  done [shape=Msquare]\n  start -> build -> done\n  lost\n}\n"
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = morph(t, "", "pipeline", "validate", bad)
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	for _, want := range []string{bad + ":6: error reachability", "[node lost]"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "shell_disabled") { // the config's to say: graph only
		t.Errorf("without --config, allow_shell is not checked:\n%s", stdout)
	}
	code, stdout, _ = morph(t, "", "pipeline", "validate", "--json", bad)
	var ds []pipeline.Diagnostic
	if code != exitUsage {
		t.Errorf("--json: exit %d, want %d", code, exitUsage)
	}
	if err := json.Unmarshal([]byte(stdout), &ds); err != nil {
		t.Errorf("--json: %v\n%s", err, stdout)
	} else if len(ds) < 2 {
		t.Errorf("--json: %d diagnostics, want at least 2: %s", len(ds), stdout)
	}
	// With a config, its allow_shell applies: off by default, on clears
	// the shell error.
	_, stdout, _ = morph(t, "", "pipeline", "validate", "--config", setup(t, []string{finalReply}, ""), bad)
	for _, want := range []string{bad + ":3: error shell_disabled", "allow_shell = true"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--config without allow_shell: diagnostics lack %q:\n%s", want, stdout)
		}
	}
	cfg := setup(t, []string{finalReply}, "[pipeline]\nallow_shell = true\n")
	_, stdout, _ = morph(t, "", "pipeline", "validate", "--config", cfg, bad)
	if strings.Contains(stdout, "shell_disabled") {
		t.Errorf("allow_shell = true: %s", stdout)
	}
	// A run refuses a pipeline with an ERROR, before any stage.
	code, stdout, stderr = morph(t, "", "pipeline", "run", "--config", cfg, "--run-dir", filepath.Join(dir, "run"), bad)
	if code != exitUsage {
		t.Errorf("run of an invalid pipeline: exit %d, want %d: %s", code, exitUsage, stderr)
	}
	if stdout != "" {
		t.Errorf("run of an invalid pipeline: stdout %q, want none", stdout)
	}
	assertHas(t, "run of an invalid pipeline: stderr", stderr, "does not validate")
	code, _, stderr = morph(t, "", "pipeline", "validate", filepath.Join(dir, "missing.dot"))
	if code != exitUsage || !strings.Contains(stderr, "missing.dot") {
		t.Errorf("missing file: exit %d: %s", code, stderr)
	}
}

// TestPipelineCrashResume kills the morph process (SIGKILL) in the middle of
// a stage, after a checkpoint; a new process resumes the run from that
// stage, without running the stages before it again, and ends as an
// uninterrupted run does.
func TestPipelineCrashResume(t *testing.T) {
	bin := morphBinary(t)
	dir := t.TempDir()
	dot := filepath.Join(dir, "p.dot")
	// wait blocks until the test lets it go (the file "go" in the run
	// directory), so the process is killed inside it.
	src := `digraph p {
  start [shape=Mdiamond]
  a [prompt="first"]
  wait [shape=parallelogram, tool_command="test -f \"$MORPH_RUN_DIR/go\" || sleep 60"]
  b [prompt="second"]
  done [shape=Msquare]
  start -> a -> wait -> b -> done
}`
	if err := os.WriteFile(dot, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := setup(t, []string{finalReply, finalReply}, "[pipeline]\nallow_shell = true\n")
	runDir := filepath.Join(dir, "run")
	p := startMorph(t, bin, "pipeline", "run", "--config", cfg, "--run-dir", runDir, dot)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if cp, err := pipeline.LoadCheckpoint(runDir); err == nil && cp.NextNode == "wait" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint before wait:\n%s", p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // into wait's sleep
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)

	if err := os.WriteFile(filepath.Join(runDir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// What a kill between a temporary file's creation and its rename leaves
	// (named as the runner names them), beside files of other names.
	orphans := []string{filepath.Join(runDir, "artifacts", ".wait.output.morph-tmp2045811657"), filepath.Join(runDir, ".checkpoint.json.morph-tmp17")}
	others := []string{filepath.Join(runDir, "artifacts", "wait.output.tmp1"), filepath.Join(runDir, ".checkpoint.json.tmp"), filepath.Join(runDir, ".notes.tmp3")}
	for _, f := range append(orphans, others...) {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("part"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := morph(t, "", "pipeline", "run", "--config", cfg, "--resume", runDir)
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	for _, f := range orphans {
		if _, err := os.Stat(f); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(stderr, f) {
			t.Errorf("%s: %v, want it removed and logged:\n%s", f, err, stderr)
		}
	}
	for _, f := range others {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s is not the runner's: %v", f, err)
		}
	}
	var s pipelineSummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Path, ","); got != "start,a,wait,b,done" {
		t.Errorf("path %s", got)
	}
	if strings.Contains(stderr, "stage a ") {
		t.Errorf("after the crash, stage a ran again:\n%s", stderr)
	}
	for _, node := range []string{"a", "wait"} {
		if n := s.Nodes[node].Visits; n != 1 {
			t.Errorf("after the crash: %s visited %d times, want once", node, n)
		}
	}
}

// TestPipelineResumeOfAFailedRun: "morph pipeline resume" of a run that
// failed runs nothing, prints the summary the run printed and exits 1 as
// the run did.
func TestPipelineResumeOfAFailedRun(t *testing.T) {
	dir := t.TempDir()
	dot := filepath.Join(dir, "p.dot")
	src := `digraph p {
  start [shape=Mdiamond]
  a [prompt="first"]
  check [shape=parallelogram, tool_command="echo ran >> \"$MORPH_RUN_DIR/ran\"; exit 3"]
  done [shape=Msquare]
  start -> a -> check -> done
}`
	if err := os.WriteFile(dot, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := setup(t, []string{finalReply}, "[pipeline]\nallow_shell = true\n")
	runDir := filepath.Join(dir, "run")
	code, first, stderr := morph(t, "", "pipeline", "run", "--config", cfg, "--run-dir", runDir, dot)
	var s pipelineSummary
	if code != exitRunFailed {
		t.Fatalf("run: exit %d, want %d: %s", code, exitRunFailed, stderr)
	}
	if err := json.Unmarshal([]byte(first), &s); err != nil {
		t.Fatalf("run: %v\n%s", err, first)
	}
	if s.Status != pipeline.RunFail {
		t.Fatalf("run: status %s, want %s", s.Status, pipeline.RunFail)
	}
	code, again, stderr := morph(t, "", "pipeline", "resume", "--config", cfg, runDir)
	if code != exitRunFailed {
		t.Errorf("resume: exit %d, want %d: %s", code, exitRunFailed, stderr)
	}
	if again != first {
		t.Errorf("resume printed\n%s\nwant the summary\n%s", again, first)
	}
	assertHas(t, "resume: stderr", stderr, "is over (fail): nothing ran", "pipeline failed at check")
	if b, err := os.ReadFile(filepath.Join(runDir, "ran")); err != nil || string(b) != "ran\n" {
		t.Errorf("the failing stage ran %q (%v), want once", b, err)
	}
}

// A node's base_url must be an endpoint the operator allowed: the model's
// API key goes with every request.
func TestPipelineEndpointNotAllowed(t *testing.T) {
	dir := t.TempDir()
	dot := filepath.Join(dir, "p.dot")
	src := "digraph p { start [shape=Mdiamond]; a [prompt=\"x\", base_url=\"http://127.0.0.1:1/v1\"]; done [shape=Msquare]; start -> a -> done }"
	if err := os.WriteFile(dot, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := setup(t, []string{finalReply}, "")
	code, _, stderr := morph(t, "", "pipeline", "run", "--config", cfg, "--run-dir", filepath.Join(dir, "run"), dot)
	if code != exitRunFailed {
		t.Fatalf("exit %d, want %d: %s", code, exitRunFailed, stderr)
	}
	assertHas(t, "stderr", stderr, "not an endpoint morph.toml allows", "[pipeline] endpoints")
}
