package main

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"

	"github.com/morphhost/morph/abi/schema"
)

// rustSamples is guests/rust/tests/schema/payloads.rs, which the Rust
// PDK's schema test (tests/schema.rs) includes: for each generated payload
// type with a schema file of its own, reading a value into it by the
// file's name, its zero value, and a value with every field set, so that a
// payload type added in Go is checked against its schema in Rust without
// a hand-written sample. types are the generated structs, in order, decls
// their fields by struct name.
func rustSamples(types []reflect.Type, decls map[string][]rustDecl) []byte {
	var withFile []reflect.Type
	for _, t := range types {
		if _, ok := schema.File(t); ok {
			withFile = append(withFile, t)
		}
	}
	var b bytes.Buffer
	b.WriteString(header + "\n")
	b.WriteString("// Samples of the payload types generated from abi's Go types (src/payloads.rs)\n" +
		"// that have a schema file, for schema.rs, which includes this file (and whose\n" +
		"// imports and roundtrip helper, rt, they use).\n\n")
	b.WriteString("/// Reads v into the generated payload type of schema file, and writes it back;\n" +
		"/// None for a file of no generated type.\n" +
		"fn generated_roundtrip(file: &str, v: &Value) -> Option<Result<Value, String>> {\n" +
		"    Some(match file {\n")
	for _, t := range withFile {
		file, _ := schema.File(t)
		fmt.Fprintf(&b, "        %q => rt::<%s>(v),\n", file, t.Name())
	}
	b.WriteString("        _ => return None,\n    })\n}\n\n")
	b.WriteString("/// The zero value of each generated payload type, by schema file.\n" +
		"fn generated_zero_samples() -> Vec<(&'static str, Value)> {\n    vec![\n")
	for _, t := range withFile {
		file, _ := schema.File(t)
		fmt.Fprintf(&b, "        (%q, serde_json::to_value(%s::default()).unwrap()),\n", file, t.Name())
	}
	b.WriteString("    ]\n}\n\n")
	b.WriteString("/// A value of each generated payload type with every field set, by schema file.\n" +
		"fn generated_full_samples() -> Vec<(&'static str, Value)> {\n    vec![\n")
	for _, t := range withFile {
		file, _ := schema.File(t)
		fmt.Fprintf(&b, "        (%q, serde_json::to_value(%s()).unwrap()),\n", file, fullFn(t))
	}
	b.WriteString("    ]\n}\n")
	generated := map[string]reflect.Type{}
	for _, t := range types {
		generated[t.Name()] = t
	}
	for _, t := range types {
		fmt.Fprintf(&b, "\nfn %s() -> %s {\n    let mut x = %[2]s::default();\n", fullFn(t), t.Name())
		for _, d := range decls[t.Name()] {
			fmt.Fprintf(&b, "    x.%s = %s;\n", d.ident, rustSample(d.ty, generated))
		}
		b.WriteString("    x\n}\n")
	}
	return b.Bytes()
}

// fullFn is the name of the function of a generated type's full sample:
// full_tool_spec.
func fullFn(t reflect.Type) string {
	return "full_" + strings.TrimSuffix(schemaFile(t), ".json")
}

// rustSample is a Rust expression of the Rust type ty (as rustType and
// rustField write them) with every field set: non-empty, Some. A struct
// the generator wrote is its full sample; one types.rs writes by hand, its
// default.
func rustSample(ty string, generated map[string]reflect.Type) string {
	inner := func(prefix string) (string, bool) {
		if strings.HasPrefix(ty, prefix) && strings.HasSuffix(ty, ">") {
			return ty[len(prefix) : len(ty)-1], true
		}
		return "", false
	}
	if elem, ok := inner("Option<"); ok {
		return "Some(" + rustSample(elem, generated) + ")"
	}
	if elem, ok := inner("Vec<"); ok {
		return "vec![" + rustSample(elem, generated) + "]"
	}
	if elem, ok := inner("BTreeMap<String, "); ok {
		return `[("k".to_string(), ` + rustSample(elem, generated) + ")].into_iter().collect()"
	}
	switch ty {
	case "String":
		return `"s".to_string()`
	case "i64":
		return "1"
	case "f64":
		return "0.5"
	case "bool":
		return "true"
	case "Value":
		return `json!({"k": 1})`
	case "Object":
		return `json!({"k": 1}).as_object().unwrap().clone()`
	}
	if t, ok := generated[ty]; ok {
		return fullFn(t) + "()"
	}
	return ty + "::default()"
}
