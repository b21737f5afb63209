package conform

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/internal/testenv"
)

// conform runs Run and fails the test on an error.
func conform(t *testing.T, l *host.Loader, cfg host.Config, fixtures map[string][]json.RawMessage) *Report {
	t.Helper()
	rep, err := Run(context.Background(), l, cfg, fixtures)
	if err != nil {
		t.Fatal(err)
	}
	if rep.LoadError != "" {
		t.Fatalf("%s does not load: %s", cfg.Path, rep.LoadError)
	}
	return rep
}

// checkLoadError checks that rep, of the module named what, does not
// conform, for a load error that says want.
func checkLoadError(t *testing.T, what string, rep *Report, want string) {
	t.Helper()
	if rep.Conforms {
		t.Errorf("%s: Conforms = true, want false", what)
	}
	if !strings.Contains(rep.LoadError, want) {
		t.Errorf("%s: LoadError = %q, want it to say %q", what, rep.LoadError, want)
	}
}

// fixture returns the path of a guests/testdata module built by `make fixtures`.
func fixture(t testing.TB, name string) string {
	t.Helper()
	return testenv.Built(t, filepath.Join("..", "..", "guests", "testdata", name+".wasm"), "fixtures")
}

// goHooksWasm is the path of the Go example's standard build.
func goHooksWasm(t testing.TB) string {
	t.Helper()
	return testenv.Built(t, filepath.Join("..", "..", "examples", "go-hooks", "go-hooks.wasm"), "examples")
}

// newLoader is a loader with a cache of its own and a silent log.
func newLoader(t testing.TB) *host.Loader {
	t.Helper()
	// testenv.CompileCache: under make test, go-hooks.wasm compiled by
	// another package's tests.
	l, err := host.NewLoader(host.LoaderOptions{CacheDir: testenv.CompileCache(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

// rows is the report's calls as "name kind input status [error_kind]".
func rows(rep *Report) []string {
	var out []string
	for _, c := range rep.Calls {
		row := c.Name + " " + c.Kind + " " + c.Input + " " + c.Status
		if c.ErrorKind != "" {
			row += " " + c.ErrorKind
		}
		out = append(out, row)
	}
	return out
}

func raws(docs ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		out[i] = json.RawMessage(d)
	}
	return out
}

// The WAT fixtures, one per behaviour: each call's verdict, error kind and
// memory, and the report's counts.
func TestConformWATFixtures(t *testing.T) {
	l := newLoader(t)
	cases := []struct {
		fixture string
		timeout time.Duration
		want    []string
		kinds   []error // the error of each row, nil for none
	}{
		{"minimal", 0, []string{"build_prompt hook sample ok"}, []error{nil}},
		{"chatty", 0, []string{"build_prompt hook sample ok"}, []error{nil}},
		{"trap", 0, []string{"build_prompt hook sample fail trap"}, []error{host.ErrTrap}},
		{"badjson", 0, []string{"build_prompt hook sample fail bad_output"}, []error{host.ErrBadOutput}},
		{"echo", 0, []string{"build_prompt hook sample fail bad_output"}, []error{host.ErrBadOutput}}, // valid JSON, but no system_prompt
		{"guesterror", 0, []string{"build_prompt hook sample fail guest"}, []error{host.ErrGuest}},
		{"loop", 100 * time.Millisecond, []string{"build_prompt hook sample fail timeout"}, []error{host.ErrTimeout}},
		{"mw_trap", 0, []string{
			"on_action hook sample fail trap",
			"before_tool_call hook sample fail guest",
			"after_tool_call hook sample ok",
			"destroy destroy (empty) fail trap",
		}, []error{host.ErrTrap, host.ErrGuest, nil, host.ErrTrap}},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			rep := conform(t, l, host.Config{Path: fixture(t, c.fixture), Limits: host.Limits{Timeout: c.timeout}}, nil)
			if got := rows(rep); !slices.Equal(got, c.want) {
				t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			failed := 0
			for i, call := range rep.Calls {
				if want := c.kinds[i]; want == nil {
					if call.Err != nil || call.Error != "" {
						t.Errorf("%s: error %v", call.Name, call.Err)
					}
				} else {
					failed++
					var he *host.Error
					if !errors.Is(call.Err, want) {
						t.Errorf("%s: error %v, want one of kind %v", call.Name, call.Err, want)
					}
					if !errors.As(call.Err, &he) {
						t.Errorf("%s: error %v (%T), want a *host.Error", call.Name, call.Err, call.Err)
					} else if he.Export != call.Export {
						t.Errorf("%s: the error's Export = %q, want the call's, %q", call.Name, he.Export, call.Export)
					}
					if call.Err != nil && call.Error != call.Err.Error() {
						t.Errorf("%s: Error = %q, want the error's text, %q", call.Name, call.Error, call.Err)
					}
				}
				// A fault discards the instance (no memory to report), except a
				// guest-reported error, which keeps it.
				kept := call.Err == nil || errors.Is(call.Err, host.ErrGuest) || errors.Is(call.Err, host.ErrBadOutput) && c.fixture == "echo"
				switch {
				case !kept:
					if call.MemoryBytes != 0 {
						t.Errorf("%s: MemoryBytes = %d of a discarded instance, want 0", call.Name, call.MemoryBytes)
					}
				case call.MemoryBytes != 65536:
					t.Errorf("%s: MemoryBytes = %d, want 65536", call.Name, call.MemoryBytes)
				case call.MemoryPages != 1:
					t.Errorf("%s: MemoryPages = %d, want 1", call.Name, call.MemoryPages)
				}
				if call.Duration <= 0 {
					t.Errorf("%s: duration %v", call.Name, call.Duration)
				}
			}
			if rep.Failed != failed {
				t.Errorf("Failed = %d, want %d", rep.Failed, failed)
			}
			if want := len(rep.Calls) - failed; rep.Passed != want {
				t.Errorf("Passed = %d, want %d", rep.Passed, want)
			}
			if rep.Conforms != (failed == 0) {
				t.Errorf("Conforms = %v with %d failed", rep.Conforms, failed)
			}
			if rep.Skipped != 0 {
				t.Errorf("Skipped = %d, want 0", rep.Skipped)
			}
			if rep.Plugin == "" {
				t.Error("no Plugin name in the report")
			}
			if rep.Manifest == nil {
				t.Error("no Manifest in the report")
			}
			if rep.MemoryBytes != 65536 {
				t.Errorf("MemoryBytes = %d, want 65536", rep.MemoryBytes)
			}
			if rep.LoadTime <= 0 {
				t.Errorf("LoadTime = %v, want more than 0", rep.LoadTime)
			}
			if rep.Instances < 1 {
				t.Errorf("Instances = %d, want at least 1", rep.Instances)
			}
		})
	}

	rep := conform(t, l, host.Config{Path: fixture(t, "minimal")}, nil)
	if out := rep.Calls[0].Output; out != `{"system_prompt":"Be brief."}` {
		t.Errorf("minimal's output %q", out)
	}
	rep = conform(t, l, host.Config{Path: fixture(t, "echo")}, nil)
	if msg, want := rep.Calls[0].Error, `plugin "echo" export morph_build_prompt: plugin output invalid: hook build_prompt: does not satisfy prompt_output.json: `+
		`at the top level: missing property 'system_prompt' (prompt_output.json#/required)`; msg != want {
		t.Errorf("echo's failure:\n got %s\nwant %s", msg, want)
	}
	// After a fault the next call runs on a fresh instance.
	rep = conform(t, l, host.Config{Path: fixture(t, "mw_trap")}, nil)
	var fresh []bool
	for _, c := range rep.Calls[:3] {
		fresh = append(fresh, c.NewInstance)
	}
	if want := []bool{false, true, false}; !slices.Equal(fresh, want) {
		t.Errorf("the first calls' NewInstance = %v, want %v", fresh, want)
	}
	if rep.Discarded != 1 {
		t.Errorf("Discarded = %d, want 1", rep.Discarded)
	}
	if rep.Instances != 2 {
		t.Errorf("Instances = %d, want 2", rep.Instances)
	}
}

func TestConformLoadAndReadErrors(t *testing.T) {
	l := newLoader(t)
	ctx := context.Background()
	rep, err := Run(ctx, l, host.Config{Path: fixture(t, "wrongversion")}, nil)
	if err != nil {
		t.Fatalf("wrongversion: %v", err)
	}
	checkLoadError(t, "wrongversion", rep, "found morph_abi_v2")
	if len(rep.Calls) != 0 {
		t.Errorf("wrongversion: %d calls, want none", len(rep.Calls))
	}
	rep, err = Run(ctx, l, host.Config{Path: fixture(t, "missingexport")}, nil)
	if err != nil {
		t.Fatalf("missingexport: %v", err)
	}
	checkLoadError(t, "missingexport", rep, "does not export morph_build_prompt")
	if _, err := Run(ctx, l, host.Config{Path: filepath.Join(t.TempDir(), "absent.wasm")}, nil); !errors.Is(err, host.ErrLoad) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
	text := filepath.Join(t.TempDir(), "text.wasm")
	os.WriteFile(text, []byte("not a module at all"), 0o644)
	if _, err := Run(ctx, l, host.Config{Path: text}, nil); !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), "not a WebAssembly module") {
		t.Fatalf("a text file: %v", err)
	}
}

// Fixtures go to the longest hook or tool name their key starts with; a
// fixture that is not the hook's input, or matches nothing, fails uncalled.
func TestConformHookFixtures(t *testing.T) {
	l := newLoader(t)
	rep := conform(t, l, host.Config{Path: fixture(t, "minimal")}, map[string][]json.RawMessage{
		"build_prompt-long": raws(`{"task":"` + strings.Repeat("word ", 1000) + `","tools":[],"default_prompt":"p","added_later":true}`),
		"build_prompt":      raws(`null`, `{"task":3}`),
		"build_promt":       raws(`{}`),
	})
	want := []string{
		"build_prompt hook sample ok",
		"build_prompt hook build_prompt#1 fail invalid_fixture",
		"build_prompt hook build_prompt#2 fail invalid_fixture",
		"build_prompt hook build_prompt-long ok",
		"build_promt fixture build_promt fail invalid_fixture",
	}
	if got := rows(rep); !slices.Equal(got, want) {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i, msg := range []string{"a JSON null, not an object", "cannot unmarshal number", "", "starts with no hook or tool of the plugin (hooks: build_prompt; tools: none)"} {
		c := rep.Calls[i+1]
		if msg == "" {
			continue
		}
		if !errors.Is(c.Err, ErrInvalidFixture) {
			t.Errorf("%s %s: error %v, want ErrInvalidFixture", c.Name, c.Input, c.Err)
		}
		if !strings.Contains(c.Error, msg) {
			t.Errorf("%s %s: Error = %q, want it to say %q", c.Name, c.Input, c.Error, msg)
		}
		if c.Duration != 0 {
			t.Errorf("%s %s: Duration = %v, want 0 (an invalid fixture is not called)", c.Name, c.Input, c.Duration)
		}
	}
	if rep.Conforms {
		t.Error("Conforms = true with invalid fixtures")
	}
	if rep.Failed != 3 {
		t.Errorf("Failed = %d, want 3", rep.Failed)
	}
	if rep.Passed != 2 {
		t.Errorf("Passed = %d, want 2", rep.Passed)
	}
}

// An answer that breaks its schema fails naming the plugin, the hook, the
// schema keyword and the JSON pointer, whether the host's own decode took
// it (and kept the instance) or refused it (and retired the instance). echo
// answers its input: each fixture is a PromptInput with a system_prompt.
func TestConformAnswerAgainstSchema(t *testing.T) {
	rep := conform(t, newLoader(t), host.Config{Path: fixture(t, "echo")}, map[string][]json.RawMessage{
		"build_prompt-blank":  raws(`{"task":"t","tools":[],"default_prompt":"p","system_prompt":"\u00a0 "}`),
		"build_prompt-number": raws(`{"task":"t","tools":[],"default_prompt":"p","system_prompt":3}`),
		"build_prompt-ok":     raws(`{"task":"t","tools":[],"default_prompt":"p","system_prompt":"Be brief."}`),
	})
	want := []string{
		"build_prompt hook sample fail bad_output",
		"build_prompt hook build_prompt-blank fail bad_output",
		"build_prompt hook build_prompt-number fail bad_output",
		"build_prompt hook build_prompt-ok ok",
	}
	if got := rows(rep); !slices.Equal(got, want) {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	const where = `plugin "echo" export morph_build_prompt: plugin output invalid: hook build_prompt: does not satisfy prompt_output.json: `
	for i, msg := range []string{
		where + "at /system_prompt: does not match the pattern (prompt_output.json#/properties/system_prompt/pattern)",
		// The host's decode refused it: the schema says where.
		where + "at /system_prompt: got number, want string (prompt_output.json#/properties/system_prompt/type)",
	} {
		c := rep.Calls[i+1]
		if c.Error != msg {
			t.Errorf("%s:\n got %s\nwant %s", c.Input, c.Error, msg)
		}
		if !errors.Is(c.Err, host.ErrBadOutput) {
			t.Errorf("%s: %v is not host.ErrBadOutput", c.Input, c.Err)
		}
	}
	// Only the answer the host could not decode retired its instance.
	if !rep.Calls[3].NewInstance {
		t.Error("the call after an answer the host could not decode ran on the old instance")
	}
	if rep.Calls[2].NewInstance || rep.Discarded != 1 {
		t.Errorf("new instance before the undecodable answer %v, discarded %d, want false, 1", rep.Calls[2].NewInstance, rep.Discarded)
	}
}

// The Go example: every hook conforms on its sample; word_count answers its
// schema-built sample, json_query rejects it (a note, not a failure); the
// fixtures run after the samples.
func TestConformGoHooks(t *testing.T) {
	l := newLoader(t)
	path := goHooksWasm(t)
	rep := conform(t, l, host.Config{Path: path}, nil)
	if !rep.Conforms {
		t.Fatalf("go-hooks does not conform: %+v\n%s", rep, strings.Join(rows(rep), "\n"))
	}
	if rep.Failed != 0 {
		t.Errorf("Failed = %d, want 0", rep.Failed)
	}
	if rep.Noted != 1 {
		t.Errorf("Noted = %d, want 1 (json_query's sample)", rep.Noted)
	}
	if rep.Discarded != 0 {
		t.Errorf("Discarded = %d, want 0", rep.Discarded)
	}
	if rep.Instances != 1 {
		t.Errorf("Instances = %d, want 1", rep.Instances)
	}
	var hooks []string
	for _, c := range rep.Calls {
		if c.Kind == Hook {
			hooks = append(hooks, c.Name)
			if c.Status != OK || c.Input != "sample" {
				t.Errorf("hook %s: %s %s", c.Name, c.Status, c.Error)
			}
		}
		if c.MemoryBytes < 2<<20 || c.MemoryPages != c.MemoryBytes/65536 {
			t.Errorf("%s: memory %d bytes, %d pages; a Go guest has megabytes", c.Name, c.MemoryBytes, c.MemoryPages)
		}
	}
	if m := rep.Manifest.Hooks; len(hooks) != len(m) || !slices.Equal(slices.Sorted(slices.Values(hooks)), slices.Sorted(slices.Values(m))) {
		t.Errorf("hooks called %v, declared %v", hooks, m)
	}
	tail := rows(rep)[len(hooks):]
	if want := []string{"word_count tool sample ok", "json_query tool sample note", "destroy destroy (empty) ok"}; !slices.Equal(tail, want) {
		t.Fatalf("tools and destroy: %v, want %v", tail, want)
	}
	wc, jq := rep.Calls[len(hooks)], rep.Calls[len(hooks)+1]
	if wc.Output != `{"output":"{\"words\":1,\"lines\":1,\"chars\":6}"}` {
		t.Errorf("word_count on its sample: %s", wc.Output)
	}
	if !strings.Contains(jq.Note, `the tool rejected the sample params {"json":"sample","path":"sample"}: invalid JSON document`) || jq.Err != nil {
		t.Errorf("json_query's note: %q (%v)", jq.Note, jq.Err)
	}

	// The config reaches the guest; a guard's denial is a note.
	rep = conform(t, l, host.Config{Path: path, Values: map[string]string{"deny_tools": "word_count", "temperature": "0.7"}}, nil)
	for _, c := range rep.Calls {
		switch c.Name {
		case abi.HookBuildParams:
			if c.Output != `{"parameters":{"max_tokens":512,"temperature":0.7}}` {
				t.Errorf("build_params with a config value: %s", c.Output)
			}
		case abi.HookBeforeToolCall:
			if c.Status != Note || !strings.Contains(c.Note, `denies the sample call (reason "tool word_count is denied by policy`) {
				t.Errorf("before_tool_call: %s %q", c.Status, c.Note)
			}
		}
	}

	rep = conform(t, l, host.Config{Path: path}, map[string][]json.RawMessage{
		"word_count-two":       raws(`{"params":{"text":"a b"}}`),
		"word_count-missing":   raws(`{"params":{}}`),
		"word_count-othertool": raws(`{"tool":"json_query","params":{"json":"1","path":""}}`),
		"json_query":           raws(`{"tool":"json_query","params":{"json":"{\"a\":[1,2]}","path":"a[1]"}}`),
		"json_query-badpath":   raws(`{"params":{"json":"{}","path":"nope"}}`),
		"on_final-error":       raws(`{"session_id":"s","turn":1,"step":0,"status":"error","error":"model failed","step_usage":{},"turn_usage":{}}`),
	})
	var got []string
	for _, c := range rep.Calls {
		if c.Input != "sample" && c.Kind != Destroy {
			got = append(got, c.Name+" "+c.Input+" "+c.Status+" "+c.ErrorKind+" "+c.Output+c.Note)
		}
	}
	want := []string{
		"on_final on_final-error ok  ",
		`word_count word_count-missing fail invalid_fixture `,
		`word_count word_count-othertool fail invalid_fixture `,
		`word_count word_count-two ok  {"output":"{\"words\":2,\"lines\":1,\"chars\":3}"}`,
		`json_query json_query ok  {"output":"2"}`,
		`json_query json_query-badpath note  the tool reported an error: at $: no key "nope" (keys: none)`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("fixture rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, c := range rep.Calls {
		switch c.Input {
		case "word_count-missing":
			if !errors.Is(c.Err, ErrInvalidFixture) {
				t.Errorf("word_count-missing: error %v, want ErrInvalidFixture", c.Err)
			}
			for _, want := range []string{"the engine would never send it", "text"} {
				if !strings.Contains(c.Error, want) {
					t.Errorf("word_count-missing: Error = %q, want it to say %q", c.Error, want)
				}
			}
		case "word_count-othertool":
			if !strings.Contains(c.Error, `names the tool "json_query", but its key is for "word_count"`) {
				t.Errorf("word_count-othertool: %v", c.Err)
			}
		}
	}
}

// fakeTool is a tool with a given schema, for the runner's checks that need
// no call.
type fakeTool struct{ name, schema string }

func (f fakeTool) Name() string            { return f.name }
func (f fakeTool) Description() string     { return "" }
func (f fakeTool) ParameterSchema() string { return f.schema }
func (f fakeTool) Execute(context.Context, map[string]any) (string, error) {
	return "", errors.New("not called")
}

// A tool whose schema does not compile fails, with its fixtures; one whose
// sample the schema rejects is skipped, with a note asking for a fixture.
func TestConformToolsNotCalled(t *testing.T) {
	c := &conformer{reg: engine.NewRegistry(), samplesUntil: time.Now().Add(time.Minute)}
	for _, ft := range []fakeTool{
		{"digits", `{"type":"object","properties":{"n":{"type":"string","pattern":"^[0-9]+$"}},"required":["n"]}`},
		{"broken", `{"type":3}`},
	} {
		c.reg.Register(ft)
		c.tool(abi.ToolSpec{Name: ft.name, Parameters: json.RawMessage(ft.schema)}, fixtureList(ft.name, raws(`{"params":{}}`)))
	}
	want := []string{"digits tool sample skip", "digits tool digits fail invalid_fixture", "broken tool sample fail invalid_schema", "broken tool broken fail invalid_fixture"}
	if got := rows(&Report{Calls: c.calls}); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if note := c.calls[0].Note; !strings.Contains(note, "could not build params that satisfy the tool's schema") || !strings.Contains(note, "add a fixture digits.json") {
		t.Errorf("skip note %q", note)
	}
	if err := c.calls[2].Err; !errors.Is(err, engine.ErrInvalidSchema) {
		t.Errorf("broken schema: %v", err)
	}

	// Once the run's time for samples is spent, no tool gets one: a plugin
	// of many slow schemas takes 5s, not 500ms each.
	c = &conformer{reg: engine.NewRegistry(), samplesUntil: time.Now()}
	ft := fakeTool{"text", `{"type":"object","properties":{"s":{"type":"string"}},"required":["s"]}`}
	c.reg.Register(ft)
	c.tool(abi.ToolSpec{Name: ft.name, Parameters: json.RawMessage(ft.schema)}, nil)
	if note := c.calls[0].Note; c.calls[0].Status != Skip || !strings.Contains(note, "building the sample took longer than 5s, the bound of all the plugin's samples") {
		t.Errorf("a tool after the samples' time: %s %q", c.calls[0].Status, note)
	}
}

// A plugin whose tools' schemas attack the sampler: Run reports each
// tool: refused by the engine (counts beyond an int32 are no schema), skipped
// with a note naming it and the sampler's bound, or called.
func TestConformSchemaBomb(t *testing.T) {
	rep := conform(t, newLoader(t), host.Config{Path: fixture(t, "schema_bomb")}, nil)
	refused := map[string]string{
		"long_string": "minLength", "cut_string": "maxLength", "many_items": "minItems",
	}
	skipped := map[string]string{
		"many_props":  "minProperties 1e+09: the sample would be larger than 65536 bytes",
		"fan_out":     "the sample would be larger than 65536 bytes (at #/$defs/l6/const)",
		"ref_loop":    "nests deeper than 16 levels",
		"huge_int":    "",
		"bad_pattern": "does not match the pattern",
	}
	if len(rep.Calls) != len(refused)+len(skipped) || rep.Conforms {
		t.Fatalf("calls:\n%s", strings.Join(rows(rep), "\n"))
	}
	for _, c := range rep.Calls {
		r, isRefused := refused[c.Name]
		w, isSkipped := skipped[c.Name]
		switch {
		case isRefused && (c.Status != Fail || c.ErrorKind != "invalid_schema" || !strings.Contains(c.Error, r)):
			t.Errorf("%s: %s %s %q, want the schema refused naming %s", c.Name, c.Status, c.ErrorKind, c.Error, r)
		case isRefused:
		case !isSkipped:
			t.Errorf("unexpected row %s", c.Name)
		case w == "" && c.Status != OK:
			t.Errorf("%s: %s %s %s", c.Name, c.Status, c.Error, c.Note)
		case w != "" && (c.Status != Skip || !strings.Contains(c.Note, w) || !strings.Contains(c.Note, "add a fixture "+c.Name+".json")):
			t.Errorf("%s: %s %q, want a skip saying %q", c.Name, c.Status, c.Note, w)
		}
	}
}
