package temporal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/internal/testenv"
)

// The operator's commands: `morph worker --config morph.toml` serves the
// [temporal] task queue, and `morph run --temporal` prints the same
// progress lines and result as the same run without it. The service's
// address is Temporal's own TEMPORAL_ADDRESS, as no host_port is set.
func TestCLIRunOnTemporal(t *testing.T) {
	srv, err := devServer()
	if err != nil {
		dev(t) // skips or fails, naming why
	}
	replies := []string{
		`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"calc","tool_params":{"expression":"6*7"}}}`,
		`{"type":"final","final":{"thought":"done","output":42}}`,
	}
	queue := fmt.Sprint("cli-", time.Now().UnixNano())
	cfg := appendConfig(t, writeConfig(t, replies...), fmt.Sprintf("\n[temporal]\ntask_queue = %q\n", queue))

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
		return out, stderr.String()
	}
	durable, progress := run("--temporal", "what is 6*7?")
	local, _ := run("what is 6*7?")
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if j(durable) != j(local) {
		t.Errorf("morph run --temporal:\n%s\nmorph run:\n%s", j(durable), j(local))
	}
	if !strings.Contains(progress, "step 1  tool calc  tokens") || !strings.Contains(progress, "step 2  final  tokens") {
		t.Errorf("progress lines:\n%s", progress)
	}
}
