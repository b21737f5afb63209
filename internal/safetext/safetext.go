// Package safetext makes text that a guest or a model wrote safe to show a
// person: on a terminal, in a log line, in an error message.
//
// Such text can carry escape sequences that recolour, move the cursor or
// rewrite earlier lines of a terminal (C0 and C1 control characters: ESC,
// CSI, OSC), bidirectional overrides that make a line read differently from
// its bytes, line breaks that forge extra lines of a report, and bytes that
// are not UTF-8. Escape writes all of them as visible Go-style escapes and
// leaves everything else as it is, so ordinary text reads unchanged.
package safetext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escape returns s with every control character, bidirectional control and
// invalid UTF-8 byte written as an escape (\x1b, \u202e, \xff), except tab
// and newline, which multi-line text keeps. Use Line for one line.
func Escape(s string) string { return escape(s, false) }

// Line returns s as one line of at most max bytes (max <= 0: no limit):
// escaped as Escape does, newlines and tabs included, and cut on a
// character boundary with a note of how much was left out.
func Line(s string, max int) string {
	s = escape(s, true)
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("... (%d more bytes)", len(s)-cut)
}

// Truncate cuts s to at most max bytes on a character boundary, noting how
// much was left out, and does not escape it (for text that is escaped
// where it is shown, or that goes to a model rather than a person).
func Truncate(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("... (%d more bytes)", len(s)-cut)
}

func escape(s string, oneLine bool) string {
	if clean(s, oneLine) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafe(r, oneLine):
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\u202e', '\n'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// clean reports whether s needs no escape, the common case, without
// allocating.
func clean(s string, oneLine bool) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || unsafe(r, oneLine) {
			return false
		}
		i += size
	}
	return true
}

// unsafe reports whether r must be escaped: C0 controls and DEL (but tab
// and newline in multi-line text), C1 controls, and the characters that
// reorder or hide text (bidirectional embeddings, overrides, isolates and
// marks, the line and paragraph separators).
func unsafe(r rune, oneLine bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return oneLine
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c,
		r == 0x2028, r == 0x2029:
		return true
	}
	return false
}
