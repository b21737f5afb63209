package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/morphhost/morph/internal/testenv"
)

const (
	planReply  = `{"reply":{"type":"plan","plan":{"thought":"one calc call","steps":[{"step":"compute","status":"in_progress"}]}}}`
	calcReply  = `{"reply":{"type":"tool_call","tool_call":{"thought":"compute","tool_name":"calc","tool_params":{"expression":"0.175 * 2340 + sqrt(1764)"}}}}`
	finalReply = `{"reply":{"type":"final","final":{"thought":"calc says 451.5","output":451.5,"working":["409.5 + 42"]}}}`
)

// setup writes a config using the scripted provider with replies, and
// returns the config's path. extra is appended to the config.
func setup(t testing.TB, replies []string, extra string) string {
	t.Helper()
	dir := t.TempDir()
	script := `{"model":"scripted-test","replies":[` + strings.Join(replies, ",") + `]}`
	if err := os.WriteFile(filepath.Join(dir, "replies.json"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := `[llm]
provider = "scripted"
scripted_replies = "replies.json"

[llm.pricing."scripted-test"]
input = 2.5
output = 10

[tools]
builtin = ["calc"]
` + extra
	path := filepath.Join(dir, "morph.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// morph runs the CLI and returns its exit code, stdout and stderr.
func morph(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

type output struct {
	Output  any             `json:"output"`
	Thought string          `json:"thought"`
	Final   json.RawMessage `json:"final"`
	Plan    *struct {
		Steps []struct{ Step, Status string } `json:"steps"`
	} `json:"plan"`
	StopReason   string         `json:"stop_reason"`
	Parameters   map[string]any `json:"parameters"`
	SystemPrompt string         `json:"system_prompt"`
	Metrics      struct {
		LLMRounds    int     `json:"llm_rounds"`
		ToolCalls    int     `json:"tool_calls"`
		ParseRetries int     `json:"parse_retries"`
		InputTokens  int     `json:"input_tokens"`
		OutputTokens int     `json:"output_tokens"`
		TotalTokens  int     `json:"total_tokens"`
		CostUSD      float64 `json:"cost_usd"`
		ElapsedMS    *int64  `json:"elapsed_ms"`
	} `json:"metrics"`
}

// decode parses the result JSON, checking that it has exactly the
// documented top-level and metrics keys (parameters and system_prompt only
// when there are parameters, and with --show-prompt).
func decode(t *testing.T, stdout string) output {
	t.Helper()
	var out output
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("stdout is not the result JSON: %v\n%s", err, stdout)
	}
	var keys struct {
		Top     map[string]json.RawMessage
		Metrics map[string]json.RawMessage
	}
	_ = json.Unmarshal([]byte(stdout), &keys.Top)
	if steps := keys.Top["steps"]; len(steps) == 0 || steps[0] != '[' { // the run's steps: a list, always
		t.Errorf("result steps %s, want a list", steps)
	}
	delete(keys.Top, "steps")
	_ = json.Unmarshal(keys.Top["metrics"], &keys.Metrics)
	delete(keys.Top, "parameters")
	delete(keys.Top, "system_prompt")
	delete(keys.Metrics, "cost_unknown") // true, present, when the model has no price (TestRunAgainstMockLLM)
	wantTop := []string{"final", "metrics", "output", "plan", "stop_reason", "thought"}
	wantMetrics := []string{"cost_usd", "elapsed_ms", "input_tokens", "llm_rounds", "llm_time_ms", "output_tokens", "parse_retries", "start_time", "tool_calls", "total_tokens"}
	if got := slices.Sorted(maps.Keys(keys.Top)); !slices.Equal(got, wantTop) {
		t.Errorf("result keys %v, want %v", got, wantTop)
	}
	if got := slices.Sorted(maps.Keys(keys.Metrics)); !slices.Equal(got, wantMetrics) {
		t.Errorf("metrics keys %v, want %v", got, wantMetrics)
	}
	return out
}

func TestRun(t *testing.T) {
	cfg := setup(t, []string{planReply, calcReply, finalReply}, "")
	code, stdout, stderr := morph(t, "", "run", "--config", cfg, "What is 17.5% of 2,340", "plus the square root of 1,764?")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	out := decode(t, stdout)
	if out.Output != 451.5 {
		t.Errorf("output %v, want 451.5", out.Output)
	}
	if out.Thought != "calc says 451.5" {
		t.Errorf("thought %q, want %q", out.Thought, "calc says 451.5")
	}
	if out.StopReason != "final" {
		t.Errorf("stop_reason %q, want final", out.StopReason)
	}
	if !strings.Contains(string(out.Final), `"working"`) {
		t.Errorf("final %s lacks the domain field", out.Final)
	}
	switch {
	case out.Plan == nil:
		t.Error("no plan")
	case len(out.Plan.Steps) != 1:
		t.Errorf("plan of %d steps %+v, want 1", len(out.Plan.Steps), out.Plan.Steps)
	case out.Plan.Steps[0].Status != "completed":
		t.Errorf("plan step's status %q, want completed", out.Plan.Steps[0].Status)
	}
	m := out.Metrics
	for _, c := range []struct {
		field     string
		got, want int
	}{{"llm_rounds", m.LLMRounds, 3}, {"tool_calls", m.ToolCalls, 1}, {"parse_retries", m.ParseRetries, 0}} {
		if c.got != c.want {
			t.Errorf("%s %d, want %d", c.field, c.got, c.want)
		}
	}
	if m.ElapsedMS == nil {
		t.Error("no elapsed_ms")
	}
	if m.InputTokens <= 0 {
		t.Errorf("input_tokens %d, want more than 0", m.InputTokens)
	}
	if m.OutputTokens <= 0 {
		t.Errorf("output_tokens %d, want more than 0", m.OutputTokens)
	}
	if m.TotalTokens != m.InputTokens+m.OutputTokens {
		t.Errorf("total_tokens %d, want input + output, %d", m.TotalTokens, m.InputTokens+m.OutputTokens)
	}
	if m.CostUSD <= 0 {
		t.Errorf("cost_usd %v, want more than 0", m.CostUSD)
	}

	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^morph: no plugins, 1 tool, hooks: none$`),
		regexp.MustCompile(`^step 1  plan  tokens (\d+) \(\+(\d+)\)  cost \$0\.\d{6}  \d+\.\d\ds$`),
		regexp.MustCompile(`^step 2  tool calc  tokens (\d+) \(\+(\d+)\)  cost \$0\.\d{6}  \d+\.\d\ds$`),
		regexp.MustCompile(`^step 3  final  tokens (\d+) \(\+(\d+)\)  cost \$0\.\d{6}  \d+\.\d\ds$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(want), stderr)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("stderr line %d = %q, want %s", i+1, lines[i], re)
		}
	}
	if !strings.Contains(lines[3], "tokens "+strconv.Itoa(m.TotalTokens)+" ") {
		t.Errorf("last progress line %q does not show the run's %d tokens", lines[3], m.TotalTokens)
	}
}

func TestTaskSources(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "")
	tests := []struct {
		name  string
		stdin string
		args  []string
	}{
		{"stdin", "  What is 2 + 2?\n", []string{"run", "-v", "--config", cfg}},
		{"flag", "", []string{"run", "-v", "--config", cfg, "--task", "What is 2 + 2?"}},
		{"args", "", []string{"run", "-v", "--config", cfg, "What", "is", "2", "+", "2?"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := morph(t, tt.stdin, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			if out := decode(t, stdout); out.Output != 451.5 {
				t.Errorf("output %v", out.Output)
			}
			// -v logs the run's start, task included.
			if !strings.Contains(stderr, `task="What is 2 + 2?"`) {
				t.Errorf("stderr does not show the task:\n%s", stderr)
			}
		})
	}
}

func TestOverrides(t *testing.T) {
	cfg := setup(t, []string{planReply, calcReply, finalReply}, "")

	// One step: the plan, then the forced conclusion gets the tool call,
	// which is not a final, so the run ends with the fallback final (exit 3).
	code, stdout, stderr := morph(t, "", "run", "--config", cfg, "--max-steps", "1", "task")
	if code != exitFallback {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	out := decode(t, stdout)
	if out.StopReason != "fallback" {
		t.Errorf("stop_reason %q, want fallback", out.StopReason)
	}
	if out.Output != "insufficient_evidence" {
		t.Errorf("output %v, want insufficient_evidence", out.Output)
	}
	if out.Metrics.LLMRounds != 2 {
		t.Errorf("llm_rounds %d, want 2", out.Metrics.LLMRounds)
	}
	if !strings.Contains(stderr, "warning: forcing a conclusion: reached max steps (1)") ||
		!strings.Contains(stderr, "warning: using the fallback final") {
		t.Errorf("stderr lacks the warnings:\n%s", stderr)
	}

	// Another model has no price: the same run costs nothing.
	code, stdout, stderr = morph(t, "", "run", "--config", cfg, "--model", "unpriced", "task")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if out := decode(t, stdout); out.Metrics.CostUSD != 0 || out.Metrics.TotalTokens == 0 {
		t.Errorf("metrics %+v: want tokens and no cost", out.Metrics)
	}
}

func TestExitCodes(t *testing.T) {
	good := setup(t, []string{planReply, calcReply, finalReply}, "")
	unknownKey := setup(t, []string{finalReply}, "[agent]\nmax_stepz = 3\n")
	short := setup(t, []string{planReply}, "")
	tests := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stderr string
	}{
		{"unknown config key", "", []string{"run", "--config", unknownKey, "task"}, 2, "agent.max_stepz: unknown key"},
		{"missing config", "", []string{"run", "--config", filepath.Join(t.TempDir(), "morph.toml"), "task"}, 2, "config file not found"},
		{"missing task", "", []string{"run", "--config", good}, 2, "no task"},
		{"blank task", " \n\t", []string{"run", "--config", good}, 2, "no task"},
		{"empty --task", "", []string{"run", "--config", good, "--task", ""}, 2, "no task"},
		{"task twice", "", []string{"run", "--config", good, "--task", "a", "b"}, 2, "not both"},
		{"unknown flag", "", []string{"run", "--config", good, "--stepz", "3", "task"}, 2, "unknown flag: --stepz"},
		{"bad flag value", "", []string{"run", "--config", good, "--max-steps", "many", "task"}, 2, "invalid argument"},
		{"zero max steps", "", []string{"run", "--config", good, "--max-steps", "0", "task"}, 2, "--max-steps must be at least 1"},
		{"session without temporal", "", []string{"run", "--config", good, "--session", "s1", "task"}, 2, "--session needs --temporal"},
		{"bad session", "", []string{"run", "--config", good, "--temporal", "--session", "../s", "task"}, 2, `--session "../s": want letters`},
		{"unknown command", "", []string{"walk"}, 2, `unknown command "walk"`},
		{"script runs out", "", []string{"run", "--config", short, "task"}, 1, "ran out after 1 replies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := morph(t, tt.stdin, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr does not say %q:\n%s", tt.stderr, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout on failure:\n%s", stdout)
			}
		})
	}
}

func TestScriptRunsOutMidRun(t *testing.T) {
	cfg := setup(t, []string{planReply, calcReply}, "")
	code, stdout, stderr := morph(t, "", "run", "--config", cfg, "task")
	if code != 1 || stdout != "" {
		t.Fatalf("exit %d, stdout %q; want 1 and nothing", code, stdout)
	}
	// Both steps were reported before the failure, which names the file.
	for _, want := range []string{"step 1  plan", "step 2  tool calc", "morph: run failed at step 3", "replies.json ran out after 2 replies"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := morph(t, "", "version")
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	if !strings.HasPrefix(stdout, "morph dev ") {
		t.Errorf("stdout %q does not start with %q", stdout, "morph dev ")
	}
	assertHas(t, "stdout", stdout, runtime.Version())
}

// The repository's own demo runs, gives the documented answer, and shows the
// go-hooks plugin's prompt section and parameters (built by `make examples`).
func TestDemoConfig(t *testing.T) {
	testenv.Built(t, "../../examples/go-hooks/go-hooks.wasm", "examples")
	code, stdout, stderr := morph(t, "", "run", "--config", "../../morph.toml", "--show-prompt", "What is 17.5% of 2,340 plus the square root of 1,764?")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	out := decode(t, stdout)
	if out.Output != 451.5 {
		t.Errorf("output %v, want 451.5", out.Output)
	}
	if out.Metrics.TotalTokens == 0 {
		t.Error("total_tokens 0, want the run's")
	}
	if out.Metrics.CostUSD == 0 {
		t.Error("cost_usd 0, want the run's")
	}
	if out.Metrics.ToolCalls != 1 {
		t.Errorf("tool_calls %d, want 1", out.Metrics.ToolCalls)
	}
	if !strings.Contains(string(out.Final), `"working"`) {
		t.Errorf("final %s lacks the domain field", out.Final)
	}
	assertHas(t, "system prompt", out.SystemPrompt, "## House style (from go-hooks plugin)")
	for k, want := range map[string]any{"temperature": 0.2, "max_tokens": float64(512)} {
		if got := out.Parameters[k]; got != want {
			t.Errorf("parameter %s = %v, want the plugin's %v", k, got, want)
		}
	}
}

// The second half of the demo ends with the plugin's fallback final and its
// count of tool successes, printed, and exits 3 (exitFallback), not 0.
func TestDemoFallback(t *testing.T) {
	testenv.Built(t, "../../examples/go-hooks/go-hooks.wasm", "examples")
	code, stdout, stderr := morph(t, "", "run", "--config", "../../demo/fallback.toml", "count")
	if code != exitFallback || !strings.Contains(stderr, "morph: the run ended on the fallback final") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	out := decode(t, stdout)
	result, _ := out.Output.(map[string]any)
	if out.StopReason != "fallback" || result["tool_successes"] != float64(2) {
		t.Fatalf("want the plugin's fallback with 2 tool successes: %s", stdout)
	}
}

// A plugin tool taking a built-in's name is used, and the run says so on
// standard error without -v.
func TestPluginToolShadowsBuiltinWarns(t *testing.T) {
	wasm := fixture(t, "shadow_calc")
	cfg := setup(t, []string{calcReply, finalReply}, "[wasm]\ncache_dir = \"off\"\n[discovery]\nproject = false\nuser = false\n\n[[plugins]]\nname = \"shadow\"\npath = \""+wasm+"\"\n")
	code, _, stderr := morph(t, "", "run", "--config", cfg, "task")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	assertHas(t, "a warning naming the tool and the plugin", stderr, "warning: ", `"calc"`, "shadow")
}

// A run whose model never gives a usable reply ends on the default fallback
// final: the result is printed, and the exit code is 3, not 0.
func TestFallbackExitCode(t *testing.T) {
	junk := `{"reply":"no JSON here"}`
	cfg := setup(t, []string{junk, junk, junk, junk}, "[agent]\nparse_retries = 2\n")
	code, stdout, stderr := morph(t, "", "run", "--config", cfg, "task")
	if code != 3 {
		t.Fatalf("exit %d, want 3; stderr:\n%s", code, stderr)
	}
	if out := decode(t, stdout); out.StopReason != "fallback" {
		t.Errorf("stop_reason %q, want fallback", out.StopReason)
	}
	if !strings.Contains(stderr, "morph: the run ended on the fallback final") {
		t.Errorf("stderr does not name the fallback:\n%s", stderr)
	}
}
