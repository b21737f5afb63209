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
		// Invisible characters that make one name look like another; before
		// the fix they were left as they were.
		{"calc\u200b", `calc\u200b`, `calc\u200b`},
		{"ca\u200dlc\u200c \u2060\u2064 \ufeffbom", `ca\u200dlc\u200c \u2060\u2064 \ufeffbom`, `ca\u200dlc\u200c \u2060\u2064 \ufeffbom`},
		{"tag\U000e0041\U000e007f", `tag\U000e0041\U000e007f`, `tag\U000e0041\U000e007f`},
		{"soft\u00adhyphen", `soft\u00adhyphen`, `soft\u00adhyphen`},
		{"emoji 👨\u200d👩", `emoji 👨\u200d👩`, `emoji 👨\u200d👩`},
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

func TestUnsafe(t *testing.T) {
	for _, r := range []rune{0, 0x1b, 0x7f, 0x85, 0x9b, 0xad, 0x61c, 0x200b, 0x200d, 0x200e, 0x2028, 0x202e, 0x2060, 0x2066, 0xfeff, 0xe0001, 0xe0041} {
		if !Unsafe(r) {
			t.Errorf("Unsafe(%U) = false", r)
		}
	}
	for _, r := range []rune{'\n', '\t', ' ', 'a', 'é', 0xa0, 0x200a, '漢', 0x1f468} {
		if Unsafe(r) {
			t.Errorf("Unsafe(%U) = true", r)
		}
	}
}

func TestLineCuts(t *testing.T) {
	got := Line(strings.Repeat("é", 10), 5) // 20 bytes; byte 5 is inside a character
	if got != "éé... (16 more bytes)" {
		t.Fatalf("Line = %q", got)
	}
	if got := Line("\x1b\x1b\x1b", 8); got != `\x1b\x1b... (4 more bytes)` { // escaped, then cut
		t.Fatalf("Line = %q", got)
	}
	if got := Truncate("\x1b[2J and more", 4); got != "\x1b[2J... (9 more bytes)" {
		t.Fatalf("Truncate = %q", got)
	}
	if got := Truncate("short", 10); got != "short" {
		t.Fatalf("Truncate = %q", got)
	}
	if got := Quote("\x1b[2J\u202e and more", 7); got != `"\x1b[2J\u202e... (9 more bytes)"` { // cut, then quoted
		t.Fatalf("Quote = %s", got)
	}
}
