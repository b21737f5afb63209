package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	for _, tt := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string // the start of stdout when the code is 0, else stderr's one line
	}{
		{"version", []string{"--version"}, "", 0, "morph-render dev\n"},
		{"arguments", []string{"x.dot"}, "", exitBadRequest, "morph-render: it takes no arguments (but --version)"},
		{"drawn", nil, `{"dot": "digraph { a -> b }", "statuses": {"a": "success"}, "next": "b", "timeout_ns": 10000000000}`, 0, "<?xml"},
		{"not JSON", nil, `digraph { a }`, exitBadRequest, "morph-render: the request: invalid character 'd'"},
		{"unknown field", nil, `{"dot": "digraph { a }", "engine": "neato"}`, exitBadRequest, `morph-render: the request: json: unknown field "engine"`},
		{"two requests", nil, `{"dot": "digraph { a }"} {}`, exitBadRequest, "morph-render: the request: more than one JSON value"},
		{"too large", nil, `{"dot": "` + strings.Repeat(" ", maxRequestBytes) + `"}`, exitBadRequest, "morph-render: the request is larger than 67108864 bytes"},
		{"render fails", nil, `{"dot": "// nothing\n"}`, exitFailed, "render: the source has no graph"},
		{"error escaped", nil, `{"dot": "digraph { a -> \u001b[31m }"}`, exitFailed, `syntax error in line 1 near '\x1b'`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.code, stderr.String())
			}
			if code == 0 {
				if !strings.HasPrefix(stdout.String(), tt.want) {
					t.Errorf("stdout %.100q, want it to start with %q", stdout.String(), tt.want)
				}
				if stderr.Len() != 0 {
					t.Errorf("stderr %q, want none", stderr.String())
				}
				return
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %.100q, want none", stdout.String())
			}
			if n := strings.Count(stderr.String(), "\n"); n != 1 {
				t.Errorf("stderr %q has %d lines, want one", stderr.String(), n)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tt.want)
			}
		})
	}
}
