package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

// Each mapping rule of the Rust payload structs, one field per rule: the
// Rust type and serde attribute a Go field's type and json tag give.
func TestRustFieldRules(t *testing.T) {
	type sample struct {
		Name     string            `json:"name"`
		Model    string            `json:"model,omitempty"`
		Steps    int               `json:"steps,omitempty"`
		Cost     float64           `json:"cost"`
		Deny     bool              `json:"deny,omitempty"`
		Plain    bool              `json:"plain"`
		Tools    []string          `json:"tools"`
		Risks    []string          `json:"risks,omitempty"`
		Input    map[string]any    `json:"input"`
		Attrs    map[string]string `json:"attrs"`
		Output   any               `json:"output"`
		Params   json.RawMessage   `json:"params"`
		Plan     *abi.Plan         `json:"plan,omitempty"`
		Out      *string           `json:"out"`
		Final    string            `json:"final,omitempty"`
		History  []abi.Message     `json:"history,omitempty"`
		Previous abi.Usage         `json:"previous"`
	}
	want := map[string]string{
		"Name":     "pub name: String,",
		"Model":    `#[serde(skip_serializing_if = "Option::is_none")] pub model: Option<String>,`,
		"Steps":    `#[serde(skip_serializing_if = "Option::is_none")] pub steps: Option<i64>,`,
		"Cost":     "pub cost: f64,",
		"Deny":     `#[serde(skip_serializing_if = "is_false")] pub deny: bool,`,
		"Plain":    "pub plain: bool,",
		"Tools":    `#[serde(deserialize_with = "nullable")] pub tools: Vec<String>,`,
		"Risks":    `#[serde(skip_serializing_if = "Option::is_none")] pub risks: Option<Vec<String>>,`,
		"Input":    `#[serde(deserialize_with = "nullable")] pub input: Object,`,
		"Attrs":    `#[serde(deserialize_with = "nullable")] pub attrs: BTreeMap<String, String>,`,
		"Output":   "pub output: Value,",
		"Params":   "pub params: Value,",
		"Plan":     `#[serde(skip_serializing_if = "Option::is_none")] pub plan: Option<Plan>,`,
		"Out":      "pub out: Option<String>,",
		"Final":    `#[serde(rename = "final", skip_serializing_if = "Option::is_none")] pub r#final: Option<String>,`,
		"History":  `#[serde(skip_serializing_if = "Option::is_none")] pub history: Option<Vec<Message>>,`,
		"Previous": "pub previous: Usage,",
	}
	st := reflect.TypeOf(sample{})
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		d, err := rustField(f, name, opts == "omitempty", false)
		if err != nil {
			t.Errorf("%s: %v", f.Name, err)
			continue
		}
		if got := strings.Join(strings.Fields(d.String()), " "); got != want[f.Name] {
			t.Errorf("%s: got %s, want %s", f.Name, got, want[f.Name])
		}
	}

	// The exceptions of rustEmptyIsAbsent: the plain type, left out when empty.
	for _, c := range []struct {
		field reflect.StructField
		want  string
	}{
		{st.Field(1), `#[serde(skip_serializing_if = "String::is_empty")] pub model: String,`},
		{st.Field(7), `#[serde(skip_serializing_if = "Vec::is_empty")] pub risks: Vec<String>,`},
	} {
		name, _, _ := strings.Cut(c.field.Tag.Get("json"), ",")
		d, err := rustField(c.field, name, true, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(strings.Fields(d.String()), " "); got != c.want {
			t.Errorf("%s, empty is absent: got %s, want %s", c.field.Name, got, c.want)
		}
	}
}

// A field the generator has no rule for stops it, naming the field, rather
// than becoming a Rust type that does not match the wire.
func TestRustFieldRefusesWhatItCannotMap(t *testing.T) {
	type sample struct {
		Count  uint8           `json:"count"`
		Keyed  map[int]string  `json:"keyed"`
		Input  map[string]any  `json:"input,omitempty"`
		Plain  string          `json:"plain"`
		Nested struct{ X int } `json:"nested"`
	}
	st := reflect.TypeOf(sample{})
	for i, c := range []struct {
		omitempty, emptyIsAbsent bool
	}{{}, {}, {true, true}, {false, true}, {}} {
		f := st.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if d, err := rustField(f, name, c.omitempty, c.emptyIsAbsent); err == nil {
			t.Errorf("%s: got %q, want an error", f.Name, d)
		}
	}
}
