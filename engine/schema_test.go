package engine

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
	"time"
)

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

// within runs fn and fails the test if it takes longer than a bound no
// correct implementation comes near (the attacks it guards against hang).
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return within 30s", what)
	}
}

// checkSchema compiles schema as the tool "probe" and returns the error,
// failing the test if it takes (hangs) more than the bound.
func checkSchema(t *testing.T, schema string, limits ...SchemaLimits) error {
	t.Helper()
	r := registry(&testTool{name: "probe", schema: schema})
	if len(limits) > 0 {
		r.SetSchemaLimits(limits[0])
	}
	var err error
	within(t, "compiling the schema", func() { err = r.Check() })
	return err
}

func wantInvalidSchema(t *testing.T, err error, contains ...string) {
	t.Helper()
	if !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("error %v, want ErrInvalidSchema", err)
	}
	for _, s := range append(contains, `"probe"`) {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not mention %s", err, s)
		}
	}
}

// A schema that refers to a file must not make the host read it: the file
// here is a valid schema whose enum would otherwise reach the model.
func TestSchemaFileRefIsNotRead(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte(`{"enum":["CANARY-7f3a"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := "file://" + filepath.ToSlash(secret)
	r := registry(&testTool{name: "probe", schema: `{"type":"object","properties":{"x":{"$ref":"` + ref + `"}}}`})
	err := r.Check()
	wantInvalidSchema(t, err, ref, "outside itself")
	verr := r.Validate("probe", map[string]any{"x": "guess"})
	for _, e := range []error{err, verr} {
		if e == nil || strings.Contains(e.Error(), "CANARY") {
			t.Fatalf("error %v: want a refusal that does not quote the file", e)
		}
	}
}

// A reference to standard input (or any file that blocks on open) must be
// refused without opening it.
func TestSchemaStdinRefDoesNotBlock(t *testing.T) {
	for _, ref := range []string{"file:///dev/stdin", "/dev/stdin"} {
		err := checkSchema(t, `{"$ref":"`+ref+`"}`)
		if !errors.Is(err, ErrInvalidSchema) {
			t.Fatalf("%s: error %v, want ErrInvalidSchema", ref, err)
		}
	}
}

// Remote references are not fetched.
func TestSchemaHTTPRefIsNotFetched(t *testing.T) {
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
		wantInvalidSchema(t, checkSchema(t, schema), srv.URL)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the server got %d requests", n)
	}
}

// The exponential chain is refused when compiled, naming the limit; before
// the fix it compiled, and validating one call took 2^n evaluations.
func TestSchemaExponentialChainIsRefused(t *testing.T) {
	r := registry(&testTool{name: "probe", schema: allOfChain(40)})
	var err, verr error
	within(t, "checking and validating the chain", func() {
		err = r.Check()
		verr = r.Validate("probe", map[string]any{"a": 1})
	})
	wantInvalidSchema(t, err, "subschemas", "limit")
	if !errors.Is(verr, ErrInvalidSchema) {
		t.Fatalf("Validate = %v, want the schema's error", verr)
	}
	// A smaller chain fits the default limit, and not a lower one.
	if err := checkSchema(t, allOfChain(8)); err != nil {
		t.Fatalf("chain of 8: %v", err)
	}
	wantInvalidSchema(t, checkSchema(t, allOfChain(8), SchemaLimits{MaxSteps: 100}), "limit of 100 steps")
}

// A schema within the limits still refuses a call whose parameters would
// take more steps than the limit, before validating them.
func TestSchemaStepsBoundEachCall(t *testing.T) {
	r := registry(&testTool{name: "probe", schema: `{"type":"object","properties":{"xs":{"type":"array","items":{"$ref":"#/$defs/d0"}}},"$defs":{` + allOfDefs(6) + `}}`})
	if err := r.Validate("probe", map[string]any{"xs": []any{map[string]any{}}}); err != nil {
		t.Fatalf("one item: %v", err)
	}
	many := make([]any, 10000)
	for i := range many {
		many[i] = map[string]any{}
	}
	err := r.Validate("probe", map[string]any{"xs": many})
	if !errors.Is(err, ErrInvalidParams) || !strings.Contains(err.Error(), "steps") {
		t.Fatalf("10000 items: %v, want ErrInvalidParams over the step limit", err)
	}
}

// Recursive schemas whose branches name distinct members stay linear, and
// are not refused.
func TestSchemaRecursiveTreeIsAccepted(t *testing.T) {
	r := registry(&testTool{name: "probe", schema: `{"type":"object","properties":{"v":{"type":"integer"},"left":{"$ref":"#"},"right":{"$ref":"#"}}}`})
	var tree any = map[string]any{"v": 1}
	for range 40 {
		tree = map[string]any{"v": 1, "left": tree, "right": map[string]any{"v": 2}}
	}
	if err := r.Validate("probe", tree.(map[string]any)); err != nil {
		t.Fatalf("tree: %v", err)
	}
	bad := map[string]any{"left": map[string]any{"right": map[string]any{"v": "x"}}}
	if err := r.Validate("probe", bad); !errors.Is(err, ErrInvalidParams) || !strings.Contains(err.Error(), "/left/right/v") {
		t.Fatalf("bad tree: %v", err)
	}
}

func TestSchemaSizeDepthAndShape(t *testing.T) {
	big := `{"description":"` + strings.Repeat("x", DefaultMaxSchemaBytes) + `"}`
	wantInvalidSchema(t, checkSchema(t, big), "bytes", "limit")
	if err := checkSchema(t, big, SchemaLimits{MaxBytes: 2 * DefaultMaxSchemaBytes}); err != nil {
		t.Fatalf("with a larger limit: %v", err)
	}
	deep := strings.Repeat(`{"not":`, 100) + `{}` + strings.Repeat(`}`, 100)
	wantInvalidSchema(t, checkSchema(t, deep), "nested more than 64")
	wantInvalidSchema(t, checkSchema(t, deep, SchemaLimits{MaxDepth: 10}), "nested more than 10")
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
	} {
		wantInvalidSchema(t, checkSchema(t, schema), want)
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
		if err := checkSchema(t, schema); err != nil {
			t.Errorf("%s: %v", schema, err)
		}
	}
	r := registry(&testTool{name: "probe", schema: `{"properties":{"s":{"type":"string","maxLength":5.0}}}`})
	if err := r.Validate("probe", map[string]any{"s": "toolong"}); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("maxLength 5.0 let 7 characters through: %v", err)
	}
	// A property named after a data keyword holds a schema all the same.
	wantInvalidSchema(t, checkSchema(t, `{"properties":{"enum":{"maxLength":1e308}}}`), "maxLength")
	wantInvalidSchema(t, checkSchema(t, `{"items":{"maxLength":2147483647.5}}`), "maxLength")
}

// One call breaking an enum at thousands of places gets a bounded message.
func TestViolationsAreBounded(t *testing.T) {
	enum := `["` + strings.Repeat("v", 4000) + `"]`
	r := registry(&testTool{name: "probe", schema: `{"type":"object","properties":{"xs":{"type":"array","items":{"enum":` + enum + `}}}}`})
	xs := make([]any, 2000)
	for i := range xs {
		xs[i] = "nope"
	}
	err := r.Validate("probe", map[string]any{"xs": xs})
	if !errors.Is(err, ErrInvalidParams) || len(err.Error()) > 10*(300+40)+100 || !strings.Contains(err.Error(), "and 1990 more") {
		t.Fatalf("error of %d bytes: %.300s", len(err.Error()), err)
	}
}

// BenchmarkAllOfChain measures validating one call against the largest
// chain the default limit admits with one member (15 links, about 2^17 evaluations), and
// refusing a 40-link one (2^41 before the fix: days).
func BenchmarkAllOfChain(b *testing.B) {
	b.Run("admitted-15", func(b *testing.B) {
		r := registry(&testTool{name: "probe", schema: allOfChain(15)})
		for b.Loop() {
			if err := r.Validate("probe", map[string]any{"a": 1}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("refused-40", func(b *testing.B) {
		for b.Loop() {
			if err := registry(&testTool{name: "probe", schema: allOfChain(40)}).Check(); err == nil {
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
func TestSchemaRegexFormatIsCharged(t *testing.T) {
	r := registry(&testTool{name: "probe", schema: regexFormatSchema})
	if err := r.Check(); err != nil {
		t.Fatalf("a draft-07 schema is refused: %v", err)
	}
	if err := r.Validate("probe", map[string]any{"rules": []any{`^[a-z]+$`, `\d{3}`}}); err != nil {
		t.Fatalf("two small patterns: %v", err)
	}
	if err := r.Validate("probe", map[string]any{"rules": []any{`(`}}); !errors.Is(err, ErrInvalidParams) || !strings.Contains(err.Error(), "regex") {
		t.Fatalf("a bad pattern: %v, want ErrInvalidParams", err)
	}
	rules := make([]any, 2000)
	for i := range rules {
		rules[i] = `[\p{L}\p{N}\p{P}]{1000}`
	}
	var err error
	within(t, "validating 2,000 patterns", func() { err = r.Validate("probe", map[string]any{"rules": rules}) })
	if !errors.Is(err, ErrInvalidParams) || !strings.Contains(err.Error(), "steps, more than the limit") {
		t.Fatalf("2,000 costly patterns: %v, want ErrInvalidParams over the step limit", err)
	}
}

// Each pattern compiled, the schema's or a value's, is bounded in length
// and in program size, with an error naming the setting.
func TestSchemaPatternsAreBounded(t *testing.T) {
	long := strings.Repeat("a", DefaultMaxPatternBytes+1)
	expands := strings.Repeat(`.{0,1000}`, 10) // 81 bytes, 20,000 instructions
	for pattern, want := range map[string]string{long: "tools.max_pattern_kb", expands: "tools.max_pattern_insts"} {
		for _, schema := range []string{
			`{"properties":{"s":{"type":"string","pattern":` + strconv.Quote(pattern) + `}}}`,
			`{"patternProperties":{` + strconv.Quote(pattern) + `:{}}}`,
			// Draft-04's metaschema does not check the names: the compiler does.
			`{"$schema":"http://json-schema.org/draft-04/schema#","patternProperties":{` + strconv.Quote(pattern) + `:{}}}`,
		} {
			err := checkSchema(t, schema)
			wantInvalidSchema(t, err, want)
			if len(err.Error()) > 1000 {
				t.Fatalf("error of %d bytes: %.200s", len(err.Error()), err)
			}
		}
		r := registry(&testTool{name: "probe", schema: regexFormatSchema})
		if err := r.Validate("probe", map[string]any{"rules": []any{pattern}}); !errors.Is(err, ErrInvalidParams) || !strings.Contains(err.Error(), want) {
			t.Fatalf("a value: %v, want ErrInvalidParams naming %s", err, want)
		}
	}
	if err := checkSchema(t, `{"properties":{"s":{"pattern":`+strconv.Quote(expands)+`}}}`, SchemaLimits{MaxPatternInsts: 30_000}); err != nil {
		t.Fatalf("with a larger limit: %v", err)
	}
}

// BenchmarkRegexFormat measures the costliest call the default step limit
// admits of the reviewer's pattern in a "format": "regex" field (640
// copies, about 493,000 steps), which should take well under a third of a second.
func BenchmarkRegexFormat(b *testing.B) {
	r := registry(&testTool{name: "probe", schema: regexFormatSchema})
	rules := make([]any, 640)
	for i := range rules {
		rules[i] = `[\p{L}\p{N}\p{P}]{1000}`
	}
	for b.Loop() {
		if err := r.Validate("probe", map[string]any{"rules": rules}); err != nil {
			b.Fatal(err)
		}
	}
}
