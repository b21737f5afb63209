package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/testenv"
)

// End to end: `morph run --config examples/rust-hooks/morph.toml`, the
// example's own configuration, loading the Rust example plugin
// (examples/rust-hooks, built with the Rust PDK of guests/rust) and
// replaying its scripted conversation. Every hook of the plugin shows in
// the CLI's output, its log (-v) or the run's events.

const rustHooksTask = "Decode the notes and compute 17 * 23."

// rustHooksConfig returns the example's morph.toml, once its plugin is built.
func rustHooksConfig(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", "examples", "rust-hooks")
	testenv.Built(t, filepath.Join(dir, "target", "wasm32-unknown-unknown", "release", "rust_hooks.wasm"), "rust")
	return filepath.Join(dir, "morph.toml")
}

// pluginLines are the log lines the plugin wrote (under its name) that
// contain want.
func pluginLines(stderr, want string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "plugin=rust-hooks") && strings.Contains(line, want) {
			out = append(out, line)
		}
	}
	return out
}

func TestRustHooksCLI(t *testing.T) {
	cfg := rustHooksConfig(t)
	code, stdout, stderr := morph(t, "", "run", "-v", "--show-prompt", "--config", cfg, rustHooksTask)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	out := decode(t, stdout)

	// build_prompt: the engine's prompt, the plugin's section with the rule
	// of [plugins.config]; then before_run's marker line.
	const section = "\n## Rust house rules (from rust-hooks plugin)\n- Give every number with its unit, and say which tool produced it.\n" +
		"\n(This turn is audited by the rust-hooks middleware.)\n"
	if !strings.HasPrefix(out.SystemPrompt, "You are morph") || !strings.HasSuffix(out.SystemPrompt, section) ||
		!strings.Contains(out.SystemPrompt, "- reverse: Reverses a text") || !strings.Contains(out.SystemPrompt, "- char_stats: ") {
		t.Errorf("system prompt:\n%s", out.SystemPrompt)
	}
	// build_params: in the result's parameters, sent with every request.
	if want := map[string]any{"temperature": 0.3, "max_tokens": float64(400)}; !reflect.DeepEqual(out.Parameters, want) {
		t.Errorf("parameters %v, want %v", out.Parameters, want)
	}
	if out.StopReason != "final" {
		t.Errorf("stop_reason %q, want final", out.StopReason)
	}
	if out.Metrics.LLMRounds != 6 {
		t.Errorf("llm_rounds %d, want 6", out.Metrics.LLMRounds)
	}
	if out.Metrics.ToolCalls != 4 {
		t.Errorf("tool_calls %d, want 4", out.Metrics.ToolCalls)
	}

	// The status line names the plugin and its hooks; the denied calc call
	// shows in its progress line.
	for _, want := range []string{
		"morph: 1 plugin (rust-hooks 0.1.0), 3 tools, hooks: after_run, after_tool_call, before_run, before_tool_call, " +
			"build_params, build_prompt, fallback_final, on_action, on_final, on_observation, on_tool_success, on_turn_start\n",
		"step 2  tool reverse  ",
		"step 3  tool char_stats  ",
		"  error: Tool call denied: tool calc is denied by policy (rust-hooks deny_tools)\n",
		"step 6  final  ",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	// The plugin's own log (-v): the audit of every middleware hook, the
	// guard's denial, the redaction, the success count, and morph_destroy
	// at shutdown.
	for _, want := range []string{
		`rust-audit: turn 1 start session `,
		`input \"Decode the notes and compute 17 * 23.\"`,
		"rust-audit: turn 1 before_run, 3 tools offered (calc, char_stats, reverse), model scripted-rust",
		"rust-audit: turn 1 action reverse step 2 params [text]",
		"rust-audit: turn 1 observation reverse step 2 ok, 29 bytes",
		"rust-audit: turn 1 action calc step 4 params [expression]",
		"rust-audit: turn 1 denied calc at step 4",
		"rust-audit: turn 1 observation calc step 4 error, 71 bytes",
		"rust-audit: turn 1 redacted the output of reverse at step 5",
		"rust-audit: turn 1 observation reverse step 5 ok, 42 bytes",
		"rust-audit: turn 1 final final after 6 steps, ",
		"rust-audit: turn 1 after_run final in 6 steps, ",
		"rust-hooks: tool reverse succeeded (2 so far)",
		"rust-hooks: tool char_stats succeeded (1 so far)",
		"rust-hooks: instance closed after 3 tool successes",
	} {
		if n := len(pluginLines(stderr, want)); n != 1 {
			t.Errorf("%d plugin log lines with %q, want 1; stderr:\n%s", n, want, stderr)
		}
	}
	// start, before_run, 4 actions, the denial, the redaction, 4 observations, final, after_run.
	if n := len(pluginLines(stderr, "rust-audit: ")); n != 14 {
		t.Errorf("%d audit lines, want 14; stderr:\n%s", n, stderr)
	}
	if strings.Contains(stderr, "hook failed") || strings.Contains(stderr, "level=ERROR") {
		t.Errorf("a hook failed:\n%s", stderr)
	}
}

// With two steps the run cannot conclude: the forced conclusion gets a tool
// call, and the plugin's fallback final reports its one tool success.
func TestRustHooksCLIFallback(t *testing.T) {
	cfg := rustHooksConfig(t)
	code, stdout, stderr := morph(t, "", "run", "-v", "--config", cfg, "--max-steps", "2", rustHooksTask)
	if code != exitFallback {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	out := decode(t, stdout)
	o, ok := out.Output.(map[string]any)
	if out.StopReason != "fallback" || !ok || o["status"] != "incomplete" || o["tool_successes"] != float64(1) ||
		!reflect.DeepEqual(o["by_tool"], map[string]any{"reverse": float64(1)}) || o["steps"] != float64(2) {
		t.Fatalf("stop %q, output %#v", out.StopReason, out.Output)
	}
	if !strings.Contains(out.Thought, "the rust-hooks plugin reports what the run achieved") {
		t.Errorf("thought %q", out.Thought)
	}
	if !strings.Contains(stderr, "warning: using the fallback final") ||
		len(pluginLines(stderr, "rust-audit: turn 1 final fallback after 2 steps")) != 1 {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// The same configuration built as the CLI builds it (config.Load, then
// Open), with an event handler: the observations the model saw (a tool's
// result, the denial, the redaction) and every hook call's outcome.
func TestRustHooksConfigRun(t *testing.T) {
	ctx := context.Background()
	cfg, err := config.Load(rustHooksConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	outcomes := map[string][]string{}
	rt, err := cfg.Open(ctx, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		engine.WithEventHandler(func(ev engine.Event) {
			if ev.Kind == engine.EventHook && ev.Plugin == "rust-hooks" {
				mu.Lock()
				outcomes[ev.Hook] = append(outcomes[ev.Hook], ev.Outcome)
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	final, rc, err := rt.Engine.Run(ctx, rustHooksTask, cfg.RunOptions())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if final == nil {
		t.Fatalf("run: no final answer (stop %q)", rc.StopReason)
	}
	if rc.StopReason != engine.StopFinal {
		t.Fatalf("run: stop %q, want %q", rc.StopReason, engine.StopFinal)
	}

	var got []string
	for _, s := range rc.Steps {
		got = append(got, s.Action+": "+s.Observation+s.Error)
	}
	want := []string{
		"plan: ",
		"reverse: Rust engineers raise a toast.",
		`char_stats: {"chars":29,"bytes":29,"letters":24,"uppercase":1,"lowercase":23,"digits":0,"whitespace":4,"other":1}`,
		"calc: Tool call denied: tool calc is denied by policy (rust-hooks deny_tools)",
		"reverse: The vault key is [redacted], keep it safe.", // after_tool_call redacted sk-rustHooksDemoKey0123456789
		"final: ",
	}
	if len(got) != len(want) {
		t.Fatalf("steps:\n%s", strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("step %d: %q, want %q", i+1, got[i], want[i])
		}
	}

	// Every hook but fallback_final ran, each call successfully; the
	// tool-call hooks once per tool that ran (the denied calc has no
	// after_tool_call), the observing ones once per call.
	mu.Lock()
	defer mu.Unlock()
	counts := map[string]int{}
	for hook, oc := range outcomes {
		counts[hook] = len(oc)
		for _, o := range oc {
			if o != engine.OutcomeOK {
				t.Errorf("hook %s: outcome %s", hook, o)
			}
		}
	}
	wantCounts := map[string]int{"build_prompt": 1, "build_params": 1, "on_turn_start": 1, "before_run": 1, "on_action": 4,
		"before_tool_call": 4, "after_tool_call": 3, "on_tool_success": 3, "on_observation": 4, "on_final": 1, "after_run": 1}
	if !reflect.DeepEqual(counts, wantCounts) {
		t.Errorf("hook calls %v, want %v", counts, wantCounts)
	}
}

func TestRustHooksPluginCheck(t *testing.T) {
	rustHooksConfig(t)
	wasm := filepath.Join("..", "..", "examples", "rust-hooks", "target", "wasm32-unknown-unknown", "release", "rust_hooks.wasm")
	code, stdout, stderr := morph(t, "", "plugin", "check", "--cache-dir", "off", wasm)
	if code != 0 {
		t.Fatalf("check: exit %d, want 0: %s%s", code, stdout, stderr)
	}
	if want := "ok: rust-hooks 0.1.0, ABI v1, hooks ["; !strings.HasPrefix(stdout, want) {
		t.Errorf("check: stdout %q does not start with %q", stdout, want)
	}
	assertHas(t, "check", stdout, "2 tools")
}
