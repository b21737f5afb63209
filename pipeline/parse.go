package pipeline

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"gonum.org/v1/gonum/graph/formats/dot"
	"gonum.org/v1/gonum/graph/formats/dot/ast"
)

// ParseLimits bounds what the parser accepts, so that a hostile or broken
// DOT file fails fast with a ParseError instead of exhausting memory, time
// or the stack. A zero (or negative) field takes its default.
type ParseLimits struct {
	// MaxBytes is the largest source accepted (default 4 MiB; real pipelines
	// are a few KiB). It is checked before anything else. It also bounds the
	// text the parser itself writes when it appends subgraph classes to class
	// lists, so a huge class default copied onto every node cannot multiply.
	MaxBytes int
	// MaxDepth is the deepest nesting of braces, the digraph's own included
	// (default 64). It is checked before the source reaches the grammar, so
	// 100,000 nested subgraphs cost one scan, not 100,000 stack frames.
	MaxDepth int
	// MaxNodes is the most nodes a graph may have (default 10,000).
	MaxNodes int
	// MaxEdges is the most edges a graph may have (default 50,000); it is
	// checked on the '->' count before parsing and again when subgraph
	// endpoints expand (`{a b} -> {c d}` is four edges).
	MaxEdges int
	// MaxAttrBytes is the longest single id, key or value, after unescaping
	// and "a" + "b" joining (default 1 MiB).
	MaxAttrBytes int
	// MaxTokens is the most lexical tokens (ids, strings, keywords and
	// punctuation) a source may hold (default 500,000, some 15 times a
	// 1,000-stage pipeline). The grammar allocates about 170 bytes per token,
	// so without it 4 MiB of "a;" would allocate 700 MB and take more than a
	// second to yield a one-node graph.
	MaxTokens int
	// MaxAttrs is the most attribute values the parser materialises in all
	// (default 1,000,000): the graph's, every node's and edge's (node and
	// edge defaults are copied into each one they apply to) and the copies
	// of default sets a subgraph makes. Without it a default set of 100,000
	// keys applied to 10,000 nodes would build a billion map entries.
	MaxAttrs int
}

// Default parse limits; see ParseLimits for what each bounds and why.
const (
	DefaultMaxDOTBytes     = 4 << 20
	DefaultMaxDOTDepth     = 64
	DefaultMaxDOTNodes     = 10_000
	DefaultMaxDOTEdges     = 50_000
	DefaultMaxDOTAttrBytes = 1 << 20
	DefaultMaxDOTTokens    = 500_000
	DefaultMaxDOTAttrs     = 1_000_000
)

// dotPlaceholderPrefix opens the placeholder ids the lexer gives gonum.
const dotPlaceholderPrefix = 'i'

func (l ParseLimits) withDefaults() ParseLimits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxBytes, DefaultMaxDOTBytes)
	def(&l.MaxDepth, DefaultMaxDOTDepth)
	def(&l.MaxNodes, DefaultMaxDOTNodes)
	def(&l.MaxEdges, DefaultMaxDOTEdges)
	def(&l.MaxAttrBytes, DefaultMaxDOTAttrBytes)
	def(&l.MaxTokens, DefaultMaxDOTTokens)
	def(&l.MaxAttrs, DefaultMaxDOTAttrs)
	return l
}

// ParseError is the error the parser returns for a source it refuses. Line
// is 1-based, 0 when the problem is not on one line (the file is too large).
// Callers get it with errors.As to point an editor at the line; Msg says what
// is wrong and, where it helps, what to write instead.
type ParseError struct {
	File string
	Line int
	Msg  string
}

// Error formats the error as "file:line: msg" ("<dot>" when there is no file
// name, no line part when Line is 0), the form editors and CI logs link.
func (e *ParseError) Error() string {
	f := e.File
	if f == "" {
		f = "<dot>"
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", f, e.Line, e.Msg)
	}
	return f + ": " + e.Msg
}

// ParseDOT parses a pipeline from DOT source with the default limits. The
// name is attractor's; errors name the source "<dot>".
func ParseDOT(src []byte) (*Graph, error) {
	return ParseDOTWith("", src, ParseLimits{})
}

// ParseDOTNamed is ParseDOT for a source with a name (usually its path),
// which goes into Graph.File and every error.
func ParseDOTNamed(name string, src []byte) (*Graph, error) {
	return ParseDOTWith(name, src, ParseLimits{})
}

// ParseDOTFile reads and parses a pipeline file with the default limits
// (see ReadDOTFile).
func ParseDOTFile(path string) (*Graph, error) {
	_, g, err := ReadDOTFile(path)
	return g, err
}

// ReadDOTFile reads a pipeline file and parses it with the default limits,
// returning its source too (a run hashes and keeps it). It refuses what is
// not a regular file (a FIFO would block, a device never end), and reads at
// most one byte more than MaxBytes, so a huge file costs no more than a
// too-large error.
func ReadDOTFile(path string) ([]byte, *Graph, error) {
	lim := ParseLimits{}.withDefaults()
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read pipeline: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("read pipeline %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read pipeline: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, int64(lim.MaxBytes)+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read pipeline %s: %w", path, err)
	}
	g, err := ParseDOTWith(path, src, lim)
	return src, g, err
}

// ParseDOTWith parses a pipeline from DOT source named name under lim. Every
// error is a *ParseError, with the line wherever the problem is on one.
//
// The grammar is gonum's DOT parser (gonum.org/v1/gonum/graph/formats/dot),
// which builds an AST of statements, edge chains, attribute lists and
// subgraphs. It does not do all a pipeline needs, so the source first goes
// through a lexer of ours that rewrites it into a token stream gonum parses:
//
//   - Lines. gonum's AST has no positions. The lexer replaces every id,
//     quoted string and HTML string with a placeholder id ("i0", "i1", ...,
//     base 36) indexing a table of the real values and their lines, so each
//     id in the AST leads straight to its line with nothing to match up. It
//     writes each token on its source line, so gonum's syntax errors carry
//     the right line too (their column is the rewritten one's; it is
//     dropped).
//   - Values gonum does not lex. The lexer reads bare words made of letters,
//     digits, '_', '.' and inner '-', so dotted keys (human.default_choice,
//     stack.child_dotfile), durations (30s, 250ms, which gonum splits into a
//     number and an id) and values like claude-sonnet-4 are one token each.
//     It unescapes \" \n \t \\ itself (gonum keeps quotes and escapes),
//     drops backslash-newline, joins "a" + "b", keeps an HTML string's inner
//     text, strips // and /* */ comments and '#' lines, and reads keywords
//     case-insensitively as Graphviz does (a keyword right after '=' is a
//     value: type=graph).
//   - Limits. The lexer checks MaxBytes first, then UTF-8, NUL bytes and,
//     as it goes, brace depth, token count, value length and the '->' count,
//     all before gonum runs (gonum's semantic check recurses once per
//     nesting level and per chained edge).
//   - Clear errors. It rejects what pipelines do not allow where it sees it:
//     strict, undirected graph, '--', ports (a:p), a second graph, an
//     unclosed '{' or '[' (naming the line that opened it), an unterminated
//     string or comment.
//
// The AST is then walked in source order: graph [..] and top-level key=value
// set graph attributes (default_max_retry is renamed default_max_retries);
// node [..] and edge [..] defaults apply to later statements in their scope;
// a subgraph starts with its parent's defaults and its own do not leak out;
// its label (label=... or graph [label=...], wherever in the subgraph)
// derives a class that every node declared or first referenced inside it
// gets appended to its class list (outer subgraphs' classes first). A node
// first named by an edge gets the node defaults in scope there; a later node
// statement merges its attributes, later wins (class included). Chained
// edges each get the statement's attributes over the edge defaults. A
// subgraph as an edge endpoint expands, as in Graphviz, to an edge per node
// it holds (`a -> {b c}` is a->b and a->c). Node.Line is the line that first
// names the node; Edge.Line is the line of the token naming its target, so
// each edge of a chain split over lines has its own line. Values stay
// strings; validation is Validate's job.
func ParseDOTWith(name string, src []byte, lim ParseLimits) (*Graph, error) {
	lim = lim.withDefaults()
	if len(src) > lim.MaxBytes {
		return nil, &ParseError{File: name, Msg: fmt.Sprintf(
			"source is %d bytes, over the limit of %d (ParseLimits.MaxBytes); a pipeline is a few KiB", len(src), lim.MaxBytes)}
	}
	if err := checkEncoding(name, src); err != nil {
		return nil, err
	}
	lx := &dotLexer{src: src, s: string(src), line: 1, file: name, lim: lim, lastStr: -1,
		out: make([]byte, 0, len(src)/2+64), outLine: 1}
	if bytes.HasPrefix(src, []byte("\xEF\xBB\xBF")) {
		lx.pos = 3 // a UTF-8 byte order mark, as Windows editors write
	}
	if err := lx.run(); err != nil {
		return nil, err
	}
	f, err := dot.ParseBytes(lx.out)
	if err != nil {
		return nil, lx.syntaxError(err)
	}
	w := &dotWalker{file: name, lim: lim, ids: lx.ids, byID: map[string]*Node{},
		attrsLeft: lim.MaxAttrs, classBytesLeft: lim.MaxBytes}
	return w.graph(f.Graphs[0])
}

// checkEncoding refuses NUL bytes and invalid UTF-8, naming the line of the
// first bad byte: both are signs of a binary or mis-encoded file, and
// neither can be written back faithfully in a prompt or a diagnostic.
func checkEncoding(name string, src []byte) error {
	bad := bytes.IndexByte(src, 0)
	what := "a NUL byte"
	if !utf8.Valid(src) {
		for i := 0; i < len(src); {
			r, n := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && n == 1 {
				if bad < 0 || i < bad {
					bad, what = i, "invalid UTF-8"
				}
				break
			}
			i += n
		}
	}
	if bad < 0 {
		return nil
	}
	return &ParseError{File: name, Line: 1 + bytes.Count(src[:bad], []byte("\n")),
		Msg: what + ": a pipeline is UTF-8 text; save the file as UTF-8"}
}

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

// emit checks a token against the structure of a pipeline file and the
// limits, then writes it on its line of the rewritten source. An id (text
// "") is the last of ids and is written as its placeholder.
func (lx *dotLexer) emit(kind int, text string, line int) error {
	lx.flushJoin()
	lx.ntok++
	if lx.ntok > lx.lim.MaxTokens {
		return lx.errf(line, "more than %d tokens (ParseLimits.MaxTokens): too large for a pipeline", lx.lim.MaxTokens)
	}
	switch lx.state {
	case lexHeader:
		switch {
		case kind == tokKeyword && text == "digraph":
			lx.state = lexName
		case kind == tokKeyword && text == "strict":
			return lx.errf(line, "strict graphs are not supported: write `digraph name { ... }`")
		case kind == tokKeyword && text == "graph":
			return lx.errf(line, "undirected `graph` is not supported: a pipeline is a `digraph name { ... }`")
		default:
			return lx.errf(line, "expected `digraph name {` to open the pipeline; got %s", lx.describe(kind, text))
		}
	case lexName, lexBrace:
		switch {
		case kind == tokID && lx.state == lexName:
			lx.state = lexBrace
		case text == "{":
			lx.state = lexBody
			lx.opens = append(lx.opens, line)
		default:
			return lx.errf(line, "expected the graph's name or '{' after `digraph`; got %s", lx.describe(kind, text))
		}
	case lexBody:
		if err := lx.body(kind, text, line); err != nil {
			return err
		}
	case lexDone:
		return lx.errf(line, "unexpected %s after the digraph closed on line %d: a file holds exactly one digraph", lx.describe(kind, text), lx.endLine)
	}
	for lx.outLine < line {
		lx.out = append(lx.out, '\n')
		lx.outLine++
	}
	if kind == tokID {
		lx.out = strconv.AppendInt(append(lx.out, dotPlaceholderPrefix), int64(len(lx.ids)-1), 36)
	} else {
		lx.out = append(lx.out, text...)
	}
	lx.out = append(lx.out, ' ')
	lx.prevEq = text == "=" && kind == tokPunct
	lx.lastStr = -1
	return nil
}

// body checks a token inside the digraph: braces and brackets balance and
// nest within the limit, no '--' or ports, not too many edges.
func (lx *dotLexer) body(kind int, text string, line int) error {
	if kind != tokPunct {
		return nil
	}
	switch text {
	case "{", "}":
		if lx.bracket > 0 {
			return lx.errf(line, "'%s' inside an attribute list: close the '[' of line %d with ']' first", text, lx.bracket)
		}
		if text == "}" {
			lx.opens = lx.opens[:len(lx.opens)-1]
			if len(lx.opens) == 0 {
				lx.state, lx.endLine = lexDone, line
			}
			return nil
		}
		if len(lx.opens) >= lx.lim.MaxDepth {
			return lx.errf(line, "braces nested more than %d deep (ParseLimits.MaxDepth): flatten the subgraphs", lx.lim.MaxDepth)
		}
		lx.opens = append(lx.opens, line)
	case "[":
		if lx.bracket > 0 {
			return lx.errf(line, "'[' inside an attribute list: close the '[' of line %d with ']' first", lx.bracket)
		}
		lx.bracket = line
	case "]":
		if lx.bracket == 0 {
			return lx.errf(line, "']' without a '[' to close")
		}
		lx.bracket = 0
	case ":":
		return lx.errf(line, "ports (node:port) are not supported: name the node alone, as in a -> b")
	case "--":
		return lx.errf(line, "undirected edge '--': pipelines are directed; write '->'")
	case "->":
		lx.arrows++
		if lx.arrows > lx.lim.MaxEdges {
			return lx.errf(line, "more than %d edges (ParseLimits.MaxEdges)", lx.lim.MaxEdges)
		}
	}
	return nil
}

// eof checks that the file ended with the digraph closed.
func (lx *dotLexer) eof() error {
	lx.flushJoin()
	switch {
	case lx.state == lexDone:
		return nil
	case lx.bracket > 0:
		return lx.errf(lx.bracket, "the '[' opened here is never closed: add ']'")
	case lx.state == lexBody:
		return lx.errf(lx.opens[len(lx.opens)-1], "the '{' opened here is never closed: add '}'")
	case lx.state == lexHeader:
		return lx.errf(0, "no digraph: a pipeline file holds one `digraph name { ... }`")
	}
	return lx.errf(lx.line, "the file ends before the digraph's '{'")
}

// describe names a token for an error message.
func (lx *dotLexer) describe(kind int, text string) string {
	switch kind {
	case tokID:
		if text == "" {
			return quoteShort(lx.ids[len(lx.ids)-1].val)
		}
		return quoteShort(lookupPlaceholder(lx.ids, text).val)
	case tokKeyword:
		return "`" + text + "`"
	}
	return "'" + text + "'"
}

// lookupPlaceholder returns the token a placeholder id stands for. Every id
// gonum sees is one; anything else ("" for no graph name) is returned as
// itself, with no line.
func lookupPlaceholder(ids []dotToken, id string) dotToken {
	if len(id) > 1 && id[0] == dotPlaceholderPrefix {
		if i, err := strconv.ParseUint(id[1:], 36, 32); err == nil && i < uint64(len(ids)) {
			return ids[i]
		}
	}
	return dotToken{val: id}
}

// quoteShort quotes s for a message, shortened to 40 runes.
func quoteShort(s string) string {
	if utf8.RuneCountInString(s) > 40 {
		s = string([]rune(s)[:40]) + "..."
	}
	return strconv.Quote(s)
}

// gonumError matches gonum's syntax errors, "line:col: error: expected ...;
// got: ...". The column is the rewritten source's, so it is dropped.
var gonumError = regexp.MustCompile(`^(\d+):(\d+): error: (.*?)(?:; got: .*)?$`)

// gonumTokenNames turns gonum's token names into DOT as one writes it.
var gonumTokenNames = strings.NewReplacer(`"`, `'`, "graphx", "`graph`", "subgraph", "`subgraph`",
	"digraph", "`digraph`", "strict", "`strict`", "node", "`node`", "edge", "`edge`", "␚", "end of file")

var gonumIDName = regexp.MustCompile(`\bid\b`)

// syntaxError turns a gonum syntax error into a ParseError naming the line
// and the offending token as it is in the source.
func (lx *dotLexer) syntaxError(err error) *ParseError {
	m := gonumError.FindStringSubmatch(err.Error())
	if m == nil {
		return lx.errf(0, "syntax error: %v", err)
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	expected := gonumIDName.ReplaceAllString(gonumTokenNames.Replace(m[3]), "an id")
	return lx.errf(line, "syntax error at %s: %s", lx.tokenAt(line, col), expected)
}

// tokenAt describes the token at line and column of the rewritten source.
func (lx *dotLexer) tokenAt(line, col int) string {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(lx.out[off:], '\n')
		if i < 0 {
			return "end of file"
		}
		off += i + 1
	}
	off += col - 1
	if off < 0 || off > len(lx.out) {
		return "end of file"
	}
	text := bytes.TrimLeft(lx.out[off:], " \n")
	if i := bytes.IndexAny(text, " \n"); i >= 0 {
		text = text[:i]
	}
	if len(text) == 0 {
		return "end of file"
	}
	switch c := text[0]; {
	case c == dotPlaceholderPrefix:
		return lx.describe(tokID, string(text))
	case 'a' <= c && c <= 'z':
		return lx.describe(tokKeyword, string(text))
	}
	return lx.describe(tokPunct, string(text))
}

// dotAttr is one key=value of a statement, resolved to its values.
type dotAttr struct {
	key, val string
	line     int
}

// dotRef is a node as an edge endpoint: its id and the line naming it.
type dotRef struct {
	id   string
	line int
}

// dotMembers collects the nodes named in a subgraph used as an edge
// endpoint, in order, once each.
type dotMembers struct {
	seen map[string]bool
	list []dotRef
}

// dotScope is the graph or a subgraph: the node and edge defaults in force
// (shared with the parent until written: copy on write), the classes its
// nodes get, and the node collector when it is an edge endpoint.
type dotScope struct {
	parent           *dotScope
	nodeDefs         map[string]string
	edgeDefs         map[string]string
	ownNode, ownEdge bool
	classes          []string
	members          *dotMembers
}

// dotWalker builds the Graph from gonum's AST.
type dotWalker struct {
	file           string
	lim            ParseLimits
	ids            []dotToken
	g              *Graph
	byID           map[string]*Node
	attrsLeft      int
	classBytesLeft int
}

func (w *dotWalker) errf(line int, format string, args ...any) *ParseError {
	return &ParseError{File: w.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// tok returns the token an AST id stands for.
func (w *dotWalker) tok(id string) dotToken { return lookupPlaceholder(w.ids, id) }

func (w *dotWalker) graph(ag *ast.Graph) (*Graph, error) {
	w.g = &Graph{Name: w.tok(ag.ID).val, Attrs: map[string]string{}, File: w.file}
	if err := w.stmts(&dotScope{}, ag.Stmts, true); err != nil {
		return nil, err
	}
	w.g.reindex()
	return w.g, nil
}

func (w *dotWalker) stmts(s *dotScope, stmts []ast.Stmt, top bool) error {
	for _, st := range stmts {
		var err error
		switch st := st.(type) {
		case *ast.NodeStmt:
			_, err = w.node(s, w.tok(st.Node.ID), w.attrs(st.Attrs), true)
		case *ast.EdgeStmt:
			err = w.edgeStmt(s, st)
		case *ast.AttrStmt:
			err = w.attrStmt(s, st, top)
		case *ast.Attr:
			if top { // in a subgraph only its label counts (subgraphClass)
				err = w.graphAttr(w.attr(st))
			}
		case *ast.Subgraph:
			_, err = w.subgraph(s, st, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *dotWalker) attr(a *ast.Attr) dotAttr {
	k := w.tok(a.Key)
	return dotAttr{key: k.val, val: w.tok(a.Val).val, line: k.line}
}

func (w *dotWalker) attrs(list []*ast.Attr) []dotAttr {
	out := make([]dotAttr, len(list))
	for i, a := range list {
		out[i] = w.attr(a)
	}
	return out
}

// graphAttr sets a graph attribute, renaming attractor's old
// default_max_retry.
func (w *dotWalker) graphAttr(a dotAttr) error {
	if a.key == "default_max_retry" {
		a.key = "default_max_retries"
	}
	return w.set(w.g.Attrs, a)
}

func (w *dotWalker) attrStmt(s *dotScope, st *ast.AttrStmt, top bool) error {
	attrs := w.attrs(st.Attrs)
	var defs *map[string]string
	var own *bool
	switch st.Kind {
	case ast.GraphKind:
		if !top { // a subgraph's graph [..]: only its label counts (subgraphClass)
			return nil
		}
		for _, a := range attrs {
			if err := w.graphAttr(a); err != nil {
				return err
			}
		}
		return nil
	case ast.NodeKind:
		defs, own = &s.nodeDefs, &s.ownNode
	default:
		defs, own = &s.edgeDefs, &s.ownEdge
	}
	if len(attrs) == 0 {
		return nil
	}
	if !*own {
		m, err := w.copyAttrs(*defs, len(attrs), attrs[0].line)
		if err != nil {
			return err
		}
		*defs, *own = m, true
	}
	for _, a := range attrs {
		if err := w.set(*defs, a); err != nil {
			return err
		}
	}
	return nil
}

// set sets one attribute, counting a new key against MaxAttrs.
func (w *dotWalker) set(m map[string]string, a dotAttr) error {
	if _, ok := m[a.key]; !ok {
		if err := w.charge(1, a.line); err != nil {
			return err
		}
	}
	m[a.key] = a.val
	return nil
}

// copyAttrs copies a default set, counted against MaxAttrs, with room for
// extra more.
func (w *dotWalker) copyAttrs(defs map[string]string, extra, line int) (map[string]string, error) {
	if err := w.charge(len(defs), line); err != nil {
		return nil, err
	}
	m := make(map[string]string, len(defs)+extra)
	for k, v := range defs {
		m[k] = v
	}
	return m, nil
}

func (w *dotWalker) charge(n, line int) error {
	if n > w.attrsLeft {
		return w.errf(line, "more than %d attribute values in all (ParseLimits.MaxAttrs); node and edge defaults are copied to every node and edge they apply to", w.lim.MaxAttrs)
	}
	w.attrsLeft -= n
	return nil
}

// subgraph walks a subgraph in a scope of its own and, when collect is set
// (it is an edge endpoint), returns the nodes named in it.
func (w *dotWalker) subgraph(parent *dotScope, sg *ast.Subgraph, collect bool) ([]dotRef, error) {
	s := &dotScope{parent: parent, nodeDefs: parent.nodeDefs, edgeDefs: parent.edgeDefs, classes: parent.classes}
	if c := w.subgraphClass(sg); c != "" && !slices.Contains(s.classes, c) {
		s.classes = append(parent.classes[:len(parent.classes):len(parent.classes)], c)
	}
	if collect {
		s.members = &dotMembers{seen: map[string]bool{}}
	}
	if err := w.stmts(s, sg.Stmts, false); err != nil {
		return nil, err
	}
	if collect {
		return s.members.list, nil
	}
	return nil, nil
}

// subgraphClass derives the class a subgraph's label gives its nodes. The
// label may be set anywhere in the subgraph, as label=... or graph
// [label=...]; the last one wins, as in Graphviz.
func (w *dotWalker) subgraphClass(sg *ast.Subgraph) string {
	label := ""
	for _, st := range sg.Stmts {
		switch st := st.(type) {
		case *ast.Attr:
			if a := w.attr(st); a.key == "label" {
				label = a.val
			}
		case *ast.AttrStmt:
			if st.Kind != ast.GraphKind {
				continue
			}
			for _, a := range st.Attrs {
				if a := w.attr(a); a.key == "label" {
					label = a.val
				}
			}
		}
	}
	return classFromLabel(label)
}

// classFromLabel derives a class name from a subgraph label: lowercase,
// whitespace to '-', anything but ASCII letters, digits, '-' and '_'
// dropped, so that the class can be written in a stylesheet selector
// (label="Loop A" is class loop-a).
func classFromLabel(label string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(label) {
		switch {
		case unicode.IsSpace(r):
			b.WriteByte('-')
		case 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// node names a node in scope s: declared for a node statement (whose attrs
// merge in), not for an edge endpoint. A node named for the first time gets
// the node defaults in scope; either way it then gets the scope's classes.
func (w *dotWalker) node(s *dotScope, t dotToken, attrs []dotAttr, declared bool) (dotRef, error) {
	if !validNodeID(t.val) {
		return dotRef{}, w.errf(t.line, "node id %s is not valid: ids are letters, digits and '_', not starting with a digit; put display text in label=\"...\"", quoteShort(t.val))
	}
	n := w.byID[t.val]
	created := n == nil
	if created {
		if len(w.g.Nodes) >= w.lim.MaxNodes {
			return dotRef{}, w.errf(t.line, "more than %d nodes (ParseLimits.MaxNodes)", w.lim.MaxNodes)
		}
		m, err := w.copyAttrs(s.nodeDefs, len(attrs), t.line)
		if err != nil {
			return dotRef{}, err
		}
		n = &Node{ID: t.val, Attrs: m, Line: t.line}
		w.byID[t.val] = n
		w.g.Nodes = append(w.g.Nodes, n)
	}
	if declared {
		for _, a := range attrs {
			if err := w.set(n.Attrs, a); err != nil {
				return dotRef{}, err
			}
		}
	}
	if (created || declared) && len(s.classes) > 0 {
		if err := w.addClasses(n, s.classes, t.line); err != nil {
			return dotRef{}, err
		}
	}
	r := dotRef{id: t.val, line: t.line}
	for sc := s; sc != nil; sc = sc.parent {
		if m := sc.members; m != nil && !m.seen[r.id] {
			m.seen[r.id] = true
			m.list = append(m.list, r)
		}
	}
	return r, nil
}

// validNodeID tells whether s is a node id: [A-Za-z_][A-Za-z0-9_]*.
func validNodeID(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// addClasses appends the classes (no repeats among them) the node lacks to
// its class list, which is split on commas and spaces as the stylesheet
// reads it. The bytes read and written are charged against MaxBytes (see
// ParseLimits) before the work is done.
func (w *dotWalker) addClasses(n *Node, classes []string, line int) error {
	cur := n.Attrs["class"]
	if err := w.chargeClassBytes(len(cur), line); err != nil {
		return err
	}
	found := make([]bool, len(classes))
	listed := false
	for f := range strings.FieldsFuncSeq(cur, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		listed = true
		if i := slices.Index(classes, f); i >= 0 {
			found[i] = true
		}
	}
	var b strings.Builder
	b.WriteString(cur)
	for i, c := range classes {
		if found[i] {
			continue
		}
		if listed {
			b.WriteByte(',')
		}
		b.WriteString(c)
		listed = true
	}
	if b.Len() == len(cur) {
		return nil
	}
	if err := w.chargeClassBytes(b.Len(), line); err != nil {
		return err
	}
	return w.set(n.Attrs, dotAttr{key: "class", val: b.String(), line: line})
}

func (w *dotWalker) chargeClassBytes(n, line int) error {
	if n > w.classBytesLeft {
		return w.errf(line, "class lists built from subgraph labels exceed %d bytes in all (ParseLimits.MaxBytes): shorten the class attributes", w.lim.MaxBytes)
	}
	w.classBytesLeft -= n
	return nil
}

// edgeStmt adds a statement's edges, A -> B -> C one per arrow, each with
// the statement's attributes over the edge defaults.
func (w *dotWalker) edgeStmt(s *dotScope, st *ast.EdgeStmt) error {
	attrs := w.attrs(st.Attrs)
	from, err := w.vertex(s, st.From)
	if err != nil {
		return err
	}
	for e := st.To; e != nil; e = e.To {
		to, err := w.vertex(s, e.Vertex)
		if err != nil {
			return err
		}
		if err := w.connect(s, from, to, attrs); err != nil {
			return err
		}
		from = to
	}
	return nil
}

// vertex returns the nodes an edge endpoint stands for: one node, or every
// node a subgraph names.
func (w *dotWalker) vertex(s *dotScope, v ast.Vertex) ([]dotRef, error) {
	if sg, ok := v.(*ast.Subgraph); ok {
		return w.subgraph(s, sg, true)
	}
	r, err := w.node(s, w.tok(v.(*ast.Node).ID), nil, false)
	return []dotRef{r}, err
}

// connect adds an edge from every node of from to every node of to.
func (w *dotWalker) connect(s *dotScope, from, to []dotRef, attrs []dotAttr) error {
	if len(from) == 0 || len(to) == 0 {
		return nil
	}
	if len(from)*len(to) > w.lim.MaxEdges-len(w.g.Edges) {
		return w.errf(to[0].line, "more than %d edges (ParseLimits.MaxEdges); a subgraph endpoint makes an edge per node it holds", w.lim.MaxEdges)
	}
	for _, f := range from {
		for _, t := range to {
			m, err := w.copyAttrs(s.edgeDefs, len(attrs), t.line)
			if err != nil {
				return err
			}
			for _, a := range attrs {
				if err := w.set(m, a); err != nil {
					return err
				}
			}
			w.g.Edges = append(w.g.Edges, &Edge{From: f.id, To: t.id, Attrs: m, Line: t.line})
		}
	}
	return nil
}
