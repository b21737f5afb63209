package config

import "testing"

func TestKeyLine(t *testing.T) {
	src := []byte(`# comment
[llm]
provider = "openai"
identity = """
not_a_key = 1
"""
parameters = { "logit.bias" = { x = 1 } }

[ llm . pricing . "gpt-4.1" ]
input = 2
'lit.key' = 3

[agent]
rules = [
  "x = y",
]
tools.builtin = ["calc"]

[[plugins]]
name = "a"
[plugins.config]
k = "v"
[[plugins]]
name = "b"
timeout = "1s"
`)
	tests := []struct {
		key  []string
		want int
	}{
		{[]string{"llm"}, 2},
		{[]string{"llm", "provider"}, 3},
		{[]string{"llm", "identity"}, 4},
		{[]string{"llm", "not_a_key"}, 0},
		{[]string{"llm", "parameters", "logit.bias", "x"}, 7},
		{[]string{"llm", "pricing", "gpt-4.1"}, 9},
		{[]string{"llm", "pricing", "gpt-4.1", "input"}, 10},
		{[]string{"llm", "pricing", "gpt-4.1", "lit.key"}, 11},
		{[]string{"agent", "rules"}, 14},
		{[]string{"agent", "tools", "builtin"}, 17},
		{[]string{"agent", "tools"}, 17},
		{[]string{"plugins"}, 19},
		{[]string{"plugins", "0", "name"}, 20},
		{[]string{"plugins", "0", "config", "k"}, 22},
		{[]string{"plugins", "1"}, 23},
		{[]string{"plugins", "1", "timeout"}, 25},
		{[]string{"plugins", "2", "name"}, 0},
		{[]string{"nope"}, 0},
		{nil, 0},
	}
	for _, tt := range tests {
		if got := keyLine(src, tt.key); got != tt.want {
			t.Errorf("keyLine(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
}
