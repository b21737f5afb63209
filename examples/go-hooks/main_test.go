package main

import (
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

func TestWordCount(t *testing.T) {
	cases := map[string]Counts{
		"":                      {},
		"one":                   {Words: 1, Lines: 1, Chars: 3},
		"the quick brown fox":   {Words: 4, Lines: 1, Chars: 19},
		"a b\nc\n":              {Words: 3, Lines: 2, Chars: 6},
		"  héllo   wörld  \n\n": {Words: 2, Lines: 2, Chars: 19},
		"line one\nline two\nx": {Words: 5, Lines: 3, Chars: 19},
	}
	for text, want := range cases {
		if got := WordCount(text); got != want {
			t.Errorf("WordCount(%q) = %+v, want %+v", text, got, want)
		}
	}
	out, err := wordCountTool(map[string]any{"text": "a b"})
	if err != nil || out != `{"words":2,"lines":1,"chars":3}` {
		t.Fatalf("tool = %q, %v", out, err)
	}
}

func TestJSONQuery(t *testing.T) {
	doc := `{"items":[{"name":"a<b","n":12345678901234567890},{"name":"z"}],"x.y":{"]":true},"s":"str"}`
	ok := map[string]string{
		"":                 `{"items":[{"n":12345678901234567890,"name":"a<b"},{"name":"z"}],"s":"str","x.y":{"]":true}}`,
		"$":                `{"items":[{"n":12345678901234567890,"name":"a<b"},{"name":"z"}],"s":"str","x.y":{"]":true}}`,
		"items[0].name":    `"a<b"`,
		"$.items[0].n":     `12345678901234567890`,
		"items[-1]":        `{"name":"z"}`,
		`["x.y"]["]"]`:     `true`,
		`$["x.y"]`:         `{"]":true}`,
		" items[ 1 ].name": `"z"`,
	}
	for path, want := range ok {
		if got, err := JSONQuery(doc, path); err != nil || got != want {
			t.Errorf("JSONQuery(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	bad := map[string]string{
		"items[2]":   "at $.items: index 2 out of range (length 2)",
		"nope":       `at $: no key "nope" (keys: "items", "s", "x.y")`,
		"items.name": `at $.items: an array has indexes, not key "name"`,
		"s[0]":       "at $.s: a string has no [0]",
		"[0]":        "at $: an object has keys, not index [0]",
		"items[":     "unclosed [",
		"items[x]":   "[x] is neither an index nor a quoted key",
		"a..b":       "empty key",
		`["a"x]`:     "expected ] after the quoted key",
		"items[0]]":  `unexpected ']'`,
	}
	for path, want := range bad {
		if got, err := JSONQuery(doc, path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("JSONQuery(%q) = %q, %v; want an error containing %q", path, got, err, want)
		}
	}
	for _, d := range []string{`{"a":`, `{} {}`, ``} {
		if _, err := JSONQuery(d, ""); err == nil || !strings.HasPrefix(err.Error(), "invalid JSON document") {
			t.Errorf("JSONQuery(%q) error = %v", d, err)
		}
	}
}

func TestHooksNatively(t *testing.T) {
	// Outside WebAssembly pdk.Config finds nothing: the defaults apply.
	out, err := buildPrompt(abi.PromptInput{DefaultPrompt: "D"})
	if err != nil || out.SystemPrompt != "D\n"+PromptSection+"\n- "+DefaultStyle+"\n" {
		t.Fatalf("buildPrompt = %q, %v", out.SystemPrompt, err)
	}
	params, err := buildParams(abi.ParamsInput{})
	if err != nil {
		t.Fatalf("buildParams: %v", err)
	}
	if got := params.Parameters["temperature"]; got != 0.2 {
		t.Errorf("buildParams: temperature = %v, want 0.2", got)
	}
	if got := params.Parameters["max_tokens"]; got != 512 {
		t.Errorf("buildParams: max_tokens = %v (%T), want 512", got, got)
	}
	successes = map[string]int{}
	_ = onToolSuccess(abi.ToolSuccessInput{Tool: "word_count"})
	_ = onToolSuccess(abi.ToolSuccessInput{Tool: "word_count"})
	_ = onToolSuccess(abi.ToolSuccessInput{Tool: "json_query"})
	final, err := fallbackFinal(abi.FallbackInput{Reason: "why", Steps: 7})
	if err != nil {
		t.Fatalf("fallbackFinal: %v", err)
	}
	o, ok := final.Output.(map[string]any)
	if !ok {
		t.Fatalf("fallbackFinal: Output = %#v, want a map", final.Output)
	}
	for k, want := range map[string]any{"status": "incomplete", "reason": "why", "steps": 7, "tool_successes": 3} {
		if o[k] != want {
			t.Errorf("fallbackFinal: Output[%s] = %#v, want %#v", k, o[k], want)
		}
	}
}
