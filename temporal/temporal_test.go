package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/testenv"
)

// field is a value a test got, by name, and the value it wants.
type field struct {
	name      string
	got, want any
}

// eq is the field name whose value got should be want; the one type of
// the two keeps a constant want from taking another type than got's.
func eq[T comparable](name string, got, want T) field {
	return field{name, got, want}
}

// checkFields reports each of fields, of what, whose got is not its want.
func checkFields(t testing.TB, what string, fields ...field) {
	t.Helper()
	for _, f := range fields {
		if f.got != f.want {
			t.Errorf("%s: %s = %#v, want %#v", what, f.name, f.got, f.want)
		}
	}
}

// checkTurn fails t unless res, of what, ended in a final whose output
// prints as output, after steps steps, the first of which observed
// observations.
func checkTurn(t testing.TB, what string, res TurnResult, output string, steps int, observations ...string) {
	t.Helper()
	if res.Final == nil {
		t.Fatalf("%s: no final: %+v", what, res)
	}
	if got := fmt.Sprint(res.Final.Output); got != output {
		t.Errorf("%s: output %s, want %s", what, got, output)
	}
	if len(res.Steps) != steps {
		t.Fatalf("%s: %d steps, want %d: %+v", what, len(res.Steps), steps, res.Steps)
	}
	for i, obs := range observations {
		if res.Steps[i].Observation != obs {
			t.Errorf("%s: step %d's observation %q, want %q", what, i+1, res.Steps[i].Observation, obs)
		}
	}
}

// temporalCLI is the Temporal CLI scripts/temporal.sh built (make
// tools-temporal), or $MORPH_TEMPORAL.
func temporalCLI() (string, error) {
	if bin := os.Getenv("MORPH_TEMPORAL"); bin != "" {
		return bin, nil
	}
	out, err := exec.Command("../scripts/temporal.sh", "--print-path").Output()
	return strings.TrimSpace(string(out)), err
}

// devServer is a Temporal dev server on 127.0.0.1, at a free port, for the
// package's tests, started once.
var devServer = sync.OnceValues(func() (*testsuite.DevServer, error) {
	devServerUsed.Store(true)
	return startDevServer("")
})

// startDevServer starts a Temporal dev server on hostPort (a free port of
// 127.0.0.1 when empty), which its caller stops.
func startDevServer(hostPort string) (*testsuite.DevServer, error) {
	bin, err := temporalCLI()
	if err != nil {
		return nil, errNoCLI
	}
	return testsuite.StartDevServer(context.Background(), testsuite.DevServerOptions{
		ExistingPath:  bin,
		ClientOptions: &client.Options{HostPort: hostPort, Logger: quiet},
		LogLevel:      "error",
		ExtraArgs:     []string{"--dynamic-config-value", "system.enableActivityEagerExecution=true"},
		Stdout:        io.Discard, Stderr: io.Discard,
	})
}

// quiet is the logger of the tests' Temporal clients: their workflows'
// and workers' debug lines would drown the tests' output.
var quiet = log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

var errNoCLI = errors.New("the Temporal CLI is not built: run `make tools-temporal`")

// dev is the dev server's client. Without the CLI the test is skipped,
// except under make test ($MORPH_TEMPORAL) and CI, where it fails.
func dev(t testing.TB) client.Client {
	t.Helper()
	s, err := devServer()
	needDevServer(t, err)
	return s.Client()
}

// needDevServer ends t when err, a dev server's start's, is not nil: it
// skips t when the Temporal CLI is not built, except under make test
// ($MORPH_TEMPORAL) and CI, where it fails, as on any other error.
func needDevServer(t testing.TB, err error) {
	t.Helper()
	switch {
	case errors.Is(err, errNoCLI) && !testenv.CI() && os.Getenv("MORPH_TEMPORAL") == "":
		t.Skip(err)
	case err != nil:
		t.Fatalf("Temporal dev server: %v", err)
	}
}

// devServerUsed and buildBinUsed say whether a test started the dev
// server or built the programs, so that TestMain stops and removes only
// what a test made: a run of tests that need neither pays for neither.
var devServerUsed, buildBinUsed atomic.Bool

func TestMain(m *testing.M) {
	if cfg := os.Getenv(testWorkerEnv); cfg != "" { // the test binary as a worker (testWorker)
		os.Exit(testWorker(cfg))
	}
	code := m.Run()
	if devServerUsed.Load() {
		if s, err := devServer(); err == nil {
			s.Stop()
		}
	}
	if buildBinUsed.Load() {
		if dir, err := buildBin(); err == nil {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

// writeConfig writes a morph.toml on the scripted model (replies, each a
// reply object) with the calc tool, and returns its path.
func writeConfig(t testing.TB, replies ...string) string {
	t.Helper()
	dir := t.TempDir()
	script := `{"model":"scripted-test","replies":[{"reply":` + strings.Join(replies, `},{"reply":`) + `}]}`
	cfg := "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n\n[tools]\nbuiltin = [\"calc\"]\n\n[discovery]\nproject = false\nuser = false\n"
	for name, content := range map[string]string{"replies.json": script, "morph.toml": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "morph.toml")
}

// appendConfig appends text to the config file at path, and returns path.
func appendConfig(t testing.TB, path, text string) string {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(text)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// startWorker starts a worker of its own in the test's process, with cfg,
// on a queue of its own, and returns the queue.
func startWorker(t testing.TB, c client.Client, cfg *config.Config) string {
	t.Helper()
	queue := "q-" + t.Name()
	startWorkerOn(t, c, cfg, queue)
	return queue
}

// openLocal opens cfg's runtime in the test's process, as morph run
// does, closed at the test's end: the local run a durable one is compared
// with.
func openLocal(t testing.TB, cfg *config.Config) *config.Runtime {
	t.Helper()
	ctx := context.Background()
	rt, err := cfg.Open(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	return rt
}

// newActivities are a worker's activities with cfg, closed at the test's
// end.
func newActivities(t testing.TB, cfg *config.Config) *Activities {
	t.Helper()
	ctx := context.Background()
	a, err := NewActivities(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(ctx) })
	return a
}

// startWorkerOn starts a worker of queue in the test's process, with cfg,
// and returns it.
func startWorkerOn(t testing.TB, c client.Client, cfg *config.Config, queue string) worker.Worker {
	t.Helper()
	w := NewWorker(c, queue, newActivities(t, cfg))
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop) // after the test: a query of the ended workflow needs a worker
	return w
}

// runOnWorker runs task as a turn on Temporal, served by a worker of its
// own in the test's process with cfg.
func runOnWorker(t *testing.T, c client.Client, cfg *config.Config, task string) (TurnResult, client.WorkflowRun) {
	t.Helper()
	ctx := context.Background()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: startWorker(t, c, cfg)}, TurnWorkflow, TurnInput{SessionID: "s", Task: task})
	if err != nil {
		t.Fatal(err)
	}
	var got TurnResult
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	return got, run
}

// sameAsLocal fails t unless got ends as the local run did: its final,
// stop reason, prompt, tokens, and each step's action, observation and
// error.
func sameAsLocal(t *testing.T, got TurnResult, want *engine.Final, wantRC *engine.Context) {
	t.Helper()
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if got.Error != "" {
		t.Errorf("temporal: Error = %q, want none as locally", got.Error)
	}
	checkFields(t, "temporal, against local", eq("final", j(got.Final), j(want)), eq("StopReason", got.StopReason, wantRC.StopReason),
		eq("SystemPrompt", got.SystemPrompt, wantRC.SystemPrompt), eq("Metrics.TotalTokens", got.Metrics.TotalTokens, wantRC.Metrics.TotalTokens))
	if len(got.Steps) != len(wantRC.Steps) {
		t.Fatalf("temporal: %d steps, want the local %d:\n%s", len(got.Steps), len(wantRC.Steps), j(got.Steps))
	}
	for i, st := range got.Steps {
		w := wantRC.Steps[i]
		checkFields(t, fmt.Sprintf("step %d, against local", i+1), eq("Action", st.Action, w.Action), eq("Observation", st.Observation, w.Observation),
			eq("Error", st.Error, w.Error))
	}
}

// A turn on Temporal ends as the same turn run locally: the same steps,
// observations, prompt, final and token account.
func TestTurnMatchesLocalRun(t *testing.T) {
	c := dev(t)
	replies := []string{
		`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"calc","tool_params":{"expression":"6*7"}}}`,
		`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"nope","tool_params":{}}}`,
		`{"type":"final","final":{"thought":"done","output":42}}`,
	}
	ctx := context.Background()
	want, wantRC, err := openLocal(t, loadConfig(t, "", replies...)).Engine.Run(ctx, "what is 6*7?", engine.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}

	got, run := runOnWorker(t, c, loadConfig(t, "", replies...), "what is 6*7?")
	sameAsLocal(t, got, want, wantRC)
	var progress []Progress
	q, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), QueryProgress)
	if err != nil {
		t.Fatalf("query progress: %v", err)
	}
	if err := q.Get(&progress); err != nil {
		t.Fatalf("progress: %v", err)
	}
	if len(progress) != 3 {
		t.Fatalf("progress %+v, want 3 steps", progress)
	}
	if progress[0].Action != "calc" {
		t.Errorf("progress: step 1's Action = %q, want calc", progress[0].Action)
	}
}
