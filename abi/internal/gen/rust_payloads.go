package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"reflect"
	"sort"
	"strings"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/abi/schema"
)

// The Rust PDK's payload structs (guests/rust/src/payloads.rs, included by
// types.rs) are the Go payload types of abi.Exports and the abi struct
// types they hold, field for field, by these rules:
//
//   - a field is named by its json tag; a Rust keyword (final) is a raw
//     identifier with a serde rename;
//   - string, bool, int and float64 are String, bool, i64 and f64; any and
//     json.RawMessage are serde_json's Value; map[string]any is the crate's
//     Object, another map[string]V a BTreeMap<String, V>; []T is Vec<T>;
//   - a pointer is an Option, left out when None if the field is omitempty;
//   - another omitempty field is an Option left out when None, except a
//     bool, which is left out when false (is_false);
//   - a slice or map without omitempty reads null as empty (nullable): Go
//     encodes a nil one as null, and the ABI's decoding is lenient.
//
// Every struct derives Debug, Clone, Default, PartialEq, Serialize and
// Deserialize, and reads a missing field as its default (serde(default)).
// The docs are the JSON Schemas' descriptions (abi/schema), which abi's
// schema tests require of every type and property, unlike Go doc comments.

// rustHandWritten are payload types types.rs writes by hand, which the
// generated file leaves out (and does not look into), with why.
var rustHandWritten = map[reflect.Type]string{
	// Its Deserialize reads the bare-string form of a step and defaults
	// the status to pending, as abi.PlanStep's UnmarshalJSON does.
	reflect.TypeOf(abi.PlanStep{}): "custom Deserialize",
}

// rustEmptyIsAbsent are omitempty fields, by type and field, that are
// their plain Rust type left out when empty rather than an Option: each
// was added to a type plugins already built with struct literals, and an
// empty value means the same as an absent one on the wire, so an Option
// would give "none" two spellings and break those literals.
var rustEmptyIsAbsent = map[string]bool{
	"ToolCallInput.CallID":  true, // call_id: String, "" from a host that sends none
	"ToolCallOutput.Images": true, // images: Vec<Image>, none
}

// rustKeywords are Rust's keywords (2021 edition, reserved ones included)
// that a raw identifier can spell: a json name among them is r#name.
var rustKeywords = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields("as async await break const continue dyn else enum extern false fn for if impl in let " +
		"loop match mod move mut pub ref return static struct trait true try type unsafe use where while " +
		"abstract become box do final macro override priv typeof unsized virtual yield") {
		m[k] = true
	}
	return m
}()

// rustPayloads adds guests/rust/src/payloads.rs to files, and the samples
// of its types that the crate's schema test checks against their schemas
// (rustSamples).
func rustPayloads(files map[string][]byte) error {
	docs, err := schemaDocs(schema.FS)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString(header + "\n")
	b.WriteString("// The payload structs of ABI v1, from the Go types of package abi and the\n" +
		"// descriptions of their JSON Schemas (abi/schema); included by types.rs,\n" +
		"// whose imports and helpers (Object, nullable, is_false, PlanStep) they use.\n")
	used := map[string]bool{}
	seen := map[reflect.Type]bool{}
	decls := map[string][]rustDecl{} // by struct
	var generated []reflect.Type
	var visit func(t reflect.Type) error
	visit = func(t reflect.Type) error {
		if seen[t] || rustHandWritten[t] != "" {
			return nil
		}
		seen[t] = true
		generated = append(generated, t)
		doc, ok := docs[t.Name()]
		if !ok || strings.TrimSpace(doc.description) == "" {
			return fmt.Errorf("abi.%s has no described JSON Schema in abi/schema (a file, or a $defs entry titled %[1]s): "+
				"the Rust PDK's struct takes its docs from it; if gen just wrote its skeleton, fill that in and run it again", t.Name())
		}
		b.WriteString("\n" + wrap("/// ", mdEscape(doc.description), 100))
		b.WriteString("#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]\n#[serde(default)]\n")
		fmt.Fprintf(&b, "pub struct %s {\n", t.Name())
		var nested []reflect.Type
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" || f.Anonymous {
				return fmt.Errorf("abi.%s.%s: a payload field needs a json name, and cannot be embedded", t.Name(), f.Name)
			}
			fd := doc.properties[name]
			if strings.TrimSpace(fd) == "" {
				return fmt.Errorf("abi.%s.%s: its JSON Schema has no description of %q", t.Name(), f.Name, name)
			}
			key := t.Name() + "." + f.Name
			if rustEmptyIsAbsent[key] {
				used[key] = true
			}
			d, err := rustField(f, name, strings.Contains(","+opts+",", ",omitempty,"), rustEmptyIsAbsent[key])
			if err != nil {
				return fmt.Errorf("abi.%s.%s: %w", t.Name(), f.Name, err)
			}
			b.WriteString(wrap("    /// ", mdEscape(fd), 100) + d.String())
			decls[t.Name()] = append(decls[t.Name()], d)
			nested = append(nested, structsIn(f.Type)...)
		}
		b.WriteString("}\n")
		for _, n := range nested {
			if err := visit(n); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range abi.Exports {
		for _, t := range []reflect.Type{e.Input, e.Output} {
			if t == nil {
				continue
			}
			if err := visit(t); err != nil {
				return err
			}
		}
	}
	for key := range rustEmptyIsAbsent {
		if !used[key] {
			return fmt.Errorf("rustEmptyIsAbsent names %s, which is no omitempty field of a payload type", key)
		}
	}
	files["guests/rust/src/payloads.rs"] = b.Bytes()
	files["guests/rust/tests/schema/payloads.rs"] = rustSamples(generated, decls)
	return nil
}

// rustDecl is a field of a Rust payload struct.
type rustDecl struct {
	ident, ty string
	attrs     []string // of its serde attribute
}

// String is the field's declaration, with its serde attribute.
func (d rustDecl) String() string {
	var b strings.Builder
	if len(d.attrs) > 0 {
		fmt.Fprintf(&b, "    #[serde(%s)]\n", strings.Join(d.attrs, ", "))
	}
	fmt.Fprintf(&b, "    pub %s: %s,\n", d.ident, d.ty)
	return b.String()
}

// rustField is the Rust field of a Go payload type's field.
func rustField(f reflect.StructField, name string, omitempty, emptyIsAbsent bool) (rustDecl, error) {
	t, pointer := f.Type, f.Type.Kind() == reflect.Pointer
	if pointer {
		t = t.Elem()
	}
	ty, err := rustType(t)
	if err != nil {
		return rustDecl{}, err
	}
	var attrs []string
	ident := name
	if rustKeywords[name] {
		ident = "r#" + name
		attrs = append(attrs, fmt.Sprintf("rename = %q", name))
	}
	collection := (t.Kind() == reflect.Slice || t.Kind() == reflect.Map) && t != rawMessage
	switch {
	case pointer:
		ty = "Option<" + ty + ">"
		if omitempty {
			attrs = append(attrs, `skip_serializing_if = "Option::is_none"`)
		}
	case emptyIsAbsent && omitempty:
		empty := map[reflect.Kind]string{reflect.String: "String", reflect.Slice: "Vec"}[t.Kind()]
		if empty == "" {
			return rustDecl{}, fmt.Errorf("listed in rustEmptyIsAbsent, but %s has no is_empty the generator knows", ty)
		}
		attrs = append(attrs, fmt.Sprintf(`skip_serializing_if = "%s::is_empty"`, empty))
	case emptyIsAbsent:
		return rustDecl{}, fmt.Errorf("listed in rustEmptyIsAbsent without omitempty")
	case omitempty && t.Kind() == reflect.Bool:
		attrs = append(attrs, `skip_serializing_if = "is_false"`)
	case omitempty:
		ty = "Option<" + ty + ">"
		attrs = append(attrs, `skip_serializing_if = "Option::is_none"`)
	case collection:
		attrs = append(attrs, `deserialize_with = "nullable"`)
	}
	return rustDecl{ident, ty, attrs}, nil
}

// rustType is the Rust type of a Go payload type.
func rustType(t reflect.Type) (string, error) {
	if t == rawMessage {
		return "Value", nil
	}
	switch t.Kind() {
	case reflect.Interface:
		return "Value", nil
	case reflect.String:
		return "String", nil
	case reflect.Bool:
		return "bool", nil
	case reflect.Int, reflect.Int64:
		return "i64", nil
	case reflect.Float64:
		return "f64", nil
	case reflect.Slice:
		elem, err := rustType(t.Elem())
		return "Vec<" + elem + ">", err
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			break
		}
		if t.Elem().Kind() == reflect.Interface {
			return "Object", nil
		}
		elem, err := rustType(t.Elem())
		return "BTreeMap<String, " + elem + ">", err
	case reflect.Struct:
		if abiStruct(t) {
			return t.Name(), nil
		}
	}
	return "", fmt.Errorf("no Rust type for Go's %s (abi/internal/gen's rustType)", t)
}

// structsIn are the abi struct types t is or holds.
func structsIn(t reflect.Type) []reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if abiStruct(t) {
		return []reflect.Type{t}
	}
	return nil
}

// typeDoc is what the JSON Schema of a type says of it and of each of its
// properties.
type typeDoc struct {
	description string
	properties  map[string]string
}

// schemaDocs are the descriptions of the schemas of fsys, by title: every
// file's and every $defs entry's.
func schemaDocs(fsys fs.FS) (map[string]typeDoc, error) {
	type node struct {
		Title       string                     `json:"title"`
		Description string                     `json:"description"`
		Properties  map[string]json.RawMessage `json:"properties"`
		Defs        map[string]json.RawMessage `json:"$defs"`
	}
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	docs := map[string]typeDoc{}
	var add func(file string, raw []byte) error
	add = func(file string, raw []byte) error {
		var n node
		if err := json.Unmarshal(raw, &n); err != nil {
			return fmt.Errorf("abi/schema/%s: %w", file, err)
		}
		if _, dup := docs[n.Title]; dup {
			return fmt.Errorf("abi/schema/%s: a second schema titled %s", file, n.Title)
		}
		if n.Title != "" {
			d := typeDoc{description: n.Description, properties: map[string]string{}}
			for name, p := range n.Properties {
				var pd struct {
					Description string `json:"description"`
				}
				if err := json.Unmarshal(p, &pd); err != nil {
					return fmt.Errorf("abi/schema/%s: %s: %w", file, name, err)
				}
				d.properties[name] = pd.Description
			}
			docs[n.Title] = d
		}
		for _, def := range n.Defs {
			if err := add(file, def); err != nil {
				return err
			}
		}
		return nil
	}
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		if err := add(name, raw); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// mdEscape escapes what rustdoc's Markdown would read as markup in a
// schema's plain-text description: <plugin> as an HTML tag, [llm] as a
// link, graph.* as emphasis.
func mdEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "`", "\\`", "*", `\*`, "[", `\[`, "]", `\]`, "<", `\<`, ">", `\>`).Replace(s)
}
