package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/morphhost/morph/abi"
)

// schemaShape is what a skeleton decides of a schema.
type schemaShape struct {
	Title      string                     `json:"title"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
}

// propertyType is a property's "type": a name, or a list of names (a
// nullable field's ["array", "null"]); nil without one ($ref, any).
func propertyType(t *testing.T, raw json.RawMessage) []string {
	var p struct {
		Type json.RawMessage `json:"type"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	var one string
	if json.Unmarshal(p.Type, &one) == nil {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(p.Type, &many)
	return many
}

// The skeleton of each payload type agrees with the schema written by hand
// from it: the same properties with the same JSON types, and nothing
// required that the skeleton leaves optional (the hand may require less).
func TestSkeletonsAgreeWithTheSchemas(t *testing.T) {
	types, desc := payloads()
	if len(types) == 0 {
		t.Fatal("no payload types in abi.Exports")
	}
	for _, typ := range types {
		committed, err := os.ReadFile(filepath.Join(root, "abi", "schema", schemaFile(typ)))
		if err != nil {
			t.Errorf("%s: %v", typ.Name(), err)
			continue
		}
		generated, err := skeleton(typ, desc[typ])
		if err != nil {
			t.Fatal(err)
		}
		var hand, gen schemaShape
		if err := json.Unmarshal(committed, &hand); err != nil {
			t.Fatalf("%s: %v", schemaFile(typ), err)
		}
		if err := json.Unmarshal(generated, &gen); err != nil {
			t.Fatalf("the skeleton of %s is no JSON: %v", typ.Name(), err)
		}
		if gen.Title != hand.Title {
			t.Errorf("%s: title %q, the skeleton's %q", schemaFile(typ), hand.Title, gen.Title)
		}
		for name, g := range gen.Properties {
			h, ok := hand.Properties[name]
			if !ok {
				t.Errorf("%s: no property %s, which the skeleton has", schemaFile(typ), name)
				continue
			}
			gt, ht := propertyType(t, g), propertyType(t, h)
			if len(gt) == 1 && !slices.Contains(ht, gt[0]) {
				t.Errorf("%s: property %s of type %v, the skeleton's %v", schemaFile(typ), name, ht, gt)
			}
		}
		for name := range hand.Properties {
			if _, ok := gen.Properties[name]; !ok {
				t.Errorf("%s: property %s, which the skeleton lacks", schemaFile(typ), name)
			}
		}
		for _, name := range hand.Required {
			if !slices.Contains(gen.Required, name) {
				t.Errorf("%s: requires %s, which the skeleton leaves optional (omitempty)", schemaFile(typ), name)
			}
		}
	}
}

// In a directory of no schemas, skeletons writes one per payload type and
// per abi struct type they hold, each valid JSON naming its type; a second
// run writes nothing, overwriting no schema.
func TestSkeletonsWriteOnlyMissing(t *testing.T) {
	dir := t.TempDir()
	wrote, err := skeletons(dir)
	if err != nil {
		t.Fatal(err)
	}
	types, _ := payloads()
	if len(wrote) <= len(types) {
		t.Errorf("wrote %d skeletons for %d payload types: the types they hold (Usage, ToolSpec, ...) are missing", len(wrote), len(types))
	}
	for _, path := range wrote {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var s schemaShape
		if err := json.Unmarshal(b, &s); err != nil || s.Title == "" {
			t.Errorf("%s: %v, title %q", path, err, s.Title)
		}
	}
	for _, want := range []string{"usage.json", "plan_step.json", "message.json"} {
		if !slices.Contains(wrote, filepath.Join(dir, want)) {
			t.Errorf("no skeleton %s among %v", want, wrote)
		}
	}
	again, err := skeletons(dir)
	if err != nil || len(again) != 0 {
		t.Errorf("a second run wrote %v, %v; want nothing", again, err)
	}
}

// A type's file is its name in snake_case, an initialism one word.
func TestSchemaFile(t *testing.T) {
	for typ, want := range map[reflect.Type]string{
		reflect.TypeOf(abi.HTTPRequest{}):         "http_request.json",
		reflect.TypeOf(abi.BeforeToolCallInput{}): "before_tool_call_input.json",
		reflect.TypeOf(abi.Final{}):               "final.json",
	} {
		if got := schemaFile(typ); got != want {
			t.Errorf("schemaFile(%v) = %q, want %q", typ, got, want)
		}
	}
}
