package temporal

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/morphhost/morph/internal/durable"
	"github.com/morphhost/morph/internal/testenv"
)

// The operator's commands: `morph worker --config morph.toml` serves the
// [temporal] task queue, and `morph run --temporal` prints the same
// progress lines and result as the same run without it. The service's
// address is Temporal's own TEMPORAL_ADDRESS, as no host_port is set.
func TestCLIRunOnTemporal(t *testing.T) {
	cliRunOnTemporal(t, "", "step 1  tool calc  tokens", nil,
		`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"calc","tool_params":{"expression":"6*7"}}}`,
		`{"type":"final","final":{"thought":"done","output":42}}`)
}

// A worker's engine starts the config's [[mcp_servers]] as morph run's
// does, and a durable turn's call of an MCP server's tool is an activity
// on the worker, as in the same run without Temporal: server-filesystem's
// write_file writes the file in its root (checked after the durable run,
// before the local one writes it again).
func TestCLIRunOnTemporalWithMCPServer(t *testing.T) {
	tools := testenv.MCPTools(t)
	root := t.TempDir()
	file := filepath.Join(root, "out.txt")
	servers := "\n[[mcp_servers]]\nname = \"fs\"\ntools = [\"write_file\"]\ncommand = " + strconv.Quote(filepath.Join(tools, "node_modules", ".bin", "node")) +
		"\nargs = [" + strconv.Quote(filepath.Join(tools, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")) + ", " + strconv.Quote(root) + "]\n"
	written := func() {
		if b, err := os.ReadFile(file); err != nil || string(b) != "from a durable turn" {
			t.Errorf("after the durable turn, %s holds %q, %v; want what the worker's call wrote", file, b, err)
		}
		os.Remove(file)
	}
	cliRunOnTemporal(t, servers, "step 1  tool fs.write_file  tokens", written,
		`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"fs.write_file","tool_params":{"path":`+strconv.Quote(file)+`,"content":"from a durable turn"}}}`,
		`{"type":"final","final":{"thought":"done","output":"written"}}`)
}

// cliRunOnTemporal runs a worker and `morph run --temporal` on a config of
// replies (plus extra), then afterDurable (when not nil), then the same run
// without Temporal: their results must be the same, and the progress lines
// show wantStep and a final step.
func cliRunOnTemporal(t *testing.T, extra, wantStep string, afterDurable func(), replies ...string) {
	srv, err := devServer()
	if err != nil {
		dev(t) // skips or fails, naming why
	}
	queue := fmt.Sprint("cli-", time.Now().UnixNano())
	cfg := appendConfig(t, writeConfig(t, replies...), fmt.Sprintf("\n[temporal]\ntask_queue = %q\n", queue)+extra)

	morph := bin(t, "morph")
	var logs testenv.Buffer
	env := append(os.Environ(), "TEMPORAL_ADDRESS="+srv.FrontendHostPort())
	worker := exec.Command(morph, "worker", "--config", cfg)
	worker.Env = env
	worker.Stdout, worker.Stderr = &logs, &logs
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Process.Kill(); worker.Wait() })

	run := func(args ...string) (map[string]any, string) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(morph, append([]string{"run", "--config", cfg}, args...)...)
		cmd.Stdout, cmd.Stderr, cmd.Env = &stdout, &stderr, env
		if err := cmd.Run(); err != nil {
			t.Fatalf("morph run %v: %v\n%s\nworker:\n%s", args, err, stderr.String(), logs.String())
		}
		var out map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("%v: %s", err, stdout.String())
		}
		delete(out["metrics"].(map[string]any), "elapsed_ms") // times differ
		delete(out["metrics"].(map[string]any), "llm_time_ms")
		delete(out["metrics"].(map[string]any), "start_time")
		steps, _ := out["steps"].([]any)
		for _, st := range steps {
			delete(st.(map[string]any), "duration_ns") // times differ
		}
		return out, stderr.String()
	}
	durable, progress := run("--temporal", "what is 6*7?")
	if afterDurable != nil {
		afterDurable()
	}
	local, _ := run("what is 6*7?")
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if j(durable) != j(local) {
		t.Errorf("morph run --temporal:\n%s\nmorph run:\n%s", j(durable), j(local))
	}
	if !strings.Contains(progress, wantStep) || !strings.Contains(progress, "step 2  final  tokens") {
		t.Errorf("progress lines:\n%s", progress)
	}
}

// `morph pipeline run --temporal` prints the progress lines and the
// summary of the same run without it, its gate asked on the console and
// the answer sent; `morph pipeline resume --temporal` of the ended
// workflow says it is over.
func TestCLIPipelineOnTemporal(t *testing.T) {
	srv, err := devServer()
	if err != nil {
		dev(t) // skips or fails, naming why
	}
	queue := fmt.Sprint("cli-pipe-", time.Now().UnixNano())
	cfg := appendConfig(t, writeConfig(t, slices.Concat(planReplies, planReplies, planReplies)...), // the worker's: three runs plan
		fmt.Sprintf("\n[temporal]\nhost_port = %q\ntask_queue = %q\n", srv.FrontendHostPort(), queue))
	dot := filepath.Join(t.TempDir(), "durable.dot")
	if err := os.WriteFile(dot, []byte(durablePipeline), 0o644); err != nil {
		t.Fatal(err)
	}

	morph := bin(t, "morph")
	var logs testenv.Buffer
	worker := exec.Command(morph, "worker", "--config", cfg)
	worker.Stdout, worker.Stderr = &logs, &logs
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Process.Kill(); worker.Wait() })

	run := func(wantCode int, args ...string) (map[string]any, string) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(morph, append([]string{"pipeline"}, args...)...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader("S\n"), &stdout, &stderr
		if err := cmd.Run(); cmd.ProcessState.ExitCode() != wantCode {
			t.Fatalf("morph pipeline %v: %v\n%s\nworker:\n%s", args, err, stderr.String(), logs.String())
		}
		var out map[string]any
		if wantCode == 0 {
			if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
				t.Fatalf("%v: %s", err, stdout.String())
			}
			for _, k := range []string{"run_id", "run_dir", "duration_ms"} { // differ
				delete(out, k)
			}
			for _, n := range out["nodes"].(map[string]any) {
				delete(n.(map[string]any), "duration_ms")
			}
		}
		return out, stderr.String()
	}
	onTemporal, progress := run(0, "run", "--temporal", "--config", cfg, dot)
	local, localProgress := run(0, "run", "--config", cfg, "--run-dir", filepath.Join(t.TempDir(), "run"), dot)
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if j(onTemporal) != j(local) {
		t.Errorf("morph pipeline run --temporal:\n%s\nmorph pipeline run:\n%s", j(onTemporal), j(local))
	}
	for _, line := range []string{"stage plan success", "stage b2 (branch b) success", "[gate] Ship a?", "pipeline completed"} {
		if !strings.Contains(progress, line) || !strings.Contains(localProgress, line) {
			t.Errorf("no %q in the progress:\n%s\nlocally:\n%s", line, progress, localProgress)
		}
	}
	id := regexp.MustCompile(`morph: workflow (\S+)`).FindStringSubmatch(progress)
	if id == nil {
		t.Fatalf("no workflow id in:\n%s", progress)
	}
	// As locally, resuming a run that is over runs nothing: its summary,
	// with its exit code.
	if again, stderr := run(0, "resume", "--temporal", "--config", cfg, id[1]); j(again) != j(onTemporal) || !strings.Contains(stderr, "ended success: nothing to resume") {
		t.Errorf("resume of an ended workflow: %s\n%s", j(again), stderr)
	}

	// Canceled at its gate (no one answers), the workflow ends canceled
	// with its checkpoint; resume --temporal goes on from there in a new
	// workflow, to the local run's end.
	var stopped, stoppedErr testenv.Buffer
	cancelRun := exec.Command(morph, "pipeline", "run", "--temporal", "--config", cfg, dot)
	cancelRun.Stdout, cancelRun.Stderr = &stopped, &stoppedErr
	if err := cancelRun.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stoppedErr.String(), "[gate] Ship a?"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the gate never asked:\n%s", stoppedErr.String())
		}
	}
	id = regexp.MustCompile(`morph: workflow (\S+)`).FindStringSubmatch(stoppedErr.String())
	if err := srv.Client().CancelWorkflow(context.Background(), id[1], ""); err != nil {
		t.Fatal(err)
	}
	if err := cancelRun.Wait(); cancelRun.ProcessState.ExitCode() != 3 || !strings.Contains(stoppedErr.String(), "resume with: morph pipeline resume --temporal") {
		t.Fatalf("canceled: %v\n%s\n%s", err, stoppedErr.String(), stopped.String())
	}
	resumed, _ := run(0, "resume", "--temporal", "--config", cfg, id[1])
	if j(resumed) != j(local) {
		t.Errorf("morph pipeline resume --temporal:\n%s\nmorph pipeline run:\n%s", j(resumed), j(local))
	}

	// morph-temporal's protocol: the workflow's id, the events, the
	// question; an answer the workflow refuses is written on its stderr;
	// killed there, the workflow waits on, and resume --temporal attaches
	// to it, asks the gate and follows it to its end.
	mt := exec.Command(bin(t, "morph-temporal"), "pipeline", "run", "--config", cfg, dot)
	var refusals testenv.Buffer
	mt.Stderr = &refusals
	answers, _ := mt.StdinPipe()
	defer answers.Close()
	out, _ := mt.StdoutPipe()
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	stop := time.AfterFunc(20*time.Second, func() { mt.Process.Kill() }) // no question: the loop ends
	defer stop.Stop()
	lines := bufio.NewScanner(out)
	var first, line durable.PipelineLine
	for line.Question == nil && lines.Scan() {
		line = durable.PipelineLine{}
		if err := json.Unmarshal(lines.Bytes(), &line); err != nil {
			t.Fatalf("%v: %s", err, lines.Text())
		}
		if first.Workflow == "" {
			first = line
		}
	}
	if first.Workflow == "" {
		t.Errorf("morph-temporal pipeline run wrote %+v first, want the workflow's line", first)
	}
	if line.Question == nil {
		t.Fatalf("morph-temporal pipeline run wrote %+v last, want a question", line)
	}
	if line.Question.NodeID != "gate" {
		t.Fatalf("morph-temporal pipeline run asked at %q, want gate", line.Question.NodeID)
	}
	fmt.Fprintln(answers, `{"Node":"gate","Choice":"maybe"}`)
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(refusals.String(), ErrNoChoice.Error()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("morph-temporal did not write the refusal of an answer naming no choice: %q", refusals.String())
		}
	}
	mt.Process.Kill()
	mt.Wait()
	attached, _ := run(0, "resume", "--temporal", "--config", cfg, first.Workflow)
	if j(attached) != j(local) {
		t.Errorf("morph pipeline resume --temporal of a running workflow:\n%s\nmorph pipeline run:\n%s", j(attached), j(local))
	}
}

// freeAddr is a port of 127.0.0.1 where nothing listens, "host:port".
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// `morph worker` and `morph run --temporal` started before their Temporal
// service wait for it, up to [temporal] dial_timeout, rather than fail at
// once: both start on a port where nothing listens and say they are
// trying again; a dev server then starts on that port, and the run ends
// with the model's answer, served by the worker.
func TestCLIWaitsForTemporal(t *testing.T) {
	addr := freeAddr(t)
	clients := startWaiting(t, fmt.Sprintf("host_port = %q\n", addr), fmt.Sprintf("morph-temporal: Temporal at %s does not answer", addr))
	srv, err := startDevServer(addr)
	needDevServer(t, err)
	t.Cleanup(func() { srv.Stop() })
	clients.answer42(t)
}

// waitingClients are a `morph worker` and a `morph run --temporal "what is
// 6*7?"` (the model asks calc, then answers 42) started before their
// Temporal service can serve them, both waiting.
type waitingClients struct {
	run                  *exec.Cmd
	logs, stdout, stderr *testenv.Buffer
}

// startWaiting starts waitingClients with the [temporal] keys temporal
// (dial_timeout 2 minutes) and waits until both have said waiting.
func startWaiting(t *testing.T, temporal, waiting string) *waitingClients {
	t.Helper()
	replies := []string{
		`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"calc","tool_params":{"expression":"6*7"}}}`,
		`{"type":"final","final":{"thought":"done","output":42}}`,
	}
	cfg := appendConfig(t, writeConfig(t, replies...), "\n[temporal]\ndial_timeout = \"2m\"\n"+temporal)
	morph := bin(t, "morph")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	c := &waitingClients{logs: &testenv.Buffer{}, stdout: &testenv.Buffer{}, stderr: &testenv.Buffer{}}
	worker := exec.CommandContext(ctx, morph, "worker", "--config", cfg)
	worker.Stdout, worker.Stderr = c.logs, c.logs
	c.run = exec.CommandContext(ctx, morph, "run", "--temporal", "--config", cfg, "what is 6*7?")
	c.run.Stdout, c.run.Stderr = c.stdout, c.stderr
	for _, cmd := range []*exec.Cmd{worker, c.run} {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { worker.Process.Kill(); worker.Wait() })
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(c.logs.String(), waiting) || !strings.Contains(c.stderr.String(), waiting); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not both waiting (%q):\nworker:\n%s\nrun:\n%s", waiting, c.logs.String(), c.stderr.String())
		}
	}
	return c
}

// answer42 waits for the run's end: its output must be 42.
func (c *waitingClients) answer42(t *testing.T) {
	t.Helper()
	if err := c.run.Wait(); err != nil {
		t.Fatalf("morph run --temporal: %v\n%s\nworker:\n%s", err, c.stderr.String(), c.logs.String())
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(c.stdout.String()), &out); err != nil || out["output"] != 42.0 {
		t.Errorf("morph run --temporal wrote %s (%v), want the output 42", c.stdout.String(), err)
	}
}

// With nothing at its [temporal] host_port, `morph worker`, `morph run
// --temporal` and `morph pipeline run --temporal` each try to reach it
// for dial_timeout (1s, not the default 30s), then fail naming the
// address, the key and the last attempt's error.
func TestCLIGivesUpOnTemporal(t *testing.T) {
	addr := freeAddr(t)
	cfg := appendConfig(t, writeConfig(t, `{"type":"final","final":{"thought":"t","output":1}}`),
		fmt.Sprintf("\n[temporal]\nhost_port = %q\ndial_timeout = \"1s\"\n", addr))
	dot := filepath.Join(t.TempDir(), "durable.dot")
	if err := os.WriteFile(dot, []byte(durablePipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	morph := bin(t, "morph")
	for _, args := range [][]string{
		{"worker", "--config", cfg},
		{"run", "--temporal", "--config", cfg, "what is 6*7?"},
		{"pipeline", "run", "--temporal", "--config", cfg, dot},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(morph, args...)
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		if err == nil {
			t.Errorf("morph %v succeeded with no Temporal at %s", args, addr)
		}
		if took < time.Second || took > 20*time.Second {
			t.Errorf("morph %v gave up after %s: want dial_timeout, 1s, and a little", args, took)
		}
		for _, want := range []string{"Temporal at " + addr + " did not answer within 1s ([temporal] dial_timeout;", "connection refused",
			"Temporal at " + addr + " does not answer"} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("morph %v: no %q in its error:\n%s", args, want, stderr.String())
			}
		}
	}
}

// `morph worker` and `morph run --temporal` whose [temporal] namespace the
// service does not have yet (a server just started registers its own a
// little after it answers) wait for it, up to dial_timeout, saying so; the
// namespace then registered, the run ends with the model's answer.
func TestCLIWaitsForNamespace(t *testing.T) {
	c := dev(t)
	srv, _ := devServer()
	ns := fmt.Sprint("ns-", time.Now().UnixNano())
	clients := startWaiting(t, fmt.Sprintf("host_port = %q\nnamespace = %q\n", srv.FrontendHostPort(), ns),
		fmt.Sprintf("morph-temporal: Temporal at %s has no namespace %s yet", srv.FrontendHostPort(), ns))
	if _, err := c.WorkflowService().RegisterNamespace(context.Background(), &workflowservice.RegisterNamespaceRequest{Namespace: ns,
		WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	clients.answer42(t)
}

// `morph run --temporal` with a [temporal] namespace its service never
// has gives up after dial_timeout (1s), naming the address, the namespace
// and the keys to change.
func TestCLIGivesUpOnNamespace(t *testing.T) {
	dev(t)
	srv, _ := devServer()
	cfg := appendConfig(t, writeConfig(t, `{"type":"final","final":{"thought":"t","output":1}}`),
		fmt.Sprintf("\n[temporal]\nhost_port = %q\nnamespace = \"no-such-namespace\"\ndial_timeout = \"1s\"\n", srv.FrontendHostPort()))
	var stderr bytes.Buffer
	cmd := exec.Command(bin(t, "morph"), "run", "--temporal", "--config", cfg, "what is 6*7?")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Errorf("morph run --temporal succeeded in a namespace %s does not have", srv.FrontendHostPort())
	}
	want := fmt.Sprintf("Temporal at %s has no namespace no-such-namespace after 1s ([temporal] dial_timeout; set [temporal] namespace", srv.FrontendHostPort())
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("no %q in its error:\n%s", want, stderr.String())
	}
}
