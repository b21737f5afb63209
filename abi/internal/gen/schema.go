package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"unicode"

	"github.com/morphhost/morph/abi"
)

// The JSON Schemas of abi/schema are written by hand, for their
// descriptions; what is mechanical in them (the properties, their JSON
// types, the required list) a skeleton gives: for each payload type of
// abi.Exports, and each abi struct type they hold, that has no schema
// file yet, the generator writes one whose descriptions are to be filled
// in. It never overwrites a file.

const (
	schemaDialect = "https://json-schema.org/draft/2020-12/schema"
	schemaBase    = "https://morph.dev/abi/v1/"
	// todo marks what a skeleton leaves to its author.
	todo = "TODO: "
)

// schemaFile is the file under abi/schema of a payload type:
// BeforeRunInput, before_run_input.json.
func schemaFile(t reflect.Type) string {
	var b strings.Builder
	name := t.Name()
	for i, r := range name {
		// An upper-case letter starts a word unless it continues an
		// initialism (HTTPRequest: http_request).
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rune(name[i-1])) ||
			i+1 < len(name) && unicode.IsLower(rune(name[i+1]))) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String() + ".json"
}

var rawMessage = reflect.TypeOf(json.RawMessage(nil))

// abiStruct reports whether t is a struct type of package abi, which has
// a schema file of its own.
func abiStruct(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t.PkgPath() == reflect.TypeOf(abi.Hook{}).PkgPath()
}

// payloads are the payload types of abi.Exports, each once, with the
// description a skeleton of it starts from.
func payloads() ([]reflect.Type, map[reflect.Type]string) {
	var order []reflect.Type
	desc := map[reflect.Type]string{}
	add := func(t reflect.Type, d string) {
		if _, seen := desc[t]; !seen {
			order, desc[t] = append(order, t), d
		}
	}
	doc := map[string]string{}
	for _, h := range abi.Hooks {
		doc[h.Export] = h.Doc
	}
	for _, e := range abi.Exports {
		if e.Input != nil {
			d := fmt.Sprintf("The input of %s: %s", e.Name, doc[e.Name])
			if e.Output == nil {
				d += " The hook observes; its output is empty."
			}
			add(e.Input, strings.TrimSpace(d))
		}
		if e.Output != nil {
			add(e.Output, fmt.Sprintf("The output of %s. %swhat it may change.", e.Name, todo))
		}
	}
	return order, desc
}

// skeletons writes into dir a skeleton schema of each payload type that
// has no file there, and of each abi struct type a new one holds that has
// none either, and returns the files written. A type of an existing
// schema is not looked into: its schema says where its parts are (a file,
// or $defs).
func skeletons(dir string) ([]string, error) {
	types, desc := payloads()
	var wrote []string
	var visit func(t reflect.Type, d string) error
	visit = func(t reflect.Type, d string) error {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		path := filepath.Join(dir, schemaFile(t))
		if !abiStruct(t) {
			return nil
		}
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		b, err := skeleton(t, d)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
		wrote = append(wrote, path)
		for i := 0; i < t.NumField(); i++ {
			ft := t.Field(i).Type
			if err := visit(ft, todo+"what a "+ft.String()+" is."); err != nil {
				return err
			}
		}
		return nil
	}
	for _, t := range types {
		if err := visit(t, desc[t]); err != nil {
			return wrote, err
		}
	}
	return wrote, nil
}

// field is a property of a skeleton, in the Go type's field order.
type field struct {
	name   string
	schema map[string]any
}

// skeleton is the schema of t: its JSON properties, with their JSON types,
// in field order, and as required the fields without omitempty.
func skeleton(t reflect.Type, description string) ([]byte, error) {
	var props []field
	required := []string{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := typeSchema(f.Type)
		s["description"] = todo + "what " + name + " is."
		props = append(props, field{name, s})
		if !strings.Contains(","+opts+",", ",omitempty,") {
			required = append(required, name)
		}
	}
	// Written by hand, not from a map, to keep the keys in the order of
	// the hand-written schemas and the properties in field order.
	var b bytes.Buffer
	for _, kv := range []struct {
		k string
		v any
	}{{"$schema", schemaDialect}, {"$id", schemaBase + schemaFile(t)}, {"title", t.Name()},
		{"description", description}, {"type", "object"}} {
		v, _ := json.Marshal(kv.v)
		fmt.Fprintf(&b, "%q:%s,", kv.k, v)
	}
	b.WriteString(`"properties":{`)
	for i, p := range props {
		v, err := json.Marshal(p.schema)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", p.name, v)
	}
	b.WriteString("}")
	if len(required) > 0 {
		v, _ := json.Marshal(required)
		fmt.Fprintf(&b, `,"required":%s`, v)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, []byte("{"+b.String()+"}"), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// typeSchema is the JSON type of a Go field's type: a $ref for an abi
// struct, any JSON for interface and json.RawMessage values.
func typeSchema(t reflect.Type) map[string]any {
	if t == rawMessage {
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeSchema(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem())}
	case reflect.Map:
		s := map[string]any{"type": "object", "additionalProperties": true}
		if t.Elem().Kind() != reflect.Interface {
			s["additionalProperties"] = typeSchema(t.Elem())
		}
		return s
	case reflect.Struct:
		if abiStruct(t) {
			return map[string]any{"$ref": schemaFile(t)}
		}
	}
	return map[string]any{} // interface: any JSON value
}
