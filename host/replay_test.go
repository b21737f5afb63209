package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/record"
)

// recordEchoTool records calls of the echo_tool fixture's tool through a
// loader with a Recorder (the path morph run --record takes): three calls
// in two sessions, and one with an input over the recording's
// max_call_bytes.
func recordEchoTool(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.jsonl")
	rec, err := record.Create(path, record.Options{MaxCallBytes: 512})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLoader(LoaderOptions{CacheDir: t.TempDir(), Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	p, err := l.Load(context.Background(), Config{Name: "echo_tool", Path: fixture(t, "echo_tool")})
	if err != nil {
		t.Fatal(err)
	}
	tool := p.engineTools()[0]
	for i, params := range []map[string]any{{"text": "one"}, {"text": "two"}, {"text": strings.Repeat("x", 1000)}, {"n": 3}} {
		ctx := engine.WithSession(context.Background(), []string{"s-1", "s-2"}[i%2], i+1)
		if _, err := tool.Execute(ctx, params); err == nil {
			t.Fatal("echo_tool answered without its error")
		}
	}
	p.Close(context.Background())
	if sum, err := rec.Close(); err != nil || sum.Calls != 4 {
		t.Fatalf("recording: %+v, %v", sum, err)
	}
	return path
}

func replay(t *testing.T, path string, cfg Config, o ReplayOptions) *ReplayReport {
	t.Helper()
	f, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := newLoader(t).Replay(context.Background(), cfg, f, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestRecordAndReplay(t *testing.T) {
	path := recordEchoTool(t)
	raw, _ := os.ReadFile(path)
	for _, want := range []string{`"tool":"echo_input"`, `"session":"s-2"`, `"kind":"guest"`, `"load":{"name":"echo_tool"`, `"end":true`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the record lacks %s:\n%s", want, raw)
		}
	}

	same := replay(t, path, Config{Name: "echo_tool", Path: fixture(t, "echo_tool")}, ReplayOptions{})
	if same.Calls != 4 || same.Same != 3 || same.Different != 0 || len(same.Skipped) != 1 || same.Incomplete {
		t.Fatalf("the same build: %+v", same)
	}
	if s := same.Skipped[0]; s.Seq != 3 || !strings.Contains(s.Reason, "record.max_call_bytes (512)") {
		t.Errorf("skipped %+v, want seq 3 naming the cap", s)
	}

	upper := replay(t, path, Config{Name: "echo_tool", Path: fixture(t, "echo_tool_upper")}, ReplayOptions{})
	if upper.Same != 0 || upper.Different != 3 || len(upper.Diffs) != 3 {
		t.Fatalf("the uppercasing build: %+v", upper)
	}
	if d := upper.Diffs[0]; d.Seq != 1 || d.Tool != "echo_input" || d.Session != "s-1" || d.FaultWas != "guest" || d.FaultNow != "guest" ||
		!strings.Contains(d.Was, `"text":"one"`) || !strings.Contains(d.Now, `"TEXT":"ONE"`) {
		t.Errorf("diff %+v", d)
	}

	only := replay(t, path, Config{Name: "echo_tool", Path: fixture(t, "echo_tool_upper")}, ReplayOptions{Only: []string{"before_tool_call"}})
	if only.Calls != 0 {
		t.Errorf("--only before_tool_call replayed %d tool calls", only.Calls)
	}
}

// A new build that hangs is a timeout fault, reported as the difference
// within the replay's timeout.
func TestReplayHangIsFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	rec, err := record.Create(path, record.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec.Call(record.Call{Plugin: "spin_tool", Export: abi.ExportCallTool, Tool: "spin", Input: []byte(`{"tool":"spin","params":{}}`), Output: []byte(`{"output":"done"}`)})
	rec.Close()
	rep := replay(t, path, Config{Name: "spin_tool", Path: fixture(t, "spin_tool")}, ReplayOptions{Timeout: 100 * time.Millisecond})
	if rep.Different != 1 || rep.Diffs[0].FaultWas != "" || rep.Diffs[0].FaultNow != "timeout" || !strings.Contains(rep.Diffs[0].Was, "done") {
		t.Fatalf("report %+v", rep)
	}
}

// A record file is input: a line naming an export no recording holds
// (morph_destroy, morph_alloc) is skipped, never called, whatever hook
// the line claims.
func TestReplayRefusesForeignExport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	rec, err := record.Create(path, record.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec.Call(record.Call{Plugin: "echo_tool", Export: abi.ExportDestroy, Input: []byte(`{}`)})
	rec.Call(record.Call{Plugin: "echo_tool", Export: abi.ExportAlloc, Hook: abi.HookBuildPrompt, Input: []byte(`{}`)})
	rec.Close()
	rep := replay(t, path, Config{Name: "echo_tool", Path: fixture(t, "echo_tool")}, ReplayOptions{Timeout: time.Second})
	if rep.Same+rep.Different != 0 || len(rep.Skipped) != 2 || !strings.Contains(rep.Skipped[0].Reason, "morph_destroy") ||
		!strings.Contains(rep.Skipped[1].Reason, "morph_alloc") {
		t.Fatalf("report %+v", rep)
	}
}

func TestReplayDiffJSON(t *testing.T) {
	for _, tc := range []struct {
		was, now string
		ignore   []string
		want     []string
	}{
		{`{"output":"a","n":1}`, `{"n":1.0,"output":"a"}`, nil, []string{"/n"}},
		{`{"output":"a","n":1}`, `{"n":1, "output":"a"}`, nil, nil},
		{`{"output":"a","t":1}`, `{"output":"b","t":2}`, []string{"/t"}, []string{"/output"}},
		{`{"a":[1,2],"b/c":{"x":1}}`, `{"a":[1,3],"b/c":{}}`, nil, []string{"/a/1", "/b~1c/x"}},
		{`not json`, `not json`, nil, nil},
		{`not json`, `{}`, nil, []string{""}},
		{``, `{}`, nil, []string{""}},
	} {
		got := diffJSON([]byte(tc.was), []byte(tc.now), tc.ignore)
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("%s vs %s (ignore %v): %q, want %q", tc.was, tc.now, tc.ignore, got, tc.want)
		}
	}
}

func TestReplayManifestChange(t *testing.T) {
	tool := func(name, desc string) abi.ToolSpec { return abi.ToolSpec{Name: name, Description: desc} }
	was := abi.Manifest{Hooks: []string{"build_prompt", "before_tool_call"}, Tools: []abi.ToolSpec{tool("a", "A"), tool("b", "B")}}
	now := abi.Manifest{Hooks: []string{"build_prompt", "on_final"}, Tools: []abi.ToolSpec{tool("b", "B2"), tool("c", "C")}}
	got := fmt.Sprintf("%+v", manifestChange(was, now))
	want := "{HooksAdded:[on_final] HooksRemoved:[before_tool_call] ToolsAdded:[c] ToolsRemoved:[a] ToolsChanged:[b]}"
	if got != want {
		t.Errorf("manifestChange = %s, want %s", got, want)
	}
}
