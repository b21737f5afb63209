package conform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
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

// fixture returns the path of a guests/testdata module built by `make fixtures`.
func fixture(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join("..", "..", "guests", "testdata", name+".wasm")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("fixture %s missing: run `make fixtures` (needs wat2wasm from Debian's wabt): %v", path, err)
	}
	return path
}

// goHooksWasm is the path of the Go example's standard build.
func goHooksWasm(t testing.TB) string {
	t.Helper()
	path := filepath.Join("..", "..", "examples", "go-hooks", "go-hooks.wasm")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s missing: run `make examples`: %v", path, err)
	}
	return path
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
					if !errors.Is(call.Err, want) || !errors.As(call.Err, &he) || he.Export != call.Export || call.Error != call.Err.Error() {
						t.Errorf("%s: error %v (%T), want a *host.Error of kind %v for %s", call.Name, call.Err, call.Err, want, call.Export)
					}
				}
				// A fault discards the instance (no memory to report), except a
				// guest-reported error, which keeps it.
				kept := call.Err == nil || errors.Is(call.Err, host.ErrGuest) || errors.Is(call.Err, host.ErrBadOutput) && c.fixture == "echo"
				if kept && (call.MemoryBytes != 65536 || call.MemoryPages != 1) || !kept && call.MemoryBytes != 0 {
					t.Errorf("%s: memory %d bytes, %d pages (kept %v)", call.Name, call.MemoryBytes, call.MemoryPages, kept)
				}
				if call.Duration <= 0 {
					t.Errorf("%s: duration %v", call.Name, call.Duration)
				}
			}
			if rep.Failed != failed || rep.Passed != len(rep.Calls)-failed || rep.Conforms != (failed == 0) || rep.Skipped != 0 {
				t.Errorf("counts: failed %d passed %d skipped %d conforms %v", rep.Failed, rep.Passed, rep.Skipped, rep.Conforms)
			}
			if rep.Plugin == "" || rep.Manifest == nil || rep.MemoryBytes != 65536 || rep.LoadTime <= 0 || rep.Instances < 1 {
				t.Errorf("report %+v", rep)
			}
		})
	}

	rep := conform(t, l, host.Config{Path: fixture(t, "minimal")}, nil)
	if out := rep.Calls[0].Output; out != `{"system_prompt":"Be brief."}` {
		t.Errorf("minimal's output %q", out)
	}
	rep = conform(t, l, host.Config{Path: fixture(t, "echo")}, nil)
	if msg := rep.Calls[0].Error; !strings.Contains(msg, `PromptOutput lacks the required field "system_prompt"`) {
		t.Errorf("echo's failure: %s", msg)
	}
	// After a fault the next call runs on a fresh instance.
	rep = conform(t, l, host.Config{Path: fixture(t, "mw_trap")}, nil)
	if c := rep.Calls; c[0].NewInstance || !c[1].NewInstance || c[2].NewInstance || rep.Discarded != 1 || rep.Instances != 2 {
		t.Errorf("new instances %v %v %v, discarded %d, instances %d", c[0].NewInstance, c[1].NewInstance, c[2].NewInstance, rep.Discarded, rep.Instances)
	}
}

func TestConformLoadAndReadErrors(t *testing.T) {
	l := newLoader(t)
	ctx := context.Background()
	rep, err := Run(ctx, l, host.Config{Path: fixture(t, "wrongversion")}, nil)
	if err != nil || rep.Conforms || !strings.Contains(rep.LoadError, "found morph_abi_v2") || len(rep.Calls) != 0 {
		t.Fatalf("wrongversion: %+v, %v", rep, err)
	}
	rep, err = Run(ctx, l, host.Config{Path: fixture(t, "missingexport")}, nil)
	if err != nil || rep.Conforms || !strings.Contains(rep.LoadError, "does not export morph_build_prompt") {
		t.Fatalf("missingexport: %+v, %v", rep, err)
	}
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
		if !errors.Is(c.Err, ErrInvalidFixture) || !strings.Contains(c.Error, msg) || c.Duration != 0 {
			t.Errorf("%s %s: %v, want %q", c.Name, c.Input, c.Err, msg)
		}
	}
	if rep.Conforms || rep.Failed != 3 || rep.Passed != 2 {
		t.Errorf("counts: failed %d, passed %d", rep.Failed, rep.Passed)
	}
}

// The Go example: every hook conforms on its sample; word_count answers its
// schema-built sample, json_query rejects it (a note, not a failure); the
// fixtures run after the samples.
func TestConformGoHooks(t *testing.T) {
	l := newLoader(t)
	path := goHooksWasm(t)
	rep := conform(t, l, host.Config{Path: path}, nil)
	if !rep.Conforms || rep.Failed != 0 || rep.Noted != 1 || rep.Discarded != 0 || rep.Instances != 1 {
		t.Fatalf("go-hooks does not conform: %+v\n%s", rep, strings.Join(rows(rep), "\n"))
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
			if !errors.Is(c.Err, ErrInvalidFixture) || !strings.Contains(c.Error, "the engine would never send it") || !strings.Contains(c.Error, "text") {
				t.Errorf("word_count-missing: %v", c.Err)
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

func TestSampleParams(t *testing.T) {
	cases := []struct{ schema, want string }{
		{``, `{}`},
		{`true`, `{}`},
		{`{}`, `{}`},
		{`{"type":"object","additionalProperties":false}`, `{}`},
		{`{"type":"object","properties":{"text":{"type":"string"},"opt":{"type":"integer"}},"required":["text"]}`, `{"text":"sample"}`},
		{`{"properties":{"a":{}},"required":["a"]}`, `{"a":"sample"}`},
		{`{"type":"object","required":["i","n","b","x","l","e","c","d","ex"],"properties":{
			"i":{"type":"integer","minimum":5},"n":{"type":"number","maximum":0.5},"b":{"type":"boolean"},"x":{"type":["null","string"]},
			"l":{"type":"array","items":{"type":"integer","exclusiveMinimum":1.5},"minItems":2},"e":{"enum":["red","green"]},
			"c":{"const":42},"d":{"type":"string","default":"dflt"},"ex":{"type":"string","examples":["exa"]}}}`,
			`{"b":true,"c":42,"d":"dflt","e":"red","ex":"exa","i":5,"l":[3,3],"n":0.5,"x":"sample"}`},
		{`{"type":"object","required":["long","short","mail","when","url"],"properties":{
			"long":{"type":"string","minLength":10},"short":{"type":"string","maxLength":3},"mail":{"type":"string","format":"email"},
			"when":{"type":"string","format":"date-time"},"url":{"type":"string","format":"uri"}}}`,
			`{"long":"samplessss","mail":"sample@example.com","short":"sam","url":"https://example.com/sample","when":"2025-01-02T03:04:05Z"}`},
		{`{"type":"object","required":["p"],"properties":{"p":{"$ref":"#/$defs/point"}},
			"$defs":{"point":{"type":"object","required":["x","y"],"properties":{"x":{"type":"number"},"y":{"type":"number"}}}}}`,
			`{"p":{"x":1,"y":1}}`},
		{`{"type":"object","required":["v"],"properties":{"v":{"anyOf":[{"type":"integer"},{"type":"string"}]}}}`, `{"v":1}`},
		{`{"allOf":[{"type":"object","required":["a"],"properties":{"a":{"type":"boolean"}}},{"required":["b"]}]}`, `{"a":true,"b":"sample"}`},
		{`{"minProperties":3,"properties":{"z":{"type":"integer"},"a":{"type":"boolean"}},"additionalProperties":{"type":"integer","minimum":7}}`,
			`{"a":true,"sample_1":7,"z":1}`},
		{`{"type":"object","required":["n"],"properties":{"n":{"type":"integer","minimum":1e308}}}`, `{"n":1e+308}`},
	}
	for _, c := range cases {
		got, err := SampleParams(json.RawMessage(c.schema))
		if err != nil {
			t.Errorf("%s: %v", c.schema, err)
			continue
		}
		b, _ := json.Marshal(got)
		if string(b) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.schema, b, c.want)
		}
		if c.schema == "" || c.schema == "true" {
			continue
		}
		reg := engine.NewRegistry()
		reg.Register(fakeTool{"t", c.schema})
		if err := reg.Validate("t", got); err != nil {
			t.Errorf("%s: the sample %s does not satisfy it: %v", c.schema, b, err)
		}
	}
	for schema, want := range map[string]string{
		`[1]`:                   "not a JSON object",
		`{"type":"string"}`:     "describes a JSON string, not an object",
		`{"$ref":"other.json"}`: "only references within the schema",
		`{"$ref":"#"}`:          "nests deeper than 16 levels",
		`{"type":`:              "not JSON",
	} {
		if _, err := SampleParams(json.RawMessage(schema)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", schema, err, want)
		}
	}
}

// A tool's schema is the plugin's: whatever it asks for, the sampler
// answers quickly with a sample or an ErrUnsampleable error naming the
// keyword, where it is and the bound, and never panics.
func TestConformSampleBounds(t *testing.T) {
	prop := func(s string) string { return `{"type":"object","required":["p"],"properties":{"p":` + s + `}}` }
	// levels of fan required properties, each a $ref to the next level, down to leaf
	fanOut := func(levels, fan int, leaf string) string {
		defs := make([]string, 0, levels+1)
		for i := range levels {
			props := make([]string, fan)
			names := make([]string, fan)
			for j := range fan {
				names[j] = fmt.Sprintf(`"p%d"`, j)
				props[j] = fmt.Sprintf(`"p%d":{"$ref":"#/$defs/l%d"}`, j, i+1)
			}
			defs = append(defs, fmt.Sprintf(`"l%d":{"type":"object","required":[%s],"properties":{%s}}`, i, strings.Join(names, ","), strings.Join(props, ",")))
		}
		defs = append(defs, fmt.Sprintf(`"l%d":%s`, levels, leaf))
		return `{"$ref":"#/$defs/l0","$defs":{` + strings.Join(defs, ",") + `}}`
	}
	many := func(n int, f func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = f(i)
		}
		return strings.Join(parts, ",")
	}
	longName := strings.Repeat("n", 100_000)
	bigConst := `{"const":"` + strings.Repeat("c", 100_000) + `"}`
	cases := []struct{ name, schema, want string }{
		{"minLength 9e18", prop(`{"type":"string","minLength":9e18}`), "minLength 9e+18: the sample would be larger than 65536 bytes (at #/properties/p)"},
		{"minLength 1e308", prop(`{"type":"string","minLength":1e308}`), "minLength 1e+308: the sample"},
		{"minLength 1e5", prop(`{"type":"string","minLength":100000}`), "minLength 100000: the sample"},
		{"minItems 1e10", prop(`{"type":"array","minItems":1e10}`), "minItems 1e+10: the sample would be larger than 65536 bytes (at #/properties/p)"},
		{"minItems of big items", prop(`{"type":"array","minItems":5000,"items":{"type":"string","minLength":100}}`), "larger than 65536 bytes (at #/properties/p/items)"},
		{"minProperties 1e9", `{"type":"object","minProperties":1e9}`, "minProperties 1e+09: the sample would be larger than 65536 bytes (at #)"},
		{"fan-out", fanOut(4, 16, `{"type":"integer"}`), "larger than 65536 bytes (at #/$defs/l"},
		{"fan-out of a const", fanOut(6, 16, `{"const":"`+strings.Repeat("x", 256)+`"}`), "larger than 65536 bytes (at #/$defs/l6/const)"},
		{"$ref cycle", `{"type":"object","required":["a","b"],"properties":{"a":{"$ref":"#"},"b":{"$ref":"#"}}}`, "nests deeper than 16 levels"},
		{"long required list", `{"type":"object","required":[` + many(20_000, func(i int) string { return fmt.Sprintf(`"r%d"`, i) }) + `]}`, "larger than 65536 bytes (at #)"},
		{"huge const", prop(bigConst), "larger than 65536 bytes (at #/properties/p/const)"},
		{"huge enum value", prop(`{"enum":["` + strings.Repeat("e", 100_000) + `","b"]}`), "larger than 65536 bytes (at #/properties/p/enum/0)"},
		{"huge default", prop(`{"type":"string","default":"` + strings.Repeat("d", 100_000) + `"}`), "(at #/properties/p/default)"},
		{"long property name", `{"type":"object","required":["` + longName + `"]}`, "larger than 65536 bytes (at #)"},
		{"nested 100 deep", strings.Repeat(`{"type":"object","required":["p"],"properties":{"p":`, 50) + `{}` + strings.Repeat(`}}`, 50), "nested more than 64 levels"},
		{"deep $ref name", fanOut(1, 1, prop(prop(`{"type":"string","minLength":1e9}`))), "(at #/$defs/l1/properties/p/properties/p)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := SampleParams(json.RawMessage(c.schema))
			if !errors.Is(err, ErrUnsampleable) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("sample %.200v, error %.300v; want ErrUnsampleable saying %q", got, err, c.want)
			}
			if len(err.Error()) > 500 {
				t.Errorf("the error is %d bytes long", len(err.Error()))
			}
		})
	}
	// Out-of-range numbers give a sample, or one the validation rejects, but no panic.
	for _, schema := range []string{
		prop(`{"type":"string","maxLength":1e308}`), prop(`{"type":"string","maxLength":-1e308}`), prop(`{"type":"string","minLength":-1e308}`),
		prop(`{"type":"integer","exclusiveMaximum":-1e308}`), prop(`{"type":"integer","maximum":1e308,"minimum":1e308}`),
		prop(`{"type":"array","minItems":-1e308}`), `{"type":"object","minProperties":-1}`,
		prop(`{"type":"string","pattern":"^(a|aa)+$","minLength":3}`),
	} {
		if _, err := SampleParams(json.RawMessage(schema)); err != nil {
			t.Errorf("%s: %v", schema, err)
		}
	}

	// Each visit of a wide allOf copies its 20,000 properties: the clock
	// stops the sampler long before the size would.
	wide := `{"allOf":[{"properties":{` + many(20_000, func(i int) string { return fmt.Sprintf(`"w%d":{}`, i) }) + `}}]}`
	mid := `{"type":"object","required":[` + many(90, func(i int) string { return fmt.Sprintf(`"m%d"`, i) }) + `],"properties":{` +
		many(90, func(i int) string { return fmt.Sprintf(`"m%d":{"$ref":"#/$defs/wide"}`, i) }) + `}}`
	slow := `{"type":"object","required":[` + many(90, func(i int) string { return fmt.Sprintf(`"a%d"`, i) }) + `],"properties":{` +
		many(90, func(i int) string { return fmt.Sprintf(`"a%d":{"$ref":"#/$defs/mid"}`, i) }) + `},"$defs":{"wide":` + wide + `,"mid":` + mid + `}}`
	if _, err := SampleParams(json.RawMessage(slow)); !errors.Is(err, ErrUnsampleable) || !strings.Contains(err.Error(), "took longer than 500ms") {
		t.Fatalf("a slow schema: %v", err)
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
		"bad_pattern": "does not match pattern",
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

// The output checks against the schemas of abi/schema/.
func TestConformOutputChecks(t *testing.T) {
	cases := []struct {
		hook, out, err string // err "": conforms
	}{
		{abi.HookBuildPrompt, `{"system_prompt":"Be brief.","added_later":1}`, ""},
		{abi.HookBuildPrompt, ``, "empty output: the export must answer a PromptOutput object"},
		{abi.HookBuildPrompt, `null`, "a JSON null, not a PromptOutput object"},
		{abi.HookBuildPrompt, `{"system_prompt":" \n"}`, "system_prompt is blank"},
		{abi.HookBuildPrompt, `{"System_Prompt":"x"}`, `lacks the required field "system_prompt"`},
		{abi.HookBuildPrompt, `{"system_prompt":null}`, "PromptOutput.system_prompt is a JSON null, want string"},
		{abi.HookBuildParams, ``, ""},
		{abi.HookBuildParams, `{}`, ""},
		{abi.HookBuildParams, `{"parameters":null}`, ""},
		{abi.HookBuildParams, `{"parameters":{"temperature":0.1}}`, ""},
		{abi.HookBuildParams, `{"parameters":[1]}`, "ParamsOutput.parameters is a JSON array, want object or null"},
		{abi.HookFallbackFinal, `{"thought":"t","output":null}`, ""},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"steps":["a",{"step":"b","status":"in_progress"},{"step":"c"}]}}`, ""},
		{abi.HookFallbackFinal, `{"thought":"t"}`, `Final lacks the required field "output"`},
		{abi.HookFallbackFinal, ``, "empty output"},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"summary":"s"}}`, `Plan lacks the required field "steps"`},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"steps":[{"step":"a","status":"done"}]}}`, `steps[0].status is "done"`},
		{abi.HookFallbackFinal, `{"thought":"t","output":1,"plan":{"steps":[3]}}`, "steps[0]: a JSON number, not a PlanStep object"},
		{abi.HookBeforeRun, ``, ""},
		{abi.HookBeforeRun, `{"tools":null}`, ""},
		{abi.HookBeforeRun, `{"system_prompt":"p","tools":["a"]}`, ""},
		{abi.HookBeforeRun, `{"tools":"a"}`, "BeforeRunOutput.tools is a JSON string"},
		{abi.HookBeforeRun, `{"tools":[1]}`, "not a list of strings"},
		{abi.HookBeforeToolCall, `{}`, ""},
		{abi.HookBeforeToolCall, `{"input":{"text":"a"}}`, ""},
		{abi.HookBeforeToolCall, `{"deny":"yes"}`, "BeforeToolCallOutput.deny is a JSON string, want boolean"},
		{abi.HookAfterToolCall, `{"output":""}`, ""},
		{abi.HookAfterToolCall, `{"output":null}`, ""},
		{abi.HookAfterToolCall, `{"output":3}`, "AfterToolCallOutput.output is a JSON number"},
		{abi.HookOnFinal, ``, ""},
		{abi.HookOnFinal, `{"anything":1}`, ""},
		{abi.HookHandleStage, `{"status":"success","context_updates":{"v.passed":true},"later":1}`, ""},
		{abi.HookHandleStage, ``, "empty output: the export must answer a StageOutcome object"},
		{abi.HookHandleStage, `{"status":"ok"}`, `StageOutcome.status "ok": want one of success, fail`},
		{abi.HookHandleStage, `{"status":"success","suggested_next_ids":"a"}`, "StageOutcome.suggested_next_ids is a JSON string, want array"},
		{abi.HookHandleStage, `{"status":"success","context_updates":{"outcome":"fail"}}`, `StageOutcome.context_updates: key "outcome" is the pipeline runner's`},
		{"tool", `{"output":"3"}`, ""},
		{"tool", ``, "empty output: the export must answer a ToolCallOutput object"},
		{"tool", `{}`, `ToolCallOutput lacks the required field "output"`},
		{"tool", `{"output":3}`, "ToolCallOutput.output is a JSON number, want string"},
	}
	for _, c := range cases {
		pc := toolPayloads
		if c.hook != "tool" {
			pc = conformHooks[c.hook]
		}
		_, err := pc.check([]byte(c.out))
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s %s: error %v, want %q", c.hook, c.out, err, c.err)
		}
	}
	note, err := conformHooks[abi.HookBeforeToolCall].check([]byte(`{"deny":true,"reason":"no"}`))
	if err != nil || note != `denies the sample call (reason "no")` {
		t.Errorf("a denial: %q, %v", note, err)
	}
	note, err = conformHooks[abi.HookHandleStage].check([]byte(`{"status":"fail","failure_reason":"no marker"}`))
	if err != nil || note != `fails the sample stage (reason "no marker")` {
		t.Errorf("a failed stage: %q, %v", note, err)
	}
	// Every hook this host calls has its payloads here, and a sample.
	samples := hookSamples(abi.Manifest{History: true})
	for _, h := range hookOrder {
		pc, ok := conformHooks[h]
		if !ok || samples[h] == nil {
			t.Fatalf("hook %s has no payload check or no sample", h)
		}
		raw, _ := json.Marshal(samples[h])
		if err := decodeObject(raw, pc.input()); err != nil || reflect.TypeOf(pc.input()).Elem() != reflect.TypeOf(samples[h]) {
			t.Errorf("%s: sample %T does not decode as its input %T: %v", h, samples[h], pc.input(), err)
		}
	}
	for _, h := range abi.Hooks {
		if !slices.Contains(hookOrder, h.Name) {
			t.Errorf("hook %s is missing from hookOrder", h.Name)
		}
		if h.Mutates != (answerChecks[h.Name] != nil) {
			t.Errorf("hook %s: mutates %v, but an answer check %v", h.Name, h.Mutates, answerChecks[h.Name] != nil)
		}
	}
	known, unknown := declaredHooks([]string{"on_final", "later_hook", abi.HookBuildPrompt, abi.HookBuildPrompt})
	if !slices.Equal(known, []string{abi.HookBuildPrompt, abi.HookOnFinal}) || !slices.Equal(unknown, []string{"later_hook"}) {
		t.Errorf("declaredHooks: known %v, unknown %v", known, unknown)
	}
	if len(hookOrder) != len(conformHooks) {
		t.Errorf("hookOrder has %d hooks, conformHooks %d", len(hookOrder), len(conformHooks))
	}
}

func TestReadFixtures(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"build_prompt.json":    `{"task":"t","tools":[],"default_prompt":"p"}`,
		"word_count-long.json": "\n{\"params\":{\"text\":\"a\"}}\n",
		"notes.txt":            "not a fixture",
		"sub.json/inner.json":  `{}`,
		"on_final-x.json.bak":  `{`,
	} {
		path := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadFixtures(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]json.RawMessage{
		"build_prompt":    raws(`{"task":"t","tools":[],"default_prompt":"p"}`),
		"word_count-long": raws(`{"params":{"text":"a"}}`),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fixtures %q, want %q", got, want)
	}
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"task":`), 0o644)
	if _, err := ReadFixtures(dir); err == nil || !strings.Contains(err.Error(), "bad.json is not JSON") {
		t.Fatalf("a bad fixture: %v", err)
	}
	if _, err := ReadFixtures(filepath.Join(dir, "absent")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing directory: %v", err)
	}
}

// SampleParams never panics and never returns a sample beyond its bound,
// whatever the schema.
func FuzzSampleParams(f *testing.F) {
	for _, seed := range []string{
		`{"type":"object","required":["s"],"properties":{"s":{"type":"string","minLength":9e18,"maxLength":1e308}}}`,
		`{"type":"object","required":["a"],"properties":{"a":{"type":"array","minItems":3,"items":{"$ref":"#"}}}}`,
		`{"allOf":[{"$ref":"#/$defs/x"}],"$defs":{"x":{"required":["y"],"minProperties":2}}}`,
		`{"type":["null","object"],"required":["i"],"properties":{"i":{"type":"integer","exclusiveMinimum":1e308}}}`,
		`{"anyOf":[{"const":{"k":[1,2,3]}}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		v, err := SampleParams(schema)
		if err != nil {
			return
		}
		if b, _ := json.Marshal(v); len(b) > 2*maxSampleBytes {
			t.Fatalf("a sample of %d bytes", len(b))
		}
	})
}
