package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
)

// toolPlugin is the smallest ABI v1 module that declares one tool, called
// "lookup", with the given parameter schema: the minimal plugin of
// abi/SPEC.md section 9 with a tools manifest and a morph_call_tool that
// answers nothing. It is assembled here, byte by byte, because its schema
// varies per test.
func toolPlugin(t *testing.T, name, schema string) []byte {
	t.Helper()
	manifest, err := json.Marshal(map[string]any{"name": name, "version": "1", "abi_version": 1,
		"tools": []map[string]any{{"name": "lookup", "description": "looks up", "parameters": json.RawMessage(schema)}}})
	if err != nil {
		t.Fatal(err)
	}
	const at = 16 // where the manifest lies in memory
	heap := (at + len(manifest) + 15) &^ 15
	if heap >= 1<<16 {
		t.Fatal("manifest too large for one page")
	}
	vec := func(items ...[]byte) []byte {
		out := uleb(uint64(len(items)))
		for _, it := range items {
			out = append(out, it...)
		}
		return out
	}
	name_ := func(s string) []byte { return append(uleb(uint64(len(s))), s...) }
	section := func(id byte, body []byte) []byte {
		return append(append([]byte{id}, uleb(uint64(len(body)))...), body...)
	}
	code := func(body ...byte) []byte { return append(uleb(uint64(len(body))), body...) }
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	const i32, i64, end = 0x7f, 0x7e, 0x0b
	mod := []byte("\x00asm\x01\x00\x00\x00")
	mod = append(mod, section(1, vec( // types: () -> (), (i32) -> i32, (i32 i32) -> i64
		[]byte{0x60, 0, 0}, []byte{0x60, 1, i32, 1, i32}, []byte{0x60, 2, i32, i32, 1, i64}))...)
	mod = append(mod, section(3, vec([]byte{0}, []byte{1}, []byte{2}, []byte{2}))...)                // functions
	mod = append(mod, section(5, vec([]byte{0, 1}))...)                                              // one page of memory
	mod = append(mod, section(6, vec(cat([]byte{i32, 1, 0x41}, sleb(int64(heap)), []byte{end})))...) // the bump pointer
	mod = append(mod, section(7, vec(
		cat(name_("memory"), []byte{2, 0}), cat(name_("morph_abi_v1"), []byte{0, 0}), cat(name_("morph_alloc"), []byte{0, 1}),
		cat(name_("morph_describe"), []byte{0, 2}), cat(name_("morph_call_tool"), []byte{0, 3})))...)
	mod = append(mod, section(10, vec(
		code(0, end), // morph_abi_v1
		code(1, 1, i32, 0x23, 0, 0x21, 1, 0x23, 0, 0x20, 0, 0x6a, 0x24, 0, 0x20, 1, end),     // morph_alloc: bump
		code(cat([]byte{0, 0x42}, sleb(int64(at)<<32|int64(len(manifest))), []byte{end})...), // morph_describe
		code(0, 0x42, 0, end), // morph_call_tool: empty
	))...)
	mod = append(mod, section(11, vec(cat([]byte{0, 0x41}, sleb(at), []byte{end}, name_(string(manifest)))))...)
	return mod
}

func uleb(n uint64) []byte {
	var out []byte
	for {
		b := byte(n & 0x7f)
		if n >>= 7; n != 0 {
			out = append(out, b|0x80)
			continue
		}
		return append(out, b)
	}
}

func sleb(n int64) []byte {
	var out []byte
	for {
		b := byte(n & 0x7f)
		n >>= 7
		if (n == 0 && b&0x40 == 0) || (n == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

// openTwoPlugins writes a config of two tool plugins with the given schemas
// and opens it.
func openTwoPlugins(t *testing.T, first, second, extra string) (*config.Runtime, error) {
	t.Helper()
	dir := write(t, map[string]string{"replies.json": replies, "morph.toml": `[llm]
provider = "scripted"
scripted_replies = "replies.json"
[wasm]
cache_dir = "off"
[discovery]
project = false
user = false
` + extra + `
[[plugins]]
name = "first"
path = "first.wasm"

[[plugins]]
name = "second"
path = "second.wasm"
`})
	for file, schema := range map[string]string{"first.wasm": first, "second.wasm": second} {
		if err := os.WriteFile(filepath.Join(dir, file), toolPlugin(t, strings.TrimSuffix(file, ".wasm"), schema), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Open(context.Background(), nil)
}

// A bad tool schema is blamed on its own [[plugins]] entry and line (the
// second's, line 14), naming the plugin and the tool; before the fix it was
// blamed on the first entry, without the plugin.
func TestOpenBlamesTheSchemasPlugin(t *testing.T) {
	ok := `{"type":"object","properties":{"q":{"type":"string"}}}`
	rt, err := openTwoPlugins(t, ok, ok, "")
	if err != nil {
		t.Fatalf("two good plugins: %v", err)
	}
	rt.Close(context.Background())

	_, err = openTwoPlugins(t, ok, `{"type":"object","properties":{"q":{"$ref":"file:///etc/passwd"}}}`, "")
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *config.Error", err)
	}
	if ce.Key != "plugins.1" {
		t.Errorf("Key = %q, want %q", ce.Key, "plugins.1")
	}
	if ce.Line != 14 {
		t.Errorf("Line = %d, want 14", ce.Line)
	}
	if !errors.Is(err, engine.ErrInit) {
		t.Errorf("err = %v, want it to match engine.ErrInit", err)
	}
	if !errors.Is(err, engine.ErrInvalidSchema) {
		t.Errorf("err = %v, want it to match engine.ErrInvalidSchema", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `plugin "second": invalid tool parameter schema of tool "lookup"`) || !strings.Contains(msg, "file:///etc/passwd") {
		t.Fatalf("message %q", msg)
	}
	// The engine's report of the failure comes with it, for a command to show.
	var ie *config.InitError
	if !errors.As(err, &ie) || ie.Status.State != "failed" || len(ie.Status.Failed) != 1 || ie.Status.Failed[0].Name != "second" ||
		ie.Status.Failed[0].LoadTime <= 0 || !strings.Contains(ie.Status.Failed[0].Reasons[0], `tool "lookup"`) {
		t.Fatalf("err %v, want an *InitError with the status naming plugin second", err)
	}
}

// [tools] max_schema_kb reaches the engine: a schema within the default
// limit is refused under a lower one, naming the key.
func TestOpenSchemaLimits(t *testing.T) {
	schema := `{"type":"object","description":"` + strings.Repeat("x", 2000) + `"}`
	if rt, err := openTwoPlugins(t, schema, `{}`, ""); err != nil {
		t.Fatalf("default limits: %v", err)
	} else {
		rt.Close(context.Background())
	}
	_, err := openTwoPlugins(t, schema, `{}`, "[tools]\nmax_schema_kb = 1\n")
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *config.Error", err)
	}
	if ce.Key != "plugins.0" {
		t.Errorf("Key = %q, want %q", ce.Key, "plugins.0")
	}
	if !strings.Contains(err.Error(), "tools.max_schema_kb") {
		t.Errorf("error %q does not name tools.max_schema_kb", err)
	}
}

// bigTool answers 8 KB.
type bigTool struct{}

func (bigTool) Name() string            { return "big" }
func (bigTool) Description() string     { return "answers a lot" }
func (bigTool) ParameterSchema() string { return "" }
func (bigTool) Execute(context.Context, map[string]any) (string, error) {
	return strings.Repeat("x", 8<<10), nil
}

// twoReplies calls the big tool, then answers.
type twoReplies struct{ n int }

func (c *twoReplies) Chat(context.Context, llm.Request) (llm.Result, error) {
	c.n++
	if c.n == 1 {
		return llm.Result{Text: `{"type":"tool_call","tool_call":{"tool_name":"big","tool_params":{}}}`}, nil
	}
	return llm.Result{Text: `{"type":"final","final":{"output":"done"}}`}, nil
}

// agent.max_observation_kb reaches the engine through EngineOptions.
func TestObservationLimitSetting(t *testing.T) {
	dir := write(t, map[string]string{"replies.json": replies,
		"morph.toml": "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[agent]\nmax_observation_kb = 2\n"})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry()
	reg.Register(bigTool{})
	_, rc, err := engine.New(&twoReplies{}, reg, cfg.EngineOptions()...).Run(context.Background(), "t", cfg.RunOptions())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !rc.Steps[0].Truncated {
		t.Errorf("Steps[0].Truncated = false, want true (observation of %d bytes)", len(rc.Steps[0].Observation))
	}
	if n := len(rc.Steps[0].Observation); n > 2<<10+100 {
		t.Errorf("len(Steps[0].Observation) = %d, want at most %d", n, 2<<10+100)
	}
}
