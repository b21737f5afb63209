package pipeline

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"gonum.org/v1/gonum/graph/formats/dot"
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

// ReadDOTFile reads a pipeline file (ReadDOTSource) and parses it with
// the default limits, returning its source too (a run hashes and keeps
// it).
func ReadDOTFile(path string) ([]byte, *Graph, error) {
	src, err := ReadDOTSource(path)
	if err != nil {
		return nil, nil, err
	}
	g, err := ParseDOTNamed(path, src)
	return src, g, err
}

// ReadDOTSource reads a pipeline file's source, unparsed: the one bounded
// read of a DOT file (run, validate, serve, render, the corpus). It refuses
// what is not a regular file (a FIFO would block, a device never end) and
// a file over DefaultMaxDOTBytes, reading at most one byte more, so a huge
// file costs no more than the refusal.
func ReadDOTSource(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read pipeline: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read pipeline %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read pipeline: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, DefaultMaxDOTBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read pipeline %s: %w", path, err)
	}
	if len(src) > DefaultMaxDOTBytes {
		return nil, tooLarge(path, len(src), DefaultMaxDOTBytes)
	}
	return src, nil
}

// tooLarge is the refusal of a source of n bytes (read up to one past max).
func tooLarge(name string, n, max int) *ParseError {
	return &ParseError{File: name, Msg: fmt.Sprintf(
		"source is %d bytes, over the limit of %d (ParseLimits.MaxBytes); a pipeline is a few KiB", n, max)}
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
		return nil, tooLarge(name, len(src), lim.MaxBytes)
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
