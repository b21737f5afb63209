//go:build unix

package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/morphhost/morph/builtin"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm/scripted"
)

// hookGraph is one agent stage whose model calls calc once, with the
// stage's hook attributes (%s).
const hookGraph = `digraph p {
  start [shape=Mdiamond]
  work [prompt="compute" %s]
  done [shape=Msquare]
  start -> work -> done
}`

// runHooked runs hookGraph with attrs on a scripted model that calls calc
// (6 * 7) and then finishes: the result, the model's requests' text after
// the tool call, the run directory and the tool-hook events.
func runHooked(t *testing.T, attrs string, opts ...engine.Option) (*Result, string, string, []Event) {
	t.Helper()
	client := scripted.New(scripted.Texts(
		`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"calc","tool_params":{"expression":"6 * 7"}}}`,
		`{"type":"final","final":{"thought":"t","output":"done"}}`,
	))
	reg := engine.NewRegistry()
	calc, _ := builtin.Lookup(builtin.CalcName)
	reg.Register(calc)
	b := &EngineBackend{Engine: engine.New(client, reg, opts...)}
	var (
		mu     sync.Mutex
		events []Event
	)
	r := &Runner{Backend: b, Tools: b, AllowShell: true, OnEvent: func(ev Event) {
		if ev.Kind == EventToolHook {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	}}
	src := strings.Replace(hookGraph, "%s", attrs, 1)
	dir := filepath.Join(t.TempDir(), "run")
	res, err := r.Run(context.Background(), mustParse(t, src), RunConfig{RunDir: dir, Source: []byte(src)})
	if err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	if reqs := client.Requests(); len(reqs) > 1 {
		for _, m := range reqs[1].Messages {
			seen.WriteString(m.Content + "\n")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return res, seen.String(), dir, events
}

func TestToolHookPreDenies(t *testing.T) {
	res, seen, dir, events := runHooked(t, `, tool_hooks.pre="echo policy-says-no >&2; exit 3"`, ToolHooksOption())
	if res.State != RunSuccess {
		t.Fatalf("%s: %s", res.State, res.FailureReason)
	}
	if !strings.Contains(seen, "exited with status 3") || !strings.Contains(seen, "policy-says-no") || strings.Contains(seen, "42") {
		t.Errorf("the model was not told of the denial, or calc ran: %q", seen)
	}
	if len(events) != 1 || !strings.Contains(events[0].Message, "tool_hooks.pre of node work exited with status 3 for tool calc") {
		t.Errorf("events %+v", events)
	}
	log, err := os.ReadFile(filepath.Join(dir, "work", toolHooksLog))
	if err != nil || !strings.Contains(string(log), "exited with status 3") || !strings.Contains(string(log), "denied") {
		t.Errorf("the stage's %s: %q, %v", toolHooksLog, log, err)
	}
}

func TestToolHookPostSeesResult(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-secret-of-the-model")
	out := t.TempDir()
	// The graph's post hook, and the node's pre hook that lets the call go.
	src := `, tool_hooks.pre="exit 0", tool_hooks.post="cat > ` + out + `/post.json; env > ` + out + `/env.txt"`
	res, seen, _, events := runHooked(t, src, ToolHooksOption())
	if res.State != RunSuccess || !strings.Contains(seen, "42") || len(events) != 0 {
		t.Fatalf("%s %q %+v", res.State, seen, events)
	}
	b, err := os.ReadFile(filepath.Join(out, "post.json"))
	if err != nil {
		t.Fatal(err)
	}
	var call struct {
		Tool   string         `json:"tool"`
		Input  map[string]any `json:"input"`
		Node   string         `json:"node"`
		CallID string         `json:"call_id"`
		Output string         `json:"output"`
	}
	if err := json.Unmarshal(b, &call); err != nil {
		t.Fatalf("post hook's stdin %q: %v", b, err)
	}
	if call.Tool != "calc" || call.Node != "work" || call.CallID == "" || !strings.Contains(call.Output, "42") || call.Input["expression"] != "6 * 7" {
		t.Errorf("post hook's stdin %+v", call)
	}
	env, err := os.ReadFile(filepath.Join(out, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MORPH_TOOL_NAME=calc", "MORPH_NODE_ID=work", "MORPH_TOOL_CALL_ID=" + call.CallID, "MORPH_RUN_DIR="} {
		if !strings.Contains(string(env), want) {
			t.Errorf("the hook's environment lacks %s", want)
		}
	}
	if strings.Contains(string(env), "sk-secret") {
		t.Error("the hook's environment holds the model's API key")
	}
}

func TestToolHookTimeoutAndFlood(t *testing.T) {
	// A hook that hangs, with a child in the background, ends at its
	// timeout and denies the call; the child goes with it (the process
	// group is killed).
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	res, seen, _, events := runHooked(t, `, tool_hooks.pre="sleep 120 & echo $! >`+pidFile+`; sleep 120", tool_hooks.timeout="1s"`, ToolHooksOption())
	if res.State != RunSuccess || !strings.Contains(seen, "timed out after 1s") || len(events) != 1 {
		t.Errorf("hanging hook: %s, %q, %+v", res.State, seen, events)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the hook's background child, pid %d, outlived it", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A hook that floods both outputs is read to its end and quoted short.
	res, seen, _, events = runHooked(t, `, tool_hooks.pre="head -c 20000000 /dev/zero; head -c 20000000 /dev/zero >&2; exit 1"`, ToolHooksOption())
	if res.State != RunSuccess || len(events) != 1 || !strings.Contains(seen, "exited with status 1") {
		t.Fatalf("flooding hook: %s, %q, %+v", res.State, seen, events)
	}
	if n := len(events[0].Message); n > toolHookStderr+200 {
		t.Errorf("the event quotes %d bytes of the flood", n)
	}
	if strings.Contains(events[0].Message, "\x00") {
		t.Error("the event holds raw NUL bytes")
	}
}

// processGone is whether pid is gone: no such process, or a zombie (a
// container's init may not reap an orphan).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

func TestToolHooksRefused(t *testing.T) {
	// Without the middleware on the engine, the stage fails saying so.
	res, _, _, _ := runHooked(t, `, tool_hooks.post="true"`)
	if res.State != RunFail || !strings.Contains(res.FailureReason, ToolHooksMiddleware) {
		t.Errorf("engine without the middleware: %s: %s", res.State, res.FailureReason)
	}
	// Without allow_shell, validation refuses the hooks, naming them.
	src := `digraph p {
	  tool_hooks.post = "logger done"
	  start [shape=Mdiamond]
	  work [prompt="w", tool_hooks.pre="true", tool_hooks.timeout="30s"]
	  done [shape=Msquare]
	  start -> work -> done
	}`
	diags, err := (&Runner{}).Prepare(mustParse(t, src))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("no validation error: %v", err)
	}
	var graph, node bool
	for _, d := range diags {
		if d.Rule != RuleShellDisabled || d.Severity != SeverityError {
			continue
		}
		graph = graph || d.NodeID == "" && strings.Contains(d.Message, "graph attribute tool_hooks.post")
		node = node || d.NodeID == "work" && strings.Contains(d.Message, "tool_hooks.pre")
	}
	if !graph || !node {
		t.Errorf("shell_disabled for the graph's and the node's hooks: %v %v in %v", graph, node, diags)
	}
	if _, err := (&Runner{AllowShell: true}).Prepare(mustParse(t, src)); err != nil {
		t.Errorf("with allow_shell: %v", err)
	}
	bad := strings.Replace(src, `"30s"`, `"2h"`, 1)
	if _, err := (&Runner{AllowShell: true}).Prepare(mustParse(t, bad)); err == nil || !strings.Contains(err.Error(), "tool_hooks.timeout") {
		t.Errorf("tool_hooks.timeout=2h: %v", err)
	}
}
