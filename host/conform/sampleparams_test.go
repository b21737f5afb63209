package conform

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/morphhost/morph/engine"
)

func TestSampleParams(t *testing.T) {
	cases := []struct{ schema, want string }{
		{``, `{}`},
		{`true`, `{}`},
		{`{}`, `{}`},
		{`{"type":"object","additionalProperties":false}`, `{}`},
		{`{"type":"object","properties":{"text":{"type":"string"},"opt":{"type":"integer"}},"required":["text"]}`, `{"text":"sample"}`},
		{`{"properties":{"a":{}},"required":["a"]}`, `{"a":"sample"}`},
		{`{"type":"object","required":["i","n","b","x","l","e","c","d","ex"],"properties":{
			"i":{"type":"integer","minimum":5},"n":{"type":"number","maximum":0.5},"b":{"type":"boolean"},"x":{"type":["null","string"]},
			"l":{"type":"array","items":{"type":"integer","exclusiveMinimum":1.5},"minItems":2},"e":{"enum":["red","green"]},
			"c":{"const":42},"d":{"type":"string","default":"dflt"},"ex":{"type":"string","examples":["exa"]}}}`,
			`{"b":true,"c":42,"d":"dflt","e":"red","ex":"exa","i":5,"l":[3,3],"n":0.5,"x":"sample"}`},
		{`{"type":"object","required":["long","short","mail","when","url"],"properties":{
			"long":{"type":"string","minLength":10},"short":{"type":"string","maxLength":3},"mail":{"type":"string","format":"email"},
			"when":{"type":"string","format":"date-time"},"url":{"type":"string","format":"uri"}}}`,
			`{"long":"samplessss","mail":"sample@example.com","short":"sam","url":"https://example.com/sample","when":"2025-01-02T03:04:05Z"}`},
		{`{"type":"object","required":["p"],"properties":{"p":{"$ref":"#/$defs/point"}},
			"$defs":{"point":{"type":"object","required":["x","y"],"properties":{"x":{"type":"number"},"y":{"type":"number"}}}}}`,
			`{"p":{"x":1,"y":1}}`},
		{`{"type":"object","required":["v"],"properties":{"v":{"anyOf":[{"type":"integer"},{"type":"string"}]}}}`, `{"v":1}`},
		{`{"allOf":[{"type":"object","required":["a"],"properties":{"a":{"type":"boolean"}}},{"required":["b"]}]}`, `{"a":true,"b":"sample"}`},
		{`{"minProperties":3,"properties":{"z":{"type":"integer"},"a":{"type":"boolean"}},"additionalProperties":{"type":"integer","minimum":7}}`,
			`{"a":true,"sample_1":7,"z":1}`},
		{`{"type":"object","required":["n"],"properties":{"n":{"type":"integer","minimum":1e308}}}`, `{"n":1e+308}`},
	}
	for _, c := range cases {
		got, err := SampleParams(json.RawMessage(c.schema))
		if err != nil {
			t.Errorf("%s: %v", c.schema, err)
			continue
		}
		b, _ := json.Marshal(got)
		if string(b) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.schema, b, c.want)
		}
		if c.schema == "" || c.schema == "true" {
			continue
		}
		reg := engine.NewRegistry()
		reg.Register(fakeTool{"t", c.schema})
		if err := reg.Validate("t", got); err != nil {
			t.Errorf("%s: the sample %s does not satisfy it: %v", c.schema, b, err)
		}
	}
	for schema, want := range map[string]string{
		`[1]`:                   "not a JSON object",
		`{"type":"string"}`:     "describes a JSON string, not an object",
		`{"$ref":"other.json"}`: "only references within the schema",
		`{"$ref":"#"}`:          "nests deeper than 16 levels",
		`{"type":`:              "not JSON",
	} {
		if _, err := SampleParams(json.RawMessage(schema)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", schema, err, want)
		}
	}
}

// A tool's schema is the plugin's: whatever it asks for, the sampler
// answers quickly with a sample or an ErrUnsampleable error naming the
// keyword, where it is and the bound, and never panics.
func TestConformSampleBounds(t *testing.T) {
	prop := func(s string) string { return `{"type":"object","required":["p"],"properties":{"p":` + s + `}}` }
	// levels of fan required properties, each a $ref to the next level, down to leaf
	fanOut := func(levels, fan int, leaf string) string {
		defs := make([]string, 0, levels+1)
		for i := range levels {
			props := make([]string, fan)
			names := make([]string, fan)
			for j := range fan {
				names[j] = fmt.Sprintf(`"p%d"`, j)
				props[j] = fmt.Sprintf(`"p%d":{"$ref":"#/$defs/l%d"}`, j, i+1)
			}
			defs = append(defs, fmt.Sprintf(`"l%d":{"type":"object","required":[%s],"properties":{%s}}`, i, strings.Join(names, ","), strings.Join(props, ",")))
		}
		defs = append(defs, fmt.Sprintf(`"l%d":%s`, levels, leaf))
		return `{"$ref":"#/$defs/l0","$defs":{` + strings.Join(defs, ",") + `}}`
	}
	many := func(n int, f func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = f(i)
		}
		return strings.Join(parts, ",")
	}
	longName := strings.Repeat("n", 100_000)
	bigConst := `{"const":"` + strings.Repeat("c", 100_000) + `"}`
	cases := []struct{ name, schema, want string }{
		{"minLength 9e18", prop(`{"type":"string","minLength":9e18}`), "minLength 9e+18: the sample would be larger than 65536 bytes (at #/properties/p)"},
		{"minLength 1e308", prop(`{"type":"string","minLength":1e308}`), "minLength 1e+308: the sample"},
		{"minLength 1e5", prop(`{"type":"string","minLength":100000}`), "minLength 100000: the sample"},
		{"minItems 1e10", prop(`{"type":"array","minItems":1e10}`), "minItems 1e+10: the sample would be larger than 65536 bytes (at #/properties/p)"},
		{"minItems of big items", prop(`{"type":"array","minItems":5000,"items":{"type":"string","minLength":100}}`), "larger than 65536 bytes (at #/properties/p/items)"},
		{"minProperties 1e9", `{"type":"object","minProperties":1e9}`, "minProperties 1e+09: the sample would be larger than 65536 bytes (at #)"},
		{"fan-out", fanOut(4, 16, `{"type":"integer"}`), "larger than 65536 bytes (at #/$defs/l"},
		{"fan-out of a const", fanOut(6, 16, `{"const":"`+strings.Repeat("x", 256)+`"}`), "larger than 65536 bytes (at #/$defs/l6/const)"},
		{"$ref cycle", `{"type":"object","required":["a","b"],"properties":{"a":{"$ref":"#"},"b":{"$ref":"#"}}}`, "nests deeper than 16 levels"},
		{"long required list", `{"type":"object","required":[` + many(20_000, func(i int) string { return fmt.Sprintf(`"r%d"`, i) }) + `]}`, "larger than 65536 bytes (at #)"},
		{"huge const", prop(bigConst), "larger than 65536 bytes (at #/properties/p/const)"},
		{"huge enum value", prop(`{"enum":["` + strings.Repeat("e", 100_000) + `","b"]}`), "larger than 65536 bytes (at #/properties/p/enum/0)"},
		{"huge default", prop(`{"type":"string","default":"` + strings.Repeat("d", 100_000) + `"}`), "(at #/properties/p/default)"},
		{"long property name", `{"type":"object","required":["` + longName + `"]}`, "larger than 65536 bytes (at #)"},
		{"nested 100 deep", strings.Repeat(`{"type":"object","required":["p"],"properties":{"p":`, 50) + `{}` + strings.Repeat(`}}`, 50), "nested more than 64 levels"},
		{"deep $ref name", fanOut(1, 1, prop(prop(`{"type":"string","minLength":1e9}`))), "(at #/$defs/l1/properties/p/properties/p)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := SampleParams(json.RawMessage(c.schema))
			if !errors.Is(err, ErrUnsampleable) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("sample %.200v, error %.300v; want ErrUnsampleable saying %q", got, err, c.want)
			}
			if len(err.Error()) > 500 {
				t.Errorf("the error is %d bytes long", len(err.Error()))
			}
		})
	}
	// Out-of-range numbers give a sample, or one the validation rejects, but no panic.
	for _, schema := range []string{
		prop(`{"type":"string","maxLength":1e308}`), prop(`{"type":"string","maxLength":-1e308}`), prop(`{"type":"string","minLength":-1e308}`),
		prop(`{"type":"integer","exclusiveMaximum":-1e308}`), prop(`{"type":"integer","maximum":1e308,"minimum":1e308}`),
		prop(`{"type":"array","minItems":-1e308}`), `{"type":"object","minProperties":-1}`,
		prop(`{"type":"string","pattern":"^(a|aa)+$","minLength":3}`),
	} {
		if _, err := SampleParams(json.RawMessage(schema)); err != nil {
			t.Errorf("%s: %v", schema, err)
		}
	}

	// Each visit of a wide allOf copies its 20,000 properties: the clock
	// stops the sampler long before the size would.
	wide := `{"allOf":[{"properties":{` + many(20_000, func(i int) string { return fmt.Sprintf(`"w%d":{}`, i) }) + `}}]}`
	mid := `{"type":"object","required":[` + many(90, func(i int) string { return fmt.Sprintf(`"m%d"`, i) }) + `],"properties":{` +
		many(90, func(i int) string { return fmt.Sprintf(`"m%d":{"$ref":"#/$defs/wide"}`, i) }) + `}}`
	slow := `{"type":"object","required":[` + many(90, func(i int) string { return fmt.Sprintf(`"a%d"`, i) }) + `],"properties":{` +
		many(90, func(i int) string { return fmt.Sprintf(`"a%d":{"$ref":"#/$defs/mid"}`, i) }) + `},"$defs":{"wide":` + wide + `,"mid":` + mid + `}}`
	if _, err := SampleParams(json.RawMessage(slow)); !errors.Is(err, ErrUnsampleable) || !strings.Contains(err.Error(), "took longer than 500ms") {
		t.Fatalf("a slow schema: %v", err)
	}
}

// SampleParams never panics and never returns a sample beyond its bound,
// whatever the schema.
func FuzzSampleParams(f *testing.F) {
	for _, seed := range []string{
		`{"type":"object","required":["s"],"properties":{"s":{"type":"string","minLength":9e18,"maxLength":1e308}}}`,
		`{"type":"object","required":["a"],"properties":{"a":{"type":"array","minItems":3,"items":{"$ref":"#"}}}}`,
		`{"allOf":[{"$ref":"#/$defs/x"}],"$defs":{"x":{"required":["y"],"minProperties":2}}}`,
		`{"type":["null","object"],"required":["i"],"properties":{"i":{"type":"integer","exclusiveMinimum":1e308}}}`,
		`{"anyOf":[{"const":{"k":[1,2,3]}}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		v, err := SampleParams(schema)
		if err != nil {
			return
		}
		if b, _ := json.Marshal(v); len(b) > 2*maxSampleBytes {
			t.Fatalf("a sample of %d bytes", len(b))
		}
	})
}
