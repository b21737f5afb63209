package safetext

import (
	"strings"
	"testing"
)

func TestEscape(t *testing.T) {
	cases := []struct{ in, want, line string }{
		{"plain text, é and 漢字", "plain text, é and 漢字", "plain text, é and 漢字"},
		{"red \x1b[31mALERT\x1b[0m", `red \x1b[31mALERT\x1b[0m`, `red \x1b[31mALERT\x1b[0m`},
		{"csi \u009b2J", `csi \u009b2J`, `csi \u009b2J`},
		{"osc \x1b]0;title\x07", `osc \x1b]0;title\a`, `osc \x1b]0;title\a`},
		{"a\nb\tc\rd", "a\nb\tc\\rd", `a\nb\tc\rd`},
		{"abc\u202edcba", `abc\u202edcba`, `abc\u202edcba`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`, `bad \xff\xfe utf8`},
		{"del\x7f", `del\x7f`, `del\x7f`},
	}
	for _, c := range cases {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := Line(c.in, 0); got != c.line {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
		}
	}
}

func TestLineCuts(t *testing.T) {
	got := Line(strings.Repeat("é", 10), 5) // 20 bytes; byte 5 is inside a character
	if got != "éé... (16 more bytes)" {
		t.Fatalf("Line = %q", got)
	}
	if got := Truncate("\x1b[2J and more", 4); got != "\x1b[2J... (9 more bytes)" {
		t.Fatalf("Truncate = %q", got)
	}
	if got := Truncate("short", 10); got != "short" {
		t.Fatalf("Truncate = %q", got)
	}
}
