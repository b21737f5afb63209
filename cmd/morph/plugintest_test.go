package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/morphhost/morph/internal/testenv"
)

// conformJSON is the part of `morph plugin test --json` the tests read.
type conformJSON struct {
	Plugin    string `json:"plugin"`
	LoadError string `json:"load_error"`
	Conforms  bool   `json:"conforms"`
	Passed    int    `json:"passed"`
	Failed    int    `json:"failed"`
	Calls     []struct {
		Name        string `json:"name"`
		Kind        string `json:"kind"`
		Input       string `json:"input"`
		Status      string `json:"status"`
		ErrorKind   string `json:"error_kind"`
		Error       string `json:"error"`
		Note        string `json:"note"`
		Output      string `json:"output"`
		DurationNS  int64  `json:"duration_ns"`
		MemoryBytes uint32 `json:"memory_bytes"`
		MemoryPages uint32 `json:"memory_pages"`
	} `json:"calls"`
}

func decodeConform(t *testing.T, stdout string) conformJSON {
	t.Helper()
	var rep conformJSON
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("not the report JSON: %v\n%s", err, stdout)
	}
	return rep
}

func TestPluginTestConforming(t *testing.T) {
	code, stdout, stderr := morph(t, "", "plugin", "test", "--cache-dir", "off", fixture(t, "minimal"))
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	header := regexp.MustCompile(`^plugin min 1 \(.*minimal\.wasm\), ABI v1: loaded in \S+, memory 1 page \(64 KiB\)$`)
	row := regexp.MustCompile(`^build_prompt +hook +sample +ok +\S+s +1 page \(64 KiB\)$`)
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), stdout)
	}
	if !header.MatchString(lines[0]) {
		t.Errorf("header %q, want it to match %s", lines[0], header)
	}
	if !strings.HasPrefix(lines[1], "NAME ") {
		t.Errorf("column heads %q do not start the line", lines[1])
	}
	if got, want := strings.Join(strings.Fields(lines[1]), " "), "NAME KIND INPUT RESULT TIME MEMORY"; got != want {
		t.Errorf("column heads %q, want %q", got, want)
	}
	if !row.MatchString(lines[2]) {
		t.Errorf("row %q, want it to match %s", lines[2], row)
	}
	if want := "ok: min conforms: 1 call passed"; lines[3] != want {
		t.Errorf("last line %q, want %q", lines[3], want)
	}

	code, stdout, _ = morph(t, "", "plugin", "test", "--json", "--cache-dir", "off", fixture(t, "minimal"))
	rep := decodeConform(t, stdout)
	if code != 0 {
		t.Fatalf("--json: exit %d, want 0; report %+v", code, rep)
	}
	if !rep.Conforms {
		t.Errorf("--json: conforms false, want true; report %+v", rep)
	}
	if rep.Plugin != "min" {
		t.Errorf("--json: plugin %q, want min", rep.Plugin)
	}
	if len(rep.Calls) != 1 {
		t.Fatalf("--json: %d calls, want 1: %+v", len(rep.Calls), rep.Calls)
	}
	c := rep.Calls[0]
	for _, f := range []struct{ field, got, want string }{
		{"name", c.Name, "build_prompt"},
		{"kind", c.Kind, "hook"},
		{"status", c.Status, "ok"},
		{"output", c.Output, `{"system_prompt":"Be brief."}`},
	} {
		if f.got != f.want {
			t.Errorf("call's %s %q, want %q", f.field, f.got, f.want)
		}
	}
	if c.DurationNS <= 0 {
		t.Errorf("call's duration_ns %d, want more than 0", c.DurationNS)
	}
	if c.MemoryBytes != 65536 {
		t.Errorf("call's memory_bytes %d, want 65536", c.MemoryBytes)
	}
	if c.MemoryPages != 1 {
		t.Errorf("call's memory_pages %d, want 1", c.MemoryPages)
	}
}

func TestPluginTestFailing(t *testing.T) {
	code, stdout, stderr := morph(t, "", "plugin", "test", "--cache-dir", "off", fixture(t, "trap"))
	if code != 1 || !strings.Contains(stderr, "trap.wasm does not conform to ABI v1: 1 of 1 entry failed") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"FAIL trap", "discarded", "failures:\n  build_prompt (hook, sample): plugin \"trap\" export morph_build_prompt: plugin trapped: wasm error: unreachable",
		"FAIL: trap does not conform: 1 failed, 0 passed\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}

	code, stdout, _ = morph(t, "", "plugin", "test", "--json", "--cache-dir", "off", fixture(t, "mw_trap"))
	rep := decodeConform(t, stdout)
	var got []string
	for _, c := range rep.Calls {
		got = append(got, c.Name+" "+c.Status+" "+c.ErrorKind)
	}
	want := "on_action fail trap|before_tool_call fail guest|after_tool_call ok |destroy fail trap"
	if code != 1 {
		t.Fatalf("exit %d, want 1; calls %q", code, got)
	}
	if rep.Conforms {
		t.Error("conforms true, want false")
	}
	if rep.Failed != 3 {
		t.Errorf("failed %d, want 3", rep.Failed)
	}
	if g := strings.Join(got, "|"); g != want {
		t.Errorf("calls %q, want %q", g, want)
	}

	// A deadline of our own: the spinning guest times out.
	code, stdout, _ = morph(t, "", "plugin", "test", "--cache-dir", "off", "--timeout", "100ms", fixture(t, "loop"))
	if code != 1 || !strings.Contains(stdout, "FAIL timeout") {
		t.Fatalf("loop: exit %d:\n%s", code, stdout)
	}

	// A module that does not load fails (exit 1) with the reason.
	code, stdout, stderr = morph(t, "", "plugin", "test", "--cache-dir", "off", fixture(t, "wrongversion"))
	if code != 1 {
		t.Fatalf("wrongversion: exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	assertHas(t, "wrongversion: stdout", stdout, "does not load")
	assertHas(t, "wrongversion: stderr", stderr, "found morph_abi_v2")
	code, stdout, _ = morph(t, "", "plugin", "test", "--json", "--cache-dir", "off", fixture(t, "wrongversion"))
	rep = decodeConform(t, stdout)
	if code != 1 {
		t.Errorf("wrongversion --json: exit %d, want 1", code)
	}
	if rep.Conforms {
		t.Error("wrongversion --json: conforms true, want false")
	}
	assertHas(t, "wrongversion --json: load_error", rep.LoadError, "found morph_abi_v2")
}

func TestPluginTestUsage(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "badfix")
	os.Mkdir(notJSON, 0o755)
	os.WriteFile(filepath.Join(notJSON, "build_prompt.json"), []byte("{"), 0o644)
	text := filepath.Join(dir, "text.wasm")
	os.WriteFile(text, []byte("hello"), 0o644)
	min := fixture(t, "minimal")
	cases := map[string]struct {
		args []string
		want string
	}{
		"no file":          {nil, "accepts 1 arg(s), received 0"},
		"missing file":     {[]string{filepath.Join(dir, "absent.wasm")}, "absent.wasm: no such file"},
		"a directory":      {[]string{dir}, "is a directory"},
		"not wasm":         {[]string{text}, "not a WebAssembly module"},
		"missing fixtures": {[]string{"--fixtures", filepath.Join(dir, "nope"), min}, "--fixtures: open"},
		"fixture not JSON": {[]string{"--fixtures", notJSON, min}, "build_prompt.json is not JSON"},
		"bad config value": {[]string{"--config-value", "style", min}, `--config-value "style": want key=value`},
		"bad timeout":      {[]string{"--timeout", "0s", min}, "--timeout must be positive"},
		"unknown flag":     {[]string{"--fixture", dir, min}, "unknown flag: --fixture"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := morph(t, "", append([]string{"plugin", "test", "--cache-dir", "off"}, c.args...)...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr %q", code, stderr)
			}
			assertHas(t, "stderr", stderr, c.want)
			if stdout != "" {
				t.Errorf("stdout %q, want none", stdout)
			}
		})
	}
}

// --fixtures: each DIR/<name>*.json is one more call, after the sample.
func TestPluginTestFixtures(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("build_prompt-empty-task.json", `{"task":"","tools":[],"default_prompt":""}`)
	write("build_prompt-long.json", `{"task":"`+strings.Repeat("long ", 2000)+`","tools":[],"default_prompt":"p"}`)
	write("README.md", "ignored")
	code, stdout, stderr := morph(t, "", "plugin", "test", "--cache-dir", "off", "--fixtures", dir, fixture(t, "minimal"))
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"build_prompt  hook  sample ", "build_prompt  hook  build_prompt-empty-task ", "build_prompt  hook  build_prompt-long ",
		"ok: min conforms: 3 calls passed\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}

	// A misspelt fixture name and a fixture of the wrong shape fail, uncalled.
	write("build_promt.json", `{}`)
	write("build_prompt-bad.json", `{"tools":"none"}`)
	code, stdout, stderr = morph(t, "", "plugin", "test", "--json", "--cache-dir", "off", "--fixtures", dir, fixture(t, "minimal"))
	rep := decodeConform(t, stdout)
	var failed []string
	for _, c := range rep.Calls {
		if c.Status == "fail" {
			failed = append(failed, c.Name+" "+c.Kind+" "+c.Input+" "+c.ErrorKind)
		}
	}
	want := "build_prompt hook build_prompt-bad invalid_fixture|build_promt fixture build_promt invalid_fixture"
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, stderr)
	}
	if rep.Passed != 3 {
		t.Errorf("passed %d, want 3", rep.Passed)
	}
	if got := strings.Join(failed, "|"); got != want {
		t.Errorf("failed %q, want %q", got, want)
	}
	assertHas(t, "stderr", stderr, "2 of 5 entries failed")
}

// The Go example, with a config value: every hook conforms, json_query
// rejects its schema-built sample (a note), and the value reaches the guest.
func TestPluginTestGoHooks(t *testing.T) {
	path, err := filepath.Abs(filepath.Join("..", "..", "examples", "go-hooks", "go-hooks.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Built(t, path, "examples")
	code, stdout, stderr := morph(t, "", "plugin", "test", "--json", "--config-value", "temperature=0.7", path)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stdout, stderr)
	}
	rep := decodeConform(t, stdout)
	notes := 0
	for _, c := range rep.Calls {
		switch {
		case c.Name == "build_params" && c.Output != `{"parameters":{"max_tokens":512,"temperature":0.7}}`:
			t.Errorf("build_params with temperature=0.7: %s", c.Output)
		case c.Status == "note":
			notes++
			if c.Name != "json_query" || !strings.Contains(c.Note, "the tool rejected the sample params") {
				t.Errorf("unexpected note on %s: %s", c.Name, c.Note)
			}
		case c.Status != "ok":
			t.Errorf("%s %s: %s %s", c.Name, c.Input, c.Status, c.Error)
		}
	}
	if !rep.Conforms {
		t.Error("conforms false, want true")
	}
	if notes != 1 {
		t.Errorf("%d notes, want 1", notes)
	}
	if len(rep.Calls) != 13 {
		t.Errorf("%d calls, want 13", len(rep.Calls))
	}
}

// --config loads the module as its [[plugins]] entry does: the entry's
// grants (here, an environment variable for WASI) and its config values
// (here, mw_flaky's fault_percent) apply, and --config-value overrides one.
func TestPluginTestConfig(t *testing.T) {
	t.Setenv("MORPH_PLUGIN_TEST_VAR", "x")
	cache := t.TempDir()
	entry := func(fx, extra string) string {
		return setup(t, []string{finalReply}, "\n[discovery]\nproject = false\nuser = false\n\n[[plugins]]\nname = \"entry\"\npath = \""+
			fixture(t, fx)+"\"\n"+extra)
	}
	snoop := entry("snoop", "env = [\"MORPH_PLUGIN_TEST_VAR\"]\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, `"system_prompt":"env 0 `},
		{[]string{"--config", snoop}, `"system_prompt":"env 1 `},
	} {
		code, stdout, stderr := morph(t, "", append(append([]string{"plugin", "test", "--json", "--cache-dir", cache}, c.args...), fixture(t, "snoop"))...)
		rep := decodeConform(t, stdout)
		if code != 0 {
			t.Fatalf("%v: exit %d, want 0\n%s", c.args, code, stderr)
		}
		if len(rep.Calls) == 0 {
			t.Fatalf("%v: no calls", c.args)
		}
		assertHas(t, strings.Join(c.args, " ")+": the first call's output", rep.Calls[0].Output, c.want)
	}

	flaky := entry("mw_flaky", "[plugins.config]\nfault_percent = \"100\"\n")
	for _, c := range []struct {
		args     []string
		conforms bool
	}{
		{nil, true},
		{[]string{"--config", flaky}, false},
		{[]string{"--config", flaky, "--config-value", "fault_percent=0"}, true},
	} {
		code, stdout, stderr := morph(t, "", append(append([]string{"plugin", "test", "--json", "--cache-dir", cache}, c.args...), fixture(t, "mw_flaky"))...)
		if rep := decodeConform(t, stdout); rep.Conforms != c.conforms || (code == 0) != c.conforms {
			t.Fatalf("%v: exit %d, conforms %v, want %v\n%s\n%s", c.args, code, rep.Conforms, c.conforms, stdout, stderr)
		}
	}

	code, _, stderr := morph(t, "", "plugin", "test", "--cache-dir", cache, "--config", snoop, fixture(t, "minimal"))
	if code != 2 || !strings.Contains(stderr, "no [[plugins]] entry has the path") {
		t.Fatalf("--config naming no entry for the module: exit %d\n%s", code, stderr)
	}
}
