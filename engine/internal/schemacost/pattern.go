package schemacost

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// pattern is a regular expression, parsed and sized when the library asks
// for it, and built when it is first matched: the library also asks for
// each string that "format": "regex" checks, to know whether it parses,
// and building the program (repetitions expanded) costs up to 70 µs a
// byte of pattern where parsing costs 10.
type pattern struct {
	src   string
	insts int64 // bounds the work of matching one byte
	built func() *regexp.Regexp
}

func (p *pattern) MatchString(s string) bool { return p.built().MatchString(s) }
func (p *pattern) String() string            { return p.src }

// compileRegexp parses a pattern within l: a schema's pattern or
// patternProperties name, or a string that "format": "regex" checks, which
// a model writes. A pattern longer than l.MaxPatternBytes is refused before
// it is parsed; one whose program would exceed l.MaxPatternInsts is
// refused before the program is built: repetitions expand (4 KiB of
// ".{0,1000}" is 900,000 instructions, and Go accepts 3 million).
func compileRegexp(src string, l Limits) (jsonschema.Regexp, error) {
	if len(src) > l.MaxPatternBytes {
		return nil, fmt.Errorf("the pattern is %d bytes, more than the limit of %d (tools.max_pattern_kb in morph.toml)", len(src), l.MaxPatternBytes)
	}
	parsed, err := syntax.Parse(src, syntax.Perl) // as regexp.Compile parses it: it cannot fail after this
	if err != nil {
		return nil, err
	}
	insts := progSize(parsed)
	if insts > int64(l.MaxPatternInsts) {
		return nil, fmt.Errorf("the pattern compiles to about %s instructions, more than the limit of %d (tools.max_pattern_insts in morph.toml): its repetition counts multiply its size",
			formatCount(insts), l.MaxPatternInsts)
	}
	return &pattern{src: src, insts: insts, built: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(src) })}, nil
}

// progSize bounds the instructions of the program Go's regexp builds from
// re, as regexp/syntax does for its own much larger limit: repetitions are
// expanded, x{2,5} to xx(x(x(x)?)?)?. A tree is at most 1,000 high.
func progSize(re *syntax.Regexp) int64 {
	var size int64
	switch re.Op {
	case syntax.OpLiteral:
		size = int64(len(re.Rune))
	case syntax.OpCapture, syntax.OpStar:
		size = 2 + progSize(re.Sub[0])
	case syntax.OpPlus, syntax.OpQuest:
		size = 1 + progSize(re.Sub[0])
	case syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			size = add(size, progSize(sub))
		}
		if re.Op == syntax.OpAlternate {
			size = add(size, int64(len(re.Sub)-1))
		}
	case syntax.OpRepeat:
		sub := progSize(re.Sub[0])
		switch {
		case re.Max == -1 && re.Min == 0:
			size = 2 + sub
		case re.Max == -1:
			size = add(1, mul(int64(re.Min), sub))
		default:
			size = add(mul(int64(re.Max), sub), int64(re.Max-re.Min))
		}
	}
	return max(1, size)
}

// regexpStepsPerByte is what checking a string for "format": "regex"
// costs, in steps per byte: parsing a pattern of Unicode classes takes up
// to 10 µs a byte ("(?i)[^\pL\pN]", "[\pL\PL]"), 15 steps.
const regexpStepsPerByte = 32
