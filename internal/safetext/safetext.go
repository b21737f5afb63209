// Package safetext makes text that a guest or a model wrote safe to show a
// person: on a terminal, in a log line, in an error message.
//
// Such text can carry escape sequences that recolour, move the cursor or
// rewrite earlier lines of a terminal (C0 and C1 control characters: ESC,
// CSI, OSC), bidirectional overrides that make a line read differently from
// its bytes, invisible characters that make one name look like another
// (zero-width spaces and joiners, tag characters), line breaks that forge
// extra lines of a report, and bytes that are not UTF-8. Escape writes all
// of them as visible Go-style escapes and leaves everything else as it is,
// so ordinary text reads unchanged.
package safetext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with every character Unsafe reports and every invalid
// UTF-8 byte written as an escape (\x1b, \u202e, \U000e0041, \xff); tab
// and newline, which multi-line text keeps, are left. Use Line for one
// line.
func Escape(s string) string { return escape(s, false) }

// Line returns s as one line: escaped as Escape does, newlines and tabs
// included, then cut as Truncate does (max <= 0: not cut).
func Line(s string, max int) string { return Truncate(escape(s, true), max) }

// Quote returns s cut as Truncate does, then quoted as %q does (every
// non-printing character and invalid byte escaped): a name or URL a guest wrote, for an
// error message.
func Quote(s string, max int) string { return strconv.Quote(Truncate(s, max)) }

// Truncate cuts s to max bytes on a character boundary, and adds a note of
// how much was left out ("... (N more bytes)"), so the result can exceed
// max by the note's length; s of at most max bytes (or max <= 0) is
// returned as it is. It does not escape s (for text that is escaped where
// it is shown, or that goes to a model rather than a person).
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

// unsafe reports whether r must be escaped: what Unsafe reports, and in
// one line also tab and newline.
func unsafe(r rune, oneLine bool) bool {
	if r == '\n' || r == '\t' {
		return oneLine
	}
	return Unsafe(r)
}

// Unsafe reports whether r must not reach a person raw: the C0 controls
// and DEL (but tab and newline, which Line escapes and Escape keeps), the
// C1 controls, the line and paragraph separators, and the format
// characters (Unicode's Cf), which reorder or hide text: bidirectional
// embeddings, overrides, isolates and marks, zero-width spaces, joiners
// and non-joiners, the word joiner, the byte order mark, the soft hyphen,
// tag characters. (A zero-width joiner inside an emoji is escaped too: in
// names and errors, a fair price.)
func Unsafe(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f), r == 0x2028, r == 0x2029:
		return true
	case r < 0xad: // the first format character: most text is quick
		return false
	}
	return unicode.Is(unicode.Cf, r)
}
