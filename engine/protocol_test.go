package engine

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/morphhost/morph/llm"
)

// TestResponseSchemaMatchesProtocol checks that ResponseSchema compiles and
// accepts each example of the prompt's response format, which ParseResponse
// reads, and refuses an object of no protocol type.
func TestResponseSchemaMatchesProtocol(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(ResponseSchema)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("protocol.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("protocol.json")
	if err != nil {
		t.Fatal(err)
	}
	var examples int
	for _, line := range strings.Split(responseFormat, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		examples++
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(line))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("example %s: %v", line, err)
		}
		if _, err := ParseResponse(llmResult(line)); err != nil {
			t.Errorf("example %s does not parse: %v", line, err)
		}
	}
	if examples != 3 {
		t.Errorf("found %d examples in the response format, want 3", examples)
	}
	bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"type":"answer"}`))
	if sch.Validate(bad) == nil {
		t.Error(`{"type":"answer"} validates`)
	}
	if responseSchema.Name == "" || string(responseSchema.Schema) != string(ResponseSchema) {
		t.Errorf("request schema %+v", responseSchema)
	}
}

func llmResult(text string) llm.Result { return llm.Result{Text: text} }
