package schemaerr

import (
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A violation's pointer and reason quote what a guest or a model wrote: its property
// names are written as RFC 6901 tokens ("/" as "~1", "~" as "~0") and
// escaped for a terminal, and a long list of violations is cut.
func TestDescribeEscapes(t *testing.T) {
	c := jsonschema.NewCompiler()
	doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"additionalProperties":{"type":"string"}}`))
	if err := c.AddResource("https://morph.dev/abi/v1/test.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("https://morph.dev/abi/v1/test.json")
	if err != nil {
		t.Fatal(err)
	}
	validate := func(inst string) string {
		t.Helper()
		v, _ := jsonschema.UnmarshalJSON(strings.NewReader(inst))
		var ve *jsonschema.ValidationError
		if err := sch.Validate(v); !errors.As(err, &ve) {
			t.Fatalf("%s: %v, want a validation error", inst, err)
		}
		return Describe(ve, "https://morph.dev/abi/v1/")
	}
	got := validate(`{"a/b~c\u001b[31m\u202e":1}`)
	if want := `at /a~1b~0c\x1b[31m\u202e: got number, want string (test.json#/additionalProperties/type)`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var many []string
	for i := range maxViolations + 3 {
		many = append(many, `"k`+strings.Repeat("x", i)+`":1`)
	}
	got = validate("{" + strings.Join(many, ",") + "}")
	if n := strings.Count(got, "got number"); n != maxViolations {
		t.Errorf("%d violations described, want %d: %s", n, maxViolations, got)
	}
	if !strings.HasSuffix(got, "; and 3 more") {
		t.Errorf("the cut list does not end in how many more: %s", got)
	}
}

// Without a base (a model fixing its tool call), a pattern is named, as
// the model needs it, and a format failure says what was wanted, not the
// value; neither names a schema location.
func TestDescribeForAModel(t *testing.T) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"properties":{"id":{"pattern":"^[a-z]+$"},"at":{"format":"date-time"}}}`))
	if err := c.AddResource("tool.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("tool.json")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"id":"ABC","at":"yesterday"}`))
	var ve *jsonschema.ValidationError
	if err := sch.Validate(v); !errors.As(err, &ve) {
		t.Fatalf("%v, want a validation error", err)
	}
	got := Describe(ve, "")
	for _, want := range []string{"at /id: does not match the pattern ^[a-z]+$", "at /at: not a valid date-time: "} {
		if !strings.Contains(got, want) {
			t.Errorf("got %s\nwant it to hold %q", got, want)
		}
	}
	if strings.Contains(got, "ABC") || strings.Contains(got, "(") {
		t.Errorf("got %s: want neither the value nor a schema location", got)
	}
}
