package pipeline

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds on a condition. Conditions come from DOT files, which are input:
// the bounds keep a hostile file from making every routing decision slow.
const (
	// MaxConditionBytes bounds a condition's length.
	MaxConditionBytes = 4096
	// MaxConditionClauses bounds the clauses joined by &&.
	MaxConditionClauses = 32
	// MaxConditionKeyDepth bounds the dot-separated segments of a key:
	// each segment is a map lookup when the key descends into a value.
	MaxConditionKeyDepth = 16
)

// Condition is a parsed edge condition: clauses joined by &&, each
// comparing a key's value with a literal. The zero Condition (from an
// empty string) is true: an edge without a condition is unconditional.
type Condition struct {
	clauses []clause
}

type clause struct {
	key    string
	negate bool // != rather than =
	value  string
}

// ParseCondition parses an edge condition:
//
//	Condition := Clause ('&&' Clause)*
//	Clause    := Key ('=' | '==' | '!=') Literal
//
// A Literal is bare (no spaces, quotes or any of & | = ! ( ) < >) or
// double-quoted, with \" and \\ as its only escapes; "" is the empty
// value. A Key is [A-Za-z_][A-Za-z0-9_.-]* without empty segments; what it
// reads is described at Eval. A literal compared with outcome is any
// status name (see ParseStageStatus): the standard ones and their aliases
// compare canonically, a custom one ("needs_dod") as itself, lowercased;
// Validate warns about a custom one, since a typo of a standard status
// looks the same. Errors give the 1-based column of the problem.
func ParseCondition(s string) (*Condition, error) {
	if len(s) > MaxConditionBytes {
		return nil, fmt.Errorf("condition is %d bytes, more than the %d allowed", len(s), MaxConditionBytes)
	}
	p := condParser{src: s}
	c := &Condition{}
	p.skipSpace()
	if p.eof() {
		return c, nil
	}
	for {
		if len(c.clauses) == MaxConditionClauses {
			return nil, p.errorf("more than %d clauses", MaxConditionClauses)
		}
		cl, err := p.clause()
		if err != nil {
			return nil, err
		}
		c.clauses = append(c.clauses, cl)
		p.skipSpace()
		if p.eof() {
			return c, nil
		}
		switch {
		case strings.HasPrefix(p.rest(), "&&"):
			p.pos += 2
		case strings.HasPrefix(p.rest(), "||"):
			return nil, p.errorf("|| is not supported: only && joins clauses (use one edge per alternative)")
		default:
			return nil, p.errorf("expected && or the end after the value of %q (quote a value that has spaces)", cl.key)
		}
		p.skipSpace()
		if p.eof() {
			return nil, p.errorf("missing clause after &&")
		}
	}
}

// EvalCondition parses s and evaluates it. An empty condition is true.
func EvalCondition(s string, o *Outcome, pctx *Context) (bool, error) {
	c, err := ParseCondition(s)
	if err != nil {
		return false, err
	}
	return c.Eval(o, pctx), nil
}

// Eval reports whether every clause holds. Keys read:
//
//   - outcome: o's status, compared case-insensitively and through
//     ParseStatus's aliases (so outcome=FAIL and outcome=failure match fail);
//   - preferred_label: o's preferred label, exactly;
//   - context.<path>: <path> in pctx, else the whole key as written
//     ("context.<path>"), since handlers write keys both ways;
//   - any other key: that key in pctx.
//
// With o nil, outcome and preferred_label are read from pctx (the runner
// keeps the last stage's there), so conditions work where no outcome is at
// hand. A context key that is not set may still name a value inside
// another: "a.b.c" reads key "a.b.c", else key "a.b" and its field "c",
// else key "a" and its fields "b" then "c" (the longest set prefix wins).
// Values compare as text, as Context.GetString gives them; a missing key,
// or a nil pctx, is "".
func (c *Condition) Eval(o *Outcome, pctx *Context) bool {
	for _, cl := range c.clauses {
		got := resolveKey(cl.key, o, pctx)
		var eq bool
		if cl.key == KeyOutcome {
			eq = statusText(got) == cl.value
		} else {
			eq = got == cl.value
		}
		if eq == cl.negate {
			return false
		}
	}
	return true
}

// resolveKey is the text a condition key stands for (see Eval).
func resolveKey(key string, o *Outcome, pctx *Context) string {
	if o != nil {
		switch key {
		case KeyOutcome:
			return string(o.Status)
		case KeyPreferredLabel:
			return o.PreferredLabel
		}
	}
	if pctx == nil {
		return ""
	}
	if path, ok := strings.CutPrefix(key, "context."); ok {
		if v, ok := lookupPath(pctx, path); ok {
			return valueString(v)
		}
	}
	v, _ := lookupPath(pctx, key)
	return valueString(v)
}

// lookupPath finds key in pctx, else descends from the longest dotted
// prefix of key that is set into the value's fields.
func lookupPath(pctx *Context, key string) (any, bool) {
	if v, ok := pctx.Lookup(key); ok {
		return v, true
	}
	for i := strings.LastIndexByte(key, '.'); i > 0; i = strings.LastIndexByte(key[:i], '.') {
		if v, ok := pctx.Lookup(key[:i]); ok {
			return descend(v, strings.Split(key[i+1:], "."))
		}
	}
	return nil, false
}

// descend follows fields through nested maps. A value that is not a
// map[string]any (a struct, a typed map) is seen as its JSON, as
// checkpoints store it.
func descend(v any, fields []string) (any, bool) {
	for _, f := range fields {
		m, ok := v.(map[string]any)
		if !ok {
			b, err := json.Marshal(v)
			if err != nil || json.Unmarshal(b, &m) != nil {
				return nil, false
			}
		}
		if v, ok = m[f]; !ok {
			return nil, false
		}
	}
	return v, true
}

// statusText is a status as conditions compare it: canonical when
// ParseStatus knows it, else lowercased.
func statusText(s string) string {
	if st, err := ParseStatus(s); err == nil {
		return string(st)
	}
	return strings.ToLower(strings.TrimSpace(s))
}

// customOutcomes lists the outcome literals of c that are not standard
// statuses (nor their aliases).
func (c *Condition) customOutcomes() []string {
	var out []string
	for _, cl := range c.clauses {
		if cl.key == KeyOutcome && !StageStatus(cl.value).Standard() {
			out = append(out, cl.value)
		}
	}
	return out
}

// condParser scans a condition; pos is a byte offset into src.
type condParser struct {
	src string
	pos int
}

func (p *condParser) eof() bool    { return p.pos >= len(p.src) }
func (p *condParser) rest() string { return p.src[p.pos:] }

func (p *condParser) skipSpace() {
	for !p.eof() && isCondSpace(p.src[p.pos]) {
		p.pos++
	}
}

// errorf is an error at the current position, as a 1-based column in
// runes.
func (p *condParser) errorf(format string, args ...any) error {
	return p.errorAt(p.pos, format, args...)
}

func (p *condParser) errorAt(pos int, format string, args ...any) error {
	col := utf8.RuneCountInString(p.src[:pos]) + 1
	return fmt.Errorf("condition column %d: %s", col, fmt.Sprintf(format, args...))
}

func (p *condParser) clause() (clause, error) {
	var cl clause
	start := p.pos
	for !p.eof() && isKeyByte(p.src[p.pos], p.pos == start) {
		p.pos++
	}
	cl.key = p.src[start:p.pos]
	if cl.key == "" {
		return cl, p.errorf("expected a key (outcome, preferred_label, context.<name> or a context key)")
	}
	if err := p.checkKey(cl.key, start); err != nil {
		return cl, err
	}
	p.skipSpace()
	switch r := p.rest(); {
	case strings.HasPrefix(r, "!="):
		cl.negate = true
		p.pos += 2
	case strings.HasPrefix(r, "=="):
		p.pos += 2
	case strings.HasPrefix(r, "="):
		p.pos++
	default:
		return cl, p.errorf("expected = or != after key %q (no other comparisons exist)", cl.key)
	}
	p.skipSpace()
	litPos := p.pos
	value, err := p.literal(cl.key)
	if err != nil {
		return cl, err
	}
	if cl.key == KeyOutcome {
		// Spec 10.2: the literal is any Literal, and a stage's status is
		// whatever its handler reports (custom outcomes route this way).
		st, err := ParseStageStatus(value)
		if err != nil {
			return cl, p.errorAt(litPos, "%v", err)
		}
		value = string(st)
	}
	cl.value = value
	return cl, nil
}

// checkKey refuses empty segments ("a..b", "context.") and keys too deep.
func (p *condParser) checkKey(key string, at int) error {
	segs := strings.Split(key, ".")
	if len(segs) > MaxConditionKeyDepth {
		return p.errorAt(at, "key %q has more than %d segments", key, MaxConditionKeyDepth)
	}
	for _, s := range segs {
		if s == "" {
			return p.errorAt(at, "key %q has an empty segment", key)
		}
	}
	return nil
}

// literal reads a bare or double-quoted value.
func (p *condParser) literal(key string) (string, error) {
	if p.eof() || p.src[p.pos] != '"' {
		start := p.pos
		for !p.eof() && isBareByte(p.src[p.pos]) {
			p.pos++
		}
		if p.pos == start {
			return "", p.errorf("missing value after the operator of %q (write \"\" for the empty value)", key)
		}
		return p.src[start:p.pos], nil
	}
	v, n, qerr := scanQuoted(p.rest())
	if qerr != nil {
		return "", p.errorAt(p.pos+qerr.off, "%s", qerr.msg)
	}
	p.pos += n
	return v, nil
}

// badQuote says what is wrong with a quoted string, at a byte offset from
// its opening quote.
type badQuote struct {
	off int
	msg string
}

// scanQuoted reads the double-quoted string s opens with, where \" and \\
// are the only escapes (conditions and stylesheets sit inside DOT strings,
// which have already had their own escapes removed). It returns the
// value and the bytes it spans, quotes included.
func scanQuoted(s string) (string, int, *badQuote) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 >= len(s) || (s[i+1] != '"' && s[i+1] != '\\') {
				return "", 0, &badQuote{i, `unknown escape in a quoted value: only \" and \\ are escapes`}
			}
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, &badQuote{0, "unterminated quoted value"}
}

func isCondSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isKeyByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case c >= '0' && c <= '9', c == '.', c == '-':
		return !first
	}
	return false
}

func isBareByte(c byte) bool {
	return !isCondSpace(c) && !strings.ContainsRune(`"&|=!()<>`, rune(c))
}
