package pipeline

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

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
