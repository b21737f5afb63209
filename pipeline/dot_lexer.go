package pipeline

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// dotPlaceholderPrefix opens the placeholder ids the lexer gives gonum.
const dotPlaceholderPrefix = 'i'

// dotToken is an id, quoted string or HTML string: its value, unquoted and
// unescaped, and the line it starts on.
type dotToken struct {
	val  string
	line int
}

// Token kinds the lexer emits.
const (
	tokID = iota
	tokKeyword
	tokPunct
)

// Where the lexer is in the file's one graph.
const (
	lexHeader = iota // before `digraph`
	lexName          // after `digraph`: a name or '{'
	lexBrace         // after the name: '{'
	lexBody          // inside the digraph's braces
	lexDone          // after its closing brace
)

// dotLexer tokenises DOT source, checks its structure and limits, and
// writes the token stream gonum parses (see ParseDOTWith).
type dotLexer struct {
	src  []byte
	s    string // src as a string: bare words and plain strings are slices of it, not copies
	pos  int
	line int
	file string
	lim  ParseLimits

	out     []byte     // the rewritten source
	outLine int        // the line out is on
	ids     []dotToken // the values the placeholders stand for
	ntok    int
	prevEq  bool   // the previous token was '='
	lastStr int    // the index in ids of the previous token if a quoted string, else -1
	join    []byte // the string being joined by '+', nil when none

	state   int
	opens   []int // the lines of the open braces
	bracket int   // the line of the open '[', 0 when none
	arrows  int
	endLine int // the line of the digraph's closing brace
}

func (lx *dotLexer) errf(line int, format string, args ...any) *ParseError {
	return &ParseError{File: lx.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

func (lx *dotLexer) run() error {
	for {
		if err := lx.skipSpace(); err != nil {
			return err
		}
		if lx.pos >= len(lx.src) {
			return lx.eof()
		}
		line := lx.line
		c := lx.src[lx.pos]
		next := byte(0)
		if lx.pos+1 < len(lx.src) {
			next = lx.src[lx.pos+1]
		}
		var err error
		switch {
		case c == '"':
			var v string
			if v, err = lx.quoted(); err == nil {
				err = lx.emitID(v, line, true)
			}
		case c == '<':
			var v string
			if v, err = lx.html(); err == nil {
				err = lx.emitID(v, line, false)
			}
		case c == '+':
			err = lx.concat()
		case isDotWordByte(c) || c == '-' && (next == '.' || '0' <= next && next <= '9'):
			err = lx.word()
		case c == '-' && next == '>':
			lx.pos += 2
			err = lx.emit(tokPunct, "->", line)
		case c == '-' && next == '-':
			lx.pos += 2
			err = lx.emit(tokPunct, "--", line)
		case strings.IndexByte("{}[]=;,:", c) >= 0:
			lx.pos++
			err = lx.emit(tokPunct, string(c), line)
		default:
			r, _ := utf8.DecodeRune(lx.src[lx.pos:])
			err = lx.errf(line, "unexpected %q: quote values that contain it, e.g. key=\"...\"", r)
		}
		if err != nil {
			return err
		}
	}
}

// skipSpace skips whitespace and comments, counting lines.
func (lx *dotLexer) skipSpace() error {
	for lx.pos < len(lx.src) {
		switch c := lx.src[lx.pos]; {
		case c == '\n':
			lx.line++
			lx.pos++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			lx.pos++
		case c == '#' && lx.atLineStart():
			lx.skipLine()
		case c == '/' && lx.peek(1) == '/':
			lx.skipLine()
		case c == '/' && lx.peek(1) == '*':
			start := lx.line
			end := bytes.Index(lx.src[lx.pos+2:], []byte("*/"))
			if end < 0 {
				return lx.errf(start, "unterminated /* comment: close it with */")
			}
			end += lx.pos + 4
			lx.line += bytes.Count(lx.src[lx.pos:end], []byte("\n"))
			lx.pos = end
		default:
			return nil
		}
	}
	return nil
}

func (lx *dotLexer) peek(n int) byte {
	if lx.pos+n < len(lx.src) {
		return lx.src[lx.pos+n]
	}
	return 0
}

// atLineStart tells whether only blanks precede pos on its line: DOT (like
// cpp) discards lines beginning with '#'; a '#' elsewhere is an error, which
// catches an unquoted color=#ff0000.
func (lx *dotLexer) atLineStart() bool {
	for i := lx.pos - 1; i >= 0; i-- {
		switch lx.src[i] {
		case '\n':
			return true
		case ' ', '\t', '\r', '\f', '\v':
		default:
			return false
		}
	}
	return true
}

func (lx *dotLexer) skipLine() {
	if i := bytes.IndexByte(lx.src[lx.pos:], '\n'); i >= 0 {
		lx.pos += i
	} else {
		lx.pos = len(lx.src)
	}
}

// isDotWordByte tells whether c may be in a bare word: ASCII letters and
// digits, '_', '.' (dotted keys, numbers) and any byte of a multi-byte UTF-8
// character, as in DOT ids.
func isDotWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '.' || c >= 0x80
}

// dotKeyword returns the DOT keyword w is, in lower case (DOT reads
// keywords in any case), or "".
func dotKeyword(w string) string {
	if len(w) < 4 || len(w) > 8 {
		return ""
	}
	for _, k := range [...]string{"node", "edge", "graph", "digraph", "subgraph", "strict"} {
		if strings.EqualFold(w, k) {
			return k
		}
	}
	return ""
}

// word reads a bare word: an id, a number, a dotted key, a duration, or a
// keyword. A '-' inside a word joins it (claude-sonnet-4); one before a digit
// or '.' starts a negative number; "a->b" and "a--b" still split.
func (lx *dotLexer) word() error {
	line, start := lx.line, lx.pos
	lx.pos++
	for lx.pos < len(lx.src) {
		c := lx.src[lx.pos]
		if isDotWordByte(c) || c == '-' && isDotWordByte(lx.peek(1)) {
			lx.pos++
			continue
		}
		break
	}
	w := lx.s[start:lx.pos]
	if kw := dotKeyword(w); kw != "" && !lx.prevEq {
		return lx.emit(tokKeyword, kw, line)
	}
	return lx.emitID(w, line, false)
}

// quoted reads a double-quoted string and returns its value: \" \\ \n \t
// unescaped, backslash-newline dropped (DOT's line continuation), any other
// backslash kept as written (Graphviz's \l, \N...).
func (lx *dotLexer) quoted() (string, error) {
	line := lx.line
	i := lx.pos + 1
	var b []byte // nil until an escape makes the value differ from the source
	from := i
	for ; i < len(lx.src); i++ {
		if len(b)+i-from > lx.lim.MaxAttrBytes {
			return "", lx.errf(line, "string longer than %d bytes (ParseLimits.MaxAttrBytes) starts here: shorten it, or close its '\"' if that is missing", lx.lim.MaxAttrBytes)
		}
		switch lx.src[i] {
		case '"':
			var v string
			if b == nil {
				v = lx.s[from:i]
			} else {
				v = string(append(b, lx.src[from:i]...))
			}
			lx.line += bytes.Count(lx.src[lx.pos:i], []byte("\n"))
			lx.pos = i + 1
			return v, nil
		case '\\':
			if i+1 >= len(lx.src) {
				continue
			}
			esc := lx.src[i+1]
			var repl string
			skip := 2
			switch {
			case esc == '"' || esc == '\\':
				repl = string(esc)
			case esc == 'n':
				repl = "\n"
			case esc == 't':
				repl = "\t"
			case esc == '\n':
			case esc == '\r' && i+2 < len(lx.src) && lx.src[i+2] == '\n':
				skip = 3
			default:
				i++ // keep the backslash and the character as written
				continue
			}
			b = append(append(b, lx.src[from:i]...), repl...)
			i += skip - 1
			from = i + 1
		}
	}
	return "", lx.errf(line, "unterminated string: the '\"' opened here is never closed")
}

// html reads an HTML string, <...> with balanced angle brackets, and returns
// its inner text as written.
func (lx *dotLexer) html() (string, error) {
	line := lx.line
	depth := 0
	for i := lx.pos; i < len(lx.src); i++ {
		switch lx.src[i] {
		case '<':
			depth++
		case '>':
			depth--
			if depth == 0 {
				v := lx.s[lx.pos+1 : i]
				lx.line += bytes.Count(lx.src[lx.pos:i], []byte("\n"))
				lx.pos = i + 1
				return v, nil
			}
		}
	}
	return "", lx.errf(line, "unterminated HTML string: the '<' opened here is never closed by a matching '>'")
}

// concat joins "a" + "b" into one string, as DOT does.
func (lx *dotLexer) concat() error {
	line := lx.line
	lx.pos++
	if err := lx.skipSpace(); err != nil {
		return err
	}
	if lx.lastStr < 0 || lx.pos >= len(lx.src) || lx.src[lx.pos] != '"' {
		return lx.errf(line, "'+' joins two quoted strings, as in \"a\" + \"b\"; quote values that contain '+'")
	}
	v, err := lx.quoted()
	if err != nil {
		return err
	}
	t := lx.ids[lx.lastStr]
	if lx.join == nil {
		lx.join = []byte(t.val)
	}
	if len(lx.join)+len(v) > lx.lim.MaxAttrBytes {
		return lx.tooLong(t.line)
	}
	lx.join = append(lx.join, v...) // flushJoin stores it: += here would be quadratic
	return nil
}

// flushJoin stores the string "a" + "b" + ... joined into.
func (lx *dotLexer) flushJoin() {
	if lx.join != nil {
		lx.ids[lx.lastStr].val = string(lx.join)
		lx.join = nil
	}
}

func (lx *dotLexer) tooLong(line int) *ParseError {
	return lx.errf(line, "value longer than %d bytes (ParseLimits.MaxAttrBytes)", lx.lim.MaxAttrBytes)
}

// emitID records an id's value and emits its placeholder.
func (lx *dotLexer) emitID(v string, line int, quoted bool) error {
	if len(v) > lx.lim.MaxAttrBytes {
		return lx.tooLong(line)
	}
	idx := len(lx.ids)
	lx.ids = append(lx.ids, dotToken{val: v, line: line})
	if err := lx.emit(tokID, "", line); err != nil {
		return err
	}
	if quoted {
		lx.lastStr = idx
	}
	return nil
}
