// Package schemacost compiles a JSON Schema that an untrusted party wrote,
// a tool's parameter schema, and bounds what validating a value against
// it may cost, so that neither the schema's author nor the value's can
// hold the host.
//
// A tool's schema comes from a plugin (a guest module, an MCP server), and
// the values checked against it from a model, which a prompt can steer.
// JSON Schema is not cheap to check: allOf, anyOf, oneOf and $ref multiply,
// so a chain of a few KB makes one value take 2^n evaluations (a 40-link
// chain took days: issue 11); a pattern's repetition counts expand its
// program ("a{1000}" is 1,000 instructions); "format": "regex", which
// drafts before 2019-09 assert, compiles each string the model sends as a
// pattern; and the library turns every number into an exact rational
// ("1e-1000000" costs megabytes at each comparison). A $ref outside the
// document would read the host's files into errors a model sees, block on
// a FIFO or /dev/stdin, or fetch a URL.
//
// Compile refuses, with an error that names the limit and its morph.toml
// setting, a schema that is too large or deep, refers outside itself,
// holds an unbounded number or pattern, or may check one value against
// more subschemas than Limits.MaxSteps; it bounds, depth by depth, what
// checking a value costs. Schema.Validate then refuses (StepsError),
// before validating, a value whose bound exceeds the limit. What a step is
// engine.SchemaLimits documents for operators; bytesPerStep and
// regexpStepsPerByte set it here.
//
// Package engine sets the limits (engine.SchemaLimits, with their
// defaults) and names the tool in each error.
package schemacost

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/internal/schemaerr"
)

// Limits bound what a schema and the values checked against it may cost.
// Every field must be positive: package engine fills in its defaults,
// and documents each for operators (engine.SchemaLimits).
type Limits struct {
	MaxBytes        int // the schema's JSON text
	MaxDepth        int // how deeply the schema nests arrays and objects
	MaxSteps        int // the validation work of one value
	MaxPatternBytes int // each regular expression compiled, the schema's or a value's
	MaxPatternInsts int // the program of each regular expression, counted before it is built
	// MaxParamsDepth is how deeply a value may nest; the cost is analysed
	// down to it, and Validate requires values no deeper.
	MaxParamsDepth int
}

// Schema is a compiled schema and what validating a value against it may
// cost. It is safe for concurrent use.
type Schema struct {
	schema *jsonschema.Schema
	cost   schemaCost
	limit  int64 // Limits.MaxSteps
}

// StepsError refuses a value whose validation would take more steps than
// the limit, before any is taken. Its text continues one that names the
// parameters: "invalid tool parameters for tool x: checking them ...".
type StepsError struct {
	Steps int64 // the bound on the value's validation work; saturates above 10^15
	Limit int64 // Limits.MaxSteps
}

// Error says how many steps checking would take, and what to do.
func (e *StepsError) Error() string {
	return fmt.Sprintf("checking them against its schema would take %s steps, more than the limit of %d; send smaller parameters",
		formatCount(e.Steps), e.Limit)
}

// schemaURL names every schema inside its own compiler; tool names (which
// plugins choose) stay out of URLs.
const schemaURL = "morph:tool-schema.json"

// maxNumberLen caps a number's text in a schema: the library turns numbers
// into exact rationals, and a long or huge one ("1e-1000000") costs
// megabytes and milliseconds at every comparison.
const maxNumberLen = 32

// maxQuoted caps what an error quotes of a name, URL or pattern the
// schema's author wrote.
const maxQuoted = 160

func quote(s string) string { return safetext.Quote(s, maxQuoted) }

// errExternalRef is the refusing loader's answer: a schema is one
// document, and nothing outside it is opened or fetched.
var errExternalRef = errors.New("tool schemas may refer only within themselves")

type refuseLoader struct{}

func (refuseLoader) Load(string) (any, error) { return nil, errExternalRef }

// Compile compiles text, a JSON Schema, under l. Its errors say what is
// wrong in one line, escaped and cut, naming the setting of a limit.
func Compile(text string, l Limits) (*Schema, error) {
	if len(text) > l.MaxBytes {
		return nil, fmt.Errorf("%d bytes, more than the limit of %d (tools.max_schema_kb in morph.toml)", len(text), l.MaxBytes)
	}
	if err := abi.CheckDepth([]byte(text), l.MaxDepth); err != nil {
		return nil, fmt.Errorf("%v (tools.max_schema_depth in morph.toml)", err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %s", safetext.Line(err.Error(), 200))
	}
	if err := checkNumbers(doc, "", false); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	// The same engine compiles the schema's patterns and, at validation,
	// the values that "format": "regex" checks.
	c.UseRegexpEngine(func(src string) (jsonschema.Regexp, error) { return compileRegexp(src, l) })
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, errors.New(safetext.Line(err.Error(), 500))
	}
	sch, err := c.Compile(schemaURL)
	var lerr *jsonschema.LoadURLError
	var rerr *jsonschema.InvalidRegexError
	var merr *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	switch {
	case errors.As(err, &lerr):
		return nil, fmt.Errorf("it refers to %s, outside itself; %v (\"$ref\": \"#/$defs/name\")", quote(lerr.URL), errExternalRef)
	case errors.As(err, &rerr): // its text quotes the whole pattern, before the reason
		return nil, fmt.Errorf("the pattern %s at %s: %s", quote(rerr.Regex), quote(strings.TrimPrefix(rerr.URL, schemaURL)),
			safetext.Line(rerr.Err.Error(), 300))
	case errors.As(err, &merr) && errors.As(merr.Err, &verr):
		return nil, fmt.Errorf("it breaks the rules of JSON Schema: %s", safetext.Line(schemaerr.Describe(verr, ""), 1000))
	case err != nil:
		return nil, errors.New(safetext.Line(err.Error(), 500))
	}
	cost, err := analyze(sch, int64(l.MaxSteps), l.MaxParamsDepth)
	if err != nil {
		return nil, err
	}
	cost.maxPattern = int64(l.MaxPatternBytes)
	return &Schema{schema: sch, cost: cost, limit: int64(l.MaxSteps)}, nil
}

// Validate checks inst, a value jsonschema.UnmarshalJSON decoded that
// nests no deeper than Limits.MaxParamsDepth. It returns a *StepsError,
// unchecked, when checking inst would take more than Limits.MaxSteps
// steps, and otherwise what the library returns: a
// *jsonschema.ValidationError when inst breaks the schema.
func (s *Schema) Validate(inst any) error {
	if n := s.cost.steps(inst); n > s.limit {
		return &StepsError{Steps: n, Limit: s.limit}
	}
	return s.schema.Validate(inst)
}

// countKeywords are the keywords whose value is a count; the library reads
// them as an int, and "maxLength": 1e308 became a limit no string met.
var countKeywords = map[string]bool{"minLength": true, "maxLength": true, "minItems": true, "maxItems": true,
	"minProperties": true, "maxProperties": true, "minContains": true, "maxContains": true}

// dataKeywords hold values, not schemas: a "maxLength" inside is data.
var dataKeywords = map[string]bool{"enum": true, "const": true, "default": true, "examples": true}

// schemaMaps map names (chosen by the schema's author: "enum" may name a
// property) to schemas.
var schemaMaps = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
	"dependentSchemas": true, "dependencies": true}

// checkNumbers refuses a number that is long or beyond a float64 (no
// parameter needs one, and each costs big-number arithmetic), and, where v
// is a schema rather than data, a count keyword that is not a whole number
// an int32 holds (5.0 and 1e2 are whole, as JSON Schema and the library
// read them). at is v's JSON pointer.
func checkNumbers(v any, at string, data bool) error {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		mantissa, _, _ := strings.Cut(strings.ToLower(string(v)), "e")
		if err != nil || len(v) > maxNumberLen || (f == 0 && strings.Trim(mantissa, "-0.") != "") { // ParseFloat rounds an underflow to 0
			return fmt.Errorf("the number at %s is longer than %d characters or beyond a float64", quote(at), maxNumberLen)
		}
	case map[string]any:
		for k, x := range v {
			if names, ok := x.(map[string]any); ok && !data && schemaMaps[k] {
				for name, sub := range names {
					if err := checkNumbers(sub, at+"/"+k+"/"+name, false); err != nil {
						return err
					}
				}
				continue
			}
			if err := checkNumbers(x, at+"/"+k, data || dataKeywords[k]); err != nil {
				return err
			}
			if n, ok := x.(json.Number); ok && !data && countKeywords[k] && !isCount(n) {
				return fmt.Errorf("%s at %s is %s: want a whole number from 0 to %d", k, quote(at), n, math.MaxInt32)
			}
		}
	case []any:
		for i, x := range v {
			if err := checkNumbers(x, at+"/"+strconv.Itoa(i), data); err != nil {
				return err
			}
		}
	}
	return nil
}

// isCount reports whether n, a number within a float64, is exactly a whole
// number from 0 to math.MaxInt32.
func isCount(n json.Number) bool {
	r, ok := new(big.Rat).SetString(string(n))
	return ok && r.IsInt() && r.Sign() >= 0 && r.Num().Cmp(big.NewInt(math.MaxInt32)) <= 0
}
