package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/guests/go/pdk"
)

// The plugin's session middleware: an audit log, a redaction of tool
// outputs, and a deny-list guard on tool calls.

// Audit log: one line in the host's log per event of a turn.

func auditTurnStart(ev abi.TurnStart) error {
	pdk.Logf(abi.LogInfo, "audit: turn %d start session %s input %q", ev.Turn, ev.SessionID, clip(Redact(ev.Input), 80))
	return nil
}

func auditAction(ev abi.Action) error {
	pdk.Logf(abi.LogInfo, "audit: turn %d action %s step %d params %s", ev.Turn, ev.Tool, ev.Step, keys(ev.Input))
	return nil
}

func auditObservation(ev abi.Observation) error {
	status := "ok"
	if ev.IsError {
		status = "error"
	}
	pdk.Logf(abi.LogInfo, "audit: turn %d observation %s step %d %s, %d bytes", ev.Turn, ev.Tool, ev.Step, status, len(ev.Observation))
	return nil
}

func auditFinal(ev abi.TurnEnd) error {
	line := fmt.Sprintf("audit: turn %d final %s after %d steps, %d tokens", ev.Turn, ev.Status, ev.Step, ev.TurnUsage.Total())
	if ev.Error != "" {
		line += ": " + clip(ev.Error, 200)
	}
	pdk.Log(abi.LogInfo, line)
	return nil
}

// keys lists a tool call's parameter names (not their values, which may be
// large or private), sorted.
func keys(m map[string]any) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return "[" + strings.Join(names, " ") + "]"
}

// clip shortens s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// Redaction: after_tool_call hides e-mail addresses and API-key-like tokens
// in tool outputs, failed ones included, before the model sees them.

// Redacted replaces what Redact hides.
const Redacted = "[redacted]"

// Redact replaces e-mail addresses and strings that look like API keys with
// Redacted. A key is "sk-" (after no letter, digit or underscore) and at
// least 16 more letters, digits, '-' or '_': OpenAI-style sk-... and
// sk-proj-... keys. An address is local@domain where the domain has at least
// two labels and ends in an alphabetic one of two letters or more. A
// hand-written scanner rather than package regexp, which would add half a
// megabyte to the module.
func Redact(s string) string {
	if !strings.Contains(s, "@") && !strings.Contains(s, "sk-") { // the common case
		return s
	}
	var b strings.Builder
	last := 0 // end of the last redaction
	for i := 0; i < len(s); {
		from, to := i, -1
		switch {
		case strings.HasPrefix(s[i:], "sk-") && (i == 0 || !isWordByte(s[i-1])):
			j := i + 3
			for j < len(s) && (isWordByte(s[j]) || s[j] == '-') {
				j++
			}
			if j-(i+3) >= 16 {
				to = j
			}
		case s[i] == '@':
			for from > last && isLocalByte(s[from-1]) {
				from--
			}
			if from < i {
				to = domainEnd(s, i+1)
			}
		}
		if to < 0 {
			i++
			continue
		}
		b.WriteString(s[last:from])
		b.WriteString(Redacted)
		last, i = to, to
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// domainEnd is the end of the longest e-mail domain starting at i, or -1.
func domainEnd(s string, i int) int {
	end := -1
	for labels := 1; ; labels++ {
		j, alpha := i, true
		for j < len(s) && (isWordByte(s[j]) && s[j] != '_' || s[j] == '-') {
			alpha = alpha && (s[j]|0x20 >= 'a' && s[j]|0x20 <= 'z')
			j++
		}
		if j == i {
			return end
		}
		if labels >= 2 && alpha && j-i >= 2 {
			end = j
		}
		if j >= len(s) || s[j] != '.' {
			return end
		}
		i = j + 1
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func isLocalByte(c byte) bool {
	return isWordByte(c) || strings.IndexByte(".%+-", c) >= 0
}

func redactToolOutput(in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
	out := Redact(in.Output)
	if out == in.Output {
		return abi.AfterToolCallOutput{}, nil // unchanged
	}
	pdk.Logf(abi.LogInfo, "redacted the output of %s (turn %d step %d)", in.Tool, in.Turn, in.Step)
	return abi.AfterToolCallOutput{Output: &out}, nil
}

// Guard: before_tool_call denies the tools the config value "deny_tools"
// names (comma-separated), and json_query calls on a document larger than
// the config value "max_json_bytes", when it is set.

// Policy is the guard's configuration.
type Policy struct {
	Deny         map[string]bool // tool names
	MaxJSONBytes int             // 0: no limit
}

// PolicyFrom reads the policy through config (pdk.Config in the plugin). An
// unusable max_json_bytes is logged and ignored.
func PolicyFrom(config func(string) (string, bool)) Policy {
	p := Policy{Deny: map[string]bool{}}
	if v, ok := config("deny_tools"); ok {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				p.Deny[name] = true
			}
		}
	}
	if v, ok := config("max_json_bytes"); ok && strings.TrimSpace(v) != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			p.MaxJSONBytes = n
		} else {
			pdk.Logf(abi.LogWarn, "config max_json_bytes=%q is not a positive integer; no limit", v)
		}
	}
	return p
}

// Check is the policy's answer for one tool call: the zero output lets it
// run unchanged.
func (p Policy) Check(in abi.BeforeToolCallInput) abi.BeforeToolCallOutput {
	if p.Deny[in.Tool] {
		return abi.BeforeToolCallOutput{Deny: true, Reason: fmt.Sprintf("tool %s is denied by policy (go-hooks deny_tools)", in.Tool)}
	}
	if in.Tool == "json_query" && p.MaxJSONBytes > 0 {
		if doc, _ := in.Input["json"].(string); len(doc) > p.MaxJSONBytes {
			return abi.BeforeToolCallOutput{Deny: true, Reason: fmt.Sprintf(
				"json_query document is %d bytes, over the limit of %d (go-hooks max_json_bytes)", len(doc), p.MaxJSONBytes)}
		}
	}
	return abi.BeforeToolCallOutput{}
}

// config is how the guard reads its configuration; tests replace it.
var config = pdk.Config

func guardToolCall(in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
	out := PolicyFrom(config).Check(in)
	if out.Deny {
		pdk.Logf(abi.LogInfo, "denied %s (turn %d step %d): %s", in.Tool, in.Turn, in.Step, out.Reason)
	}
	return out, nil
}

// onDestroy runs when the host closes the plugin, once per idle instance.
func onDestroy() {
	pdk.Logf(abi.LogDebug, "go-hooks: instance closed after %d tool successes", totalSuccesses())
}
