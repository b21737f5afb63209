package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

// The strings of guests/testdata/hostile_text.wat and hostile_run.wat.
const (
	hostileName    = "evil\x1b[31mRED\u009b2J\u202eeman\nFORGED name line"
	hostileVersion = "1\x1b]0;pwned\x07\u009b\u2066\nFORGED version line"
	hostileTool    = "look\x1b[1mup\u009b\u202e\nFORGED tool line"
)

// assertSafe fails when out holds a character a terminal acts on or that
// reorders text (C0 but newline and tab, DEL, C1, bidirectional controls,
// line separators, bytes that are not UTF-8), or a line a guest forged.
func assertSafe(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		if r == '\n' || r == '\t' {
			continue
		}
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0xfffd || r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Cf, r) {
			t.Errorf("%s: raw %U at byte %d: %q", what, r, i, out[max(0, i-40):min(len(out), i+40)])
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "FORGED") || strings.HasPrefix(l, "hooks: FORGED") {
			t.Errorf("%s: a forged line: %q", what, line)
		}
	}
}

// assertHas fails when out lacks one of wants.
func assertHas(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// What a plugin writes in its manifest, errors and log reaches the terminal
// escaped, each field on its own line, in every command that prints it.
func TestHostilePluginOutput(t *testing.T) {
	text, runWasm := fixture(t, "hostile_text"), fixture(t, "hostile_run")
	shownName := `evil\x1b[31mRED\u009b2J\u202eeman\nFORGED name line`
	shownVersion := `1\x1b]0;pwned\a\u009b\u2066\nFORGED version line`
	shownError := `store \x1b[31mdown\u009b2J\u202e FORGED error line`

	// Its tool named with control characters is one run refuses, so inspect
	// and check report it (engine.CheckToolSpec), escaped, and exit 1.
	shownTool := `look\x1b[1mup\u009b\u202e\nFORGED tool line`
	code, stdout, stderr := morph(t, "", "plugin", "inspect", "--cache-dir", "off", text)
	if code != 1 {
		t.Fatalf("inspect: exit %d, want 1 (a tool run refuses)\n%s", code, stderr)
	}
	assertHas(t, "inspect", stdout, `problem:  invalid tool: tool name "`+shownTool+`": want 1 to 128`)
	assertSafe(t, "inspect", stdout+stderr)
	assertHas(t, "inspect", stdout, "plugin:   "+shownName+" "+shownVersion+", ABI v1\n",
		`  look\x1b[1mup\u009b\u202e\nFORGED tool line: Looks up.\u202e hooks: FORGED description line\x1b[2J`+"\n",
		`"description":"\u009b2J\u2066 "`, `  morph_extra\x1b[2J\u009b\u202e\nFORGED export line () -> ()`+"\n",
		`capabilities: log, net\x1b[2J\u009b\nFORGED capability line (requested;`)

	code, stdout, stderr = morph(t, "", "plugin", "check", "--cache-dir", "off", text)
	if code != 1 {
		t.Errorf("plugin check exited %d, want 1", code)
	}
	assertSafe(t, "check", stdout+stderr)
	assertHas(t, "check", stderr, `invalid tool: tool name "`+shownTool+`": want 1 to 128`)

	code, stdout, stderr = morph(t, "", "plugin", "test", "-v", "--cache-dir", "off", text)
	if code != 1 {
		t.Fatalf("test: exit %d\n%s%s", code, stdout, stderr)
	}
	assertSafe(t, "test", stdout+stderr)
	assertHas(t, "test", stdout, "plugin "+shownName+" "+shownVersion+" (",
		`on_final\x1b[2J\nFORGED hook line  `, "  build_prompt (hook, sample): plugin \""+shownName+"\" export morph_build_prompt: plugin reported an error: "+shownError+"\n",
		`  fetch (tool, sample): the tool rejected the sample params {"q\u009b\u202e":"\u009b\u202e \u001b[2J"}: `+shownError+"\n",
		"FAIL: "+shownName+" does not conform")
	// The host escapes what a guest logs, and slog's text handler quotes that.
	assertHas(t, "test -v", stderr, `msg="store \\x1b[31mdown\\u009b2J\\u202e\nFORGED error line"`)

	// JSON: the same values, every character safe.
	for _, args := range [][]string{{"inspect"}, {"test"}} {
		_, stdout, _ = morph(t, "", append(append([]string{"plugin"}, args...), "--json", "--cache-dir", "off", text)...)
		assertSafe(t, args[0]+" --json", stdout)
		var rep struct {
			Manifest struct {
				Name, Version string
				Tools         []struct{ Name, Description string }
			}
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("%s --json: %v\n%s", args[0], err, stdout)
		}
		m := rep.Manifest
		if m.Name != hostileName {
			t.Errorf("%s --json: name %+q, want %+q", args[0], m.Name, hostileName)
		}
		if m.Version != hostileVersion {
			t.Errorf("%s --json: version %+q, want %+q", args[0], m.Version, hostileVersion)
		}
		if len(m.Tools) != 2 {
			t.Errorf("%s --json: %d tools %+q, want 2", args[0], len(m.Tools), m.Tools)
		} else if m.Tools[0].Name != hostileTool {
			t.Errorf("%s --json: the first tool's name %+q, want %+q", args[0], m.Tools[0].Name, hostileTool)
		}
	}

	// A run, its plugin status, and the error of a plugin the engine refuses.
	dir := t.TempDir()
	replies := `{"model":"scripted-test","replies":[` +
		`{"reply":{"type":"tool_call","tool_call":{"thought":"t","tool_name":"\u001b[31mx` + "\u009b\u202e" + `\nFORGED step line","tool_params":{}}}},` +
		`{"reply":{"type":"final","final":{"thought":"` + "\u2066" + `ok\u001b[2J","output":"done ` + "\u009b2J \u202e \u0085 \u2028" + `"}}}]}`
	if err := os.WriteFile(filepath.Join(dir, "replies.json"), []byte(replies), 0o644); err != nil {
		t.Fatal(err)
	}
	config := func(wasm string) string {
		path := filepath.Join(dir, filepath.Base(wasm)+".toml")
		cfg := "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[wasm]\ncache_dir = \"off\"\n" +
			"[discovery]\nproject = false\nuser = false\n\n[[plugins]]\nname = \"hostile\"\npath = \"" + wasm + "\"\n"
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	code, stdout, stderr = morph(t, "", "run", "--config", config(runWasm), "task")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	assertSafe(t, "run", stdout+stderr)
	assertHas(t, "run", stderr, `morph: 1 plugin (hostile 1\x1b]0;pwned\a\u009b\u2066 FORGED version line), 2 tools, hooks: build_prompt`+"\n",
		"warning: build_prompt hook failed; using the default system prompt: plugin \"hostile\" export morph_build_prompt: plugin reported an error: "+shownError+"\n",
		`step 1  tool \x1b[31mx\u009b\u202e\nFORGED step line  tokens `)
	var res struct {
		Output, Thought string
		Final           struct{ Output, Thought string }
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("run: %v\n%s", err, stdout)
	}
	wantOut, wantThought := "done \u009b2J \u202e \u0085 \u2028", "\u2066ok\x1b[2J"
	for _, c := range []struct{ field, got, want string }{
		{"output", res.Output, wantOut},
		{"thought", res.Thought, wantThought},
		{"final.output", res.Final.Output, wantOut},
		{"final.thought", res.Final.Thought, wantThought},
	} {
		if c.got != c.want {
			t.Errorf("run's %s decodes to %+q, want %+q", c.field, c.got, c.want)
		}
	}

	code, stdout, stderr = morph(t, "", "plugin", "status", "--config", config(runWasm))
	if code != 0 {
		t.Errorf("plugin status exited %d", code)
	}
	assertSafe(t, "status", stdout+stderr)
	assertHas(t, "status", stdout, "plugin hostile "+shownVersion+" (", `  tools: fetch, lookup_2J_RLO`+"\n",
		`net\x1b[2J\u009b FORGED capability line (requested, NOT granted)`)
	_, stdout, _ = morph(t, "", "plugin", "status", "--json", "--config", config(runWasm))
	assertSafe(t, "status --json", stdout)

	code, stdout, stderr = morph(t, "", "run", "--config", config(text), "task")
	if code != 2 || stdout != "" {
		t.Fatalf("run with a refused plugin: exit %d\n%s%s", code, stdout, stderr)
	}
	assertSafe(t, "refused plugin", stderr)
	assertHas(t, "refused plugin", stderr, `invalid tool: tool name "look\x1b[1mup\u009b\u202e\nFORGED tool line"`)
}

func TestWriteJSON(t *testing.T) {
	type doc struct {
		S   string          `json:"s"`
		Raw json.RawMessage `json:"raw"`
		M   map[string]any  `json:"m"`
	}
	in := doc{
		S:   "esc \x1b[2J csi \u009b2J del \x7f rlo \u202e lri \u2066 ls \u2028 nel \u0085 zwsp \u200b tag \U000e0041 <&> é 漢",
		Raw: json.RawMessage("{\"k\u009b\":\"raw \u202e \xff\"}"),
		M:   map[string]any{"x\u200f": []any{"\u061c", 1.5}},
	}
	var b strings.Builder
	if err := writeJSON(&b, in); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	assertSafe(t, "writeJSON", out)
	assertHas(t, "writeJSON", out, `\u009b2J`, `\u007f`, `\u202e`, `\u200b`, `\udb40\udc41`, `<&> é 漢"`, `\ufffd`, "{\n  \"s\"")
	var got doc
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	var raw, wantRaw any
	json.Unmarshal(got.Raw, &raw)
	json.Unmarshal(in.Raw, &wantRaw) // a byte that is not UTF-8 decodes as U+FFFD either way
	if got.S != in.S {
		t.Errorf("s decodes to %+q, want %+q", got.S, in.S)
	}
	if !reflect.DeepEqual(got.M, in.M) {
		t.Errorf("m decodes to %+q, want %+q", got.M, in.M)
	}
	if !reflect.DeepEqual(raw, wantRaw) {
		t.Errorf("raw decodes to %+q, want %+q", raw, wantRaw)
	}
}

// Lines follow errors.Join, never newlines inside one error's text.
func TestErrorLines(t *testing.T) {
	joined := errors.Join(errors.New("a.toml:1: agent.x: unknown key"), errors.New("a.toml:2: plugin \"p\": \x1b[2Jbad\nmorph: FORGED"))
	cases := []struct {
		err  error
		want []string
	}{
		{&exitError{exitUsage, joined}, []string{"a.toml:1: agent.x: unknown key", `a.toml:2: plugin "p": \x1b[2Jbad morph: FORGED`}},
		{fmt.Errorf("run failed: %w", joined), []string{`run failed: a.toml:1: agent.x: unknown key a.toml:2: plugin "p": \x1b[2Jbad morph: FORGED`}},
		{joinLines("x.wasm does not conform to ABI v1:", "no marker", "bad\u202e"), []string{"x.wasm does not conform to ABI v1:", "no marker", `bad\u202e`}},
	}
	for _, c := range cases {
		if got := errorLines(c.err); !reflect.DeepEqual(got, c.want) {
			t.Errorf("errorLines(%q) = %q, want %q", c.err, got, c.want)
		}
	}
	// A megabyte of a plugin's text makes lines of at most maxErrorLine
	// bytes (and a note); before the fix, of 4 MiB.
	flood := errors.New(strings.Repeat("\x1b", 1<<20))
	for _, err := range []error{flood, errors.Join(flood, flood)} {
		for _, line := range errorLines(err) {
			if len(line) > maxErrorLine+50 {
				t.Errorf("a line of %d bytes", len(line))
			}
		}
	}
}
