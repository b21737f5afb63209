package schemacost

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/internal/schemaerr"
	"github.com/morphhost/morph/internal/testenv"
)

// limits are package engine's defaults, which the sizes in these tests
// are chosen against.
var limits = Limits{MaxBytes: 64 << 10, MaxDepth: abi.MaxDepth, MaxSteps: 500_000,
	MaxPatternBytes: 4 << 10, MaxPatternInsts: 10_000, MaxParamsDepth: abi.MaxDepth}

// allOfDefs are the definitions of the exponential schema of issue 11:
// d0..dn, each applying the next twice, so a value is checked 2^n times.
func allOfDefs(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"d%d":{"type":"object"}`, n)
	return b.String()
}

// allOfChain applies the chain to the parameters.
func allOfChain(n int) string {
	return `{"type":"object","$ref":"#/$defs/d0","$defs":{` + allOfDefs(n) + `}}`
}

// compile compiles schema under limits, changed by each of change, failing
// the test if it takes (hangs) more than the bound.
func compile(t testing.TB, schema string, change ...func(*Limits)) (*Schema, error) {
	t.Helper()
	l := limits
	for _, c := range change {
		c(&l)
	}
	var s *Schema
	var err error
	testenv.Within(t, "compiling the schema", func() { s, err = Compile(schema, l) })
	return s, err
}

// mustCompile compiles schema under limits.
func mustCompile(t testing.TB, schema string) *Schema {
	t.Helper()
	s, err := compile(t, schema)
	if err != nil {
		t.Fatalf("%.200s: %v", schema, err)
	}
	return s
}

// wantRefused fails the test unless schema is refused with an error that
// contains each of contains.
func wantRefused(t *testing.T, schema string, l func(*Limits), contains ...string) error {
	t.Helper()
	var err error
	if l == nil {
		_, err = compile(t, schema)
	} else {
		_, err = compile(t, schema, l)
	}
	if err == nil {
		t.Fatalf("%.200s: compiled, want it refused", schema)
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not mention %s", err, s)
		}
	}
	return err
}

// validate decodes params as the engine does and validates them against s.
func validate(t testing.TB, s *Schema, params string) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(params))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Within(t, "validating", func() { err = s.Validate(inst) })
	return err
}

// jsonList is a JSON array of n copies of item.
func jsonList(item string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
}

// A schema that refers to a file must not make the host read it: the file
// here is a valid schema whose enum would otherwise reach the model.
func TestFileRefIsNotRead(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte(`{"enum":["CANARY-7f3a"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := "file://" + filepath.ToSlash(secret)
	err := wantRefused(t, `{"type":"object","properties":{"x":{"$ref":"`+ref+`"}}}`, nil, ref, "outside itself")
	if strings.Contains(err.Error(), "CANARY") {
		t.Fatalf("error %v quotes the file", err)
	}
}

// A reference to standard input (or any file that blocks on open) must be
// refused without opening it.
func TestStdinRefDoesNotBlock(t *testing.T) {
	for _, ref := range []string{"file:///dev/stdin", "/dev/stdin"} {
		wantRefused(t, `{"$ref":"`+ref+`"}`, nil)
	}
}

// Remote references are not fetched.
func TestHTTPRefIsNotFetched(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	for _, schema := range []string{
		`{"$ref":"` + srv.URL + `/schema.json"}`,
		`{"$schema":"` + srv.URL + `/meta.json"}`,
		`{"$id":"` + srv.URL + `/base/","properties":{"x":{"$ref":"other.json"}}}`,
	} {
		wantRefused(t, schema, nil, srv.URL)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the server got %d requests", n)
	}
}

// The exponential chain is refused when compiled, naming the limit; before
// the fix it compiled, and validating one call took 2^n evaluations.
func TestExponentialChainIsRefused(t *testing.T) {
	wantRefused(t, allOfChain(40), nil, "subschemas", "limit", "tools.max_schema_steps")
	// A smaller chain fits the default limit, and not a lower one.
	if err := validate(t, mustCompile(t, allOfChain(8)), `{"a":1}`); err != nil {
		t.Fatalf("chain of 8: %v", err)
	}
	wantRefused(t, allOfChain(8), func(l *Limits) { l.MaxSteps = 100 }, "limit of 100 steps")
}

// A schema within the limits still refuses a value that would take more
// steps than the limit, before validating it.
func TestStepsBoundEachValue(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"xs":{"type":"array","items":{"$ref":"#/$defs/d0"}}},"$defs":{`+allOfDefs(6)+`}}`)
	if err := validate(t, s, `{"xs":[{}]}`); err != nil {
		t.Fatalf("one item: %v", err)
	}
	err := validate(t, s, `{"xs":`+jsonList("{}", 10000)+`}`)
	var serr *StepsError
	if !errors.As(err, &serr) {
		t.Fatalf("10000 items: %v, want a *StepsError", err)
	}
	if serr.Limit != int64(limits.MaxSteps) {
		t.Errorf("10000 items: Limit = %d, want %d", serr.Limit, limits.MaxSteps)
	}
	if serr.Steps <= serr.Limit {
		t.Errorf("10000 items: Steps = %d, want more than the limit, %d", serr.Steps, serr.Limit)
	}
	if want := "steps, more than the limit of 500000"; !strings.Contains(err.Error(), want) {
		t.Errorf("10000 items: %v, want it to say %q", err, want)
	}
}

// Recursive schemas whose branches name distinct members stay linear, and
// are not refused.
func TestRecursiveTreeIsAccepted(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"v":{"type":"integer"},"left":{"$ref":"#"},"right":{"$ref":"#"}}}`)
	tree := `{"v":1}`
	for range 40 {
		tree = `{"v":1,"left":` + tree + `,"right":{"v":2}}`
	}
	if err := validate(t, s, tree); err != nil {
		t.Fatalf("tree: %v", err)
	}
	err := validate(t, s, `{"left":{"right":{"v":"x"}}}`)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(schemaerr.Describe(ve, ""), "/left/right/v") {
		t.Fatalf("bad tree: %v", err)
	}
}

// The cost is analysed down to the deepest a value may nest.
func TestCostIsAnalysedToMaxParamsDepth(t *testing.T) {
	list := `{"type":"object","properties":{"next":{"$ref":"#"}}}`
	for _, depth := range []int{8, 100} {
		s, err := compile(t, list, func(l *Limits) { l.MaxParamsDepth = depth })
		if err != nil || len(s.cost.eval) != depth+1 {
			t.Errorf("MaxParamsDepth %d: cost analysed to depth %d, want %d (%v)", depth, len(s.cost.eval)-1, depth, err)
		}
	}
}

func TestSizeDepthAndShape(t *testing.T) {
	big := `{"description":"` + strings.Repeat("x", limits.MaxBytes) + `"}`
	wantRefused(t, big, nil, "bytes", "limit", "tools.max_schema_kb")
	if _, err := compile(t, big, func(l *Limits) { l.MaxBytes *= 2 }); err != nil {
		t.Fatalf("with a larger limit: %v", err)
	}
	deep := strings.Repeat(`{"not":`, 100) + `{}` + strings.Repeat(`}`, 100)
	wantRefused(t, deep, nil, "nested more than 64", "tools.max_schema_depth")
	wantRefused(t, deep, func(l *Limits) { l.MaxDepth = 10 }, "nested more than 10")
	for schema, want := range map[string]string{
		`{"multipleOf":1e-100000}`:                      "number",
		`{"maximum":1e400}`:                             "number",
		`{"minimum":0.` + strings.Repeat("1", 40) + `}`: "number",
		`{"$ref":"#"}`:                                  "loop back",
		`{"$defs":{"a":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`: "loop back",
		`{"$defs":{"n":{"$dynamicAnchor":"node"}},"properties":{"a":{"$dynamicRef":"#node"}}}`:  "$dynamicRef",
		// The library reads counts as an int: 1e308 became a limit no string met.
		`{"properties":{"s":{"type":"string","maxLength":1e308}}}`: "maxLength",
		`{"minItems":2147483648}`:                                  "minItems",
		`{"maxProperties":1.5}`:                                    "maxProperties",
		`{"maxContains":-1}`:                                       "maxContains",
		`{"type":"object",}`:                                       "not JSON",
		`{"type":"nothing"}`:                                       "breaks the rules of JSON Schema",
	} {
		wantRefused(t, schema, nil, want)
	}
	// Counts written as whole numbers in another form are whole numbers, and
	// a value (an enum's, a default's) is not a schema; before the fix
	// these were refused.
	for _, schema := range []string{
		`{"properties":{"s":{"type":"string","maxLength":5.0}}}`,
		`{"maxItems":1e2,"minItems":0.0,"maxProperties":2147483647.0}`,
		`{"enum":[{"maxLength":1.5}],"const":{"minItems":-1},"default":{"maxItems":2.5},"examples":[{"maxContains":1e300}]}`,
		`{"properties":{"maxLength":{"type":"string"},"minItems":{"type":"integer"}},"$defs":{"maxItems":{}}}`,
	} {
		if _, err := compile(t, schema); err != nil {
			t.Errorf("%s: %v", schema, err)
		}
	}
	var ve *jsonschema.ValidationError
	if err := validate(t, mustCompile(t, `{"properties":{"s":{"type":"string","maxLength":5.0}}}`), `{"s":"toolong"}`); !errors.As(err, &ve) {
		t.Errorf("maxLength 5.0 let 7 characters through: %v", err)
	}
	// A property named after a data keyword holds a schema all the same.
	wantRefused(t, `{"properties":{"enum":{"maxLength":1e308}}}`, nil, "maxLength")
	wantRefused(t, `{"items":{"maxLength":2147483647.5}}`, nil, "maxLength")
}

// BenchmarkAllOfChain measures validating one value against the largest
// chain the default limit admits with one member (15 links, about 2^17
// evaluations), and refusing a 40-link one (2^41 before the fix: days).
func BenchmarkAllOfChain(b *testing.B) {
	b.Run("admitted-15", func(b *testing.B) {
		s := mustCompile(b, allOfChain(15))
		for b.Loop() {
			if err := validate(b, s, `{"a":1}`); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("refused-40", func(b *testing.B) {
		for b.Loop() {
			if _, err := Compile(allOfChain(40), limits); err == nil {
				b.Fatal("admitted")
			}
		}
	})
}

// regexFormatSchema declares draft-07, as many MCP tool schemas do: the
// library asserts "format" for it, and "regex" compiles each value.
const regexFormatSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
	"properties":{"rules":{"type":"array","items":{"type":"string","format":"regex"}}}}`

// A model reply holding thousands of costly patterns in a "format": "regex"
// field is refused before any is compiled; before the fix it was not
// charged, and 20,000 copies of this pattern held the host for 7 s.
func TestRegexFormatIsCharged(t *testing.T) {
	s := mustCompile(t, regexFormatSchema)
	if err := validate(t, s, `{"rules":["^[a-z]+$","\\d{3}"]}`); err != nil {
		t.Fatalf("two small patterns: %v", err)
	}
	var ve *jsonschema.ValidationError
	if err := validate(t, s, `{"rules":["("]}`); !errors.As(err, &ve) || !strings.Contains(schemaerr.Describe(ve, ""), "regex") {
		t.Fatalf("a bad pattern: %v, want a violation of the format", err)
	}
	var serr *StepsError
	if err := validate(t, s, `{"rules":`+jsonList(`"[\\p{L}\\p{N}\\p{P}]{1000}"`, 2000)+`}`); !errors.As(err, &serr) {
		t.Fatalf("2,000 costly patterns: %v, want a *StepsError", err)
	}
}

// Each pattern compiled, the schema's or a value's, is bounded in length
// and in program size, with an error naming the setting.
func TestPatternsAreBounded(t *testing.T) {
	long := strings.Repeat("a", limits.MaxPatternBytes+1)
	expands := strings.Repeat(`.{0,1000}`, 10) // 81 bytes, 20,000 instructions
	for pattern, want := range map[string]string{long: "tools.max_pattern_kb", expands: "tools.max_pattern_insts"} {
		for _, schema := range []string{
			`{"properties":{"s":{"type":"string","pattern":` + strconv.Quote(pattern) + `}}}`,
			`{"patternProperties":{` + strconv.Quote(pattern) + `:{}}}`,
			// Draft-04's metaschema does not check the names: the compiler does.
			`{"$schema":"http://json-schema.org/draft-04/schema#","patternProperties":{` + strconv.Quote(pattern) + `:{}}}`,
		} {
			if err := wantRefused(t, schema, nil, want); len(err.Error()) > 1000 {
				t.Fatalf("error of %d bytes: %.200s", len(err.Error()), err)
			}
		}
		var ve *jsonschema.ValidationError
		err := validate(t, mustCompile(t, regexFormatSchema), `{"rules":[`+strconv.Quote(pattern)+`]}`)
		if !errors.As(err, &ve) || !strings.Contains(schemaerr.Describe(ve, ""), want) {
			t.Fatalf("a value: %v, want a violation naming %s", err, want)
		}
	}
	if _, err := compile(t, `{"properties":{"s":{"pattern":`+strconv.Quote(expands)+`}}}`, func(l *Limits) { l.MaxPatternInsts = 30_000 }); err != nil {
		t.Fatalf("with a larger limit: %v", err)
	}
}

// BenchmarkRegexFormat measures the costliest value the default step limit
// admits of the reviewer's pattern in a "format": "regex" field (640
// copies, about 493,000 steps), which should take well under a third of a second.
func BenchmarkRegexFormat(b *testing.B) {
	s := mustCompile(b, regexFormatSchema)
	rules := `{"rules":` + jsonList(`"[\\p{L}\\p{N}\\p{P}]{1000}"`, 640) + `}`
	for b.Loop() {
		if err := validate(b, s, rules); err != nil {
			b.Fatal(err)
		}
	}
}
