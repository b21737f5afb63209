package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

func TestRedact(t *testing.T) {
	cases := map[string]string{
		"mail me at a.b@example.com, key sk-abcdefghijklmnop1234":      "mail me at [redacted], key [redacted]",
		"x+tag@mail.example.co.uk wrote":                               "[redacted] wrote",
		`{"owner":"ops@corp.io","token":"sk-proj-AbC_123-xyz7890qwe"}`: `{"owner":"[redacted]","token":"[redacted]"}`,
		"no secrets here":            "no secrets here",
		"sk-short stays":             "sk-short stays", // too short to be a key
		"task-abcdefghijklmnopq":     "task-abcdefghijklmnopq",
		"user@localhost":             "user@localhost", // no dot-TLD: not an address
		"":                           "",
		"ping @handle now":           "ping @handle now",
		"a@b.c":                      "a@b.c", // one-letter TLD
		"a@x.io,b@y.io":              "[redacted],[redacted]",
		"xsk-abcdefghijklmnop1234":   "xsk-abcdefghijklmnop1234",
		"(sk-abcdefghijklmnop1234)":  "([redacted])",
		"héllo jörg@exämple.de ok":   "héllo jörg@exämple.de ok", // ASCII addresses only
		"bob@example.com.":           "[redacted].",
		"bob@host-1.example.museum!": "[redacted]!",
	}
	for in, want := range cases {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactToolOutput(t *testing.T) {
	out, err := redactToolOutput(abi.AfterToolCallInput{Tool: "t", Output: `"clean"`})
	if err != nil || out.Output != nil {
		t.Fatalf("clean output = %+v, %v; want unchanged (nil)", out, err)
	}
	out, err = redactToolOutput(abi.AfterToolCallInput{Tool: "t", Output: "error: sk-0123456789abcdefXYZ rejected", IsError: true})
	if err != nil {
		t.Fatalf("redactToolOutput: %v", err)
	}
	if out.Output == nil {
		t.Fatal("redacted output = nil, want the output with the key redacted")
	}
	if want := "error: [redacted] rejected"; *out.Output != want {
		t.Errorf("redacted output = %q, want %q", *out.Output, want)
	}
}

func TestPolicy(t *testing.T) {
	lookup := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	p := PolicyFrom(lookup(map[string]string{"deny_tools": " word_count, ,shell ", "max_json_bytes": "10"}))
	if !reflect.DeepEqual(p, Policy{Deny: map[string]bool{"word_count": true, "shell": true}, MaxJSONBytes: 10}) {
		t.Fatalf("policy %+v", p)
	}
	call := func(tool string, input map[string]any) abi.BeforeToolCallInput {
		return abi.BeforeToolCallInput{Turn: 1, Step: 2, Tool: tool, Input: input}
	}
	if out := p.Check(call("word_count", map[string]any{"text": "a"})); !out.Deny ||
		out.Reason != "tool word_count is denied by policy (go-hooks deny_tools)" || out.Input != nil {
		t.Fatalf("denied tool: %+v", out)
	}
	if out := p.Check(call("json_query", map[string]any{"json": `{"a":[1,2,3]}`, "path": "a"})); !out.Deny ||
		out.Reason != "json_query document is 13 bytes, over the limit of 10 (go-hooks max_json_bytes)" {
		t.Fatalf("large document: %+v", out)
	}
	for _, in := range []abi.BeforeToolCallInput{
		call("json_query", map[string]any{"json": `{"a":1}`, "path": "a"}),
		call("calc", map[string]any{"expr": "1+1"}),
		call("json_query", nil),
	} {
		if out := p.Check(in); !reflect.DeepEqual(out, abi.BeforeToolCallOutput{}) {
			t.Fatalf("%+v: %+v, want the zero output", in, out)
		}
	}
	// Nothing configured, or an unusable limit: everything passes.
	for _, cfg := range []map[string]string{nil, {"max_json_bytes": "big"}, {"deny_tools": ""}} {
		p := PolicyFrom(lookup(cfg))
		if out := p.Check(call("json_query", map[string]any{"json": strings.Repeat(" ", 1<<20) + "1"})); out.Deny || p.MaxJSONBytes != 0 {
			t.Fatalf("config %v: %+v", cfg, out)
		}
	}
}

func TestGuardReadsConfig(t *testing.T) {
	old := config
	t.Cleanup(func() { config = old })
	config = func(k string) (string, bool) {
		if k == "deny_tools" {
			return "json_query", true
		}
		return "", false
	}
	out, err := guardToolCall(abi.BeforeToolCallInput{Tool: "json_query"})
	if err != nil {
		t.Fatalf("guardToolCall(json_query): %v", err)
	}
	if !out.Deny {
		t.Errorf("guardToolCall(json_query): Deny = false, want true")
	}
	if !strings.Contains(out.Reason, "tool json_query is denied") {
		t.Errorf("guardToolCall(json_query): Reason = %q, want it to say %q", out.Reason, "tool json_query is denied")
	}
	out, err = guardToolCall(abi.BeforeToolCallInput{Tool: "word_count"})
	if err != nil || out.Deny {
		t.Fatalf("guard = %+v, %v", out, err)
	}
}

func TestAuditHelpers(t *testing.T) {
	if got := keys(map[string]any{"path": 1, "json": 2}); got != "[json path]" {
		t.Fatalf("keys = %q", got)
	}
	if got := keys(nil); got != "[]" {
		t.Fatalf("keys(nil) = %q", got)
	}
	if got := clip("héllo", 2); got != "h..." {
		t.Fatalf("clip = %q", got)
	}
	if got := clip("short", 80); got != "short" {
		t.Fatalf("clip = %q", got)
	}
	// The audit hooks never fail.
	for _, err := range []error{
		auditTurnStart(abi.TurnStart{Turn: 1, Input: "write to a@b.io"}),
		auditAction(abi.Action{Turn: 1, Tool: "word_count", Input: map[string]any{"text": "x"}}),
		auditObservation(abi.Observation{Turn: 1, Tool: "word_count", Observation: "1", IsError: true}),
		auditFinal(abi.TurnEnd{Turn: 1, Status: abi.StatusError, Error: "boom"}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}
