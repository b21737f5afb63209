package abi

// The JSON Schemas under schema/ describe the same payloads as the Go types of
// this package. These tests keep the two in step by reflection: every json
// field of a Go payload type is a property of its schema and the other way
// round, with the same JSON type, and the schema's required list is exactly
// the fields without omitempty (minus the exceptions listed below, each with
// its reason). They also check that every schema file and every payload type
// is covered, and validate sample payloads (from SPEC.md and built from the Go
// types) against the schemas with a small validator of the keywords the
// schemas use.
//
// Standard library only: package abi must not depend on anything else, tests
// included.

import (
	"github.com/morphhost/morph/abi/schema"

	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

const (
	schemaDir     = "schema"
	schemaBase    = "https://morph.dev/abi/v1/"
	schemaDialect = "https://json-schema.org/draft/2020-12/schema"
)

// schemaTable pairs every payload type with its schema: a file of schemaDir,
// optionally with a JSON pointer fragment into it. The payloads of the
// exports (Exports: the hooks', the tools', the lifecycle's) are paired by
// their schema's file name (schema.File); the types they nest are listed.
var schemaTable = append(exportSchemas(), []schemaEntry{
	{"tool_spec.json", reflect.TypeFor[ToolSpec]()},
	{"usage.json", reflect.TypeFor[Usage]()},
	{"run_options.json", reflect.TypeFor[RunOptions]()},
	{"plan.json", reflect.TypeFor[Plan]()},
	{"plan.json#/$defs/plan_step", reflect.TypeFor[PlanStep]()},
	{"tool_call_output.json#/$defs/image", reflect.TypeFor[Image]()},
	{"tool_call_output.json#/$defs/content", reflect.TypeFor[Content]()},
	{"message.json", reflect.TypeFor[Message]()},
	{"http_request.json", reflect.TypeFor[HTTPRequest]()},
	{"http_response.json", reflect.TypeFor[HTTPResponse]()},
}...)

type schemaEntry struct {
	ref string
	typ reflect.Type
}

// exportSchemas pairs the input and output types of Exports with their
// schema files, by name (schema.File), once each; a type without its file
// is listed with the file it should have, which TestSchemaCoverage reports
// missing.
func exportSchemas() []schemaEntry {
	var out []schemaEntry
	seen := map[reflect.Type]bool{}
	for _, e := range Exports {
		for _, t := range []reflect.Type{e.Input, e.Output} {
			if t == nil || seen[t] {
				continue
			}
			seen[t] = true
			name, _ := schema.File(t)
			out = append(out, schemaEntry{name, t})
		}
	}
	return out
}

// notRequired lists the fields ("Type.json_name") that have no omitempty but
// that the schema deliberately leaves out of required, with the reason.
var notRequired = map[string]string{
	"ParamsOutput.parameters": "SPEC.md §2 reads an empty result as the zero payload and §4 says the output's keys override the base parameters: no parameters means no override",
}

// nullable lists the fields whose schema also admits null, with the reason.
// Only nil-able Go kinds (slice, map, pointer) may be listed.
var nullable = map[string]string{
	"Manifest.hooks":             "a Go guest's nil Hooks (no omitempty) encodes as null, which the host reads as no hooks: a plugin that only serves tools",
	"ParamsOutput.parameters":    "a Go guest's nil Parameters (no omitempty) encodes as null, which the host reads as no override",
	"BeforeRunOutput.tools":      "SPEC.md section 10.1: absent or null leaves the tools unchanged; a guest whose serializer writes an unset list as null (serde's Option without skip_serializing_if) sends it",
	"BeforeToolCallOutput.input": "SPEC.md section 10.1: absent or null leaves the params unchanged; a guest whose serializer writes an unset map as null sends it",
	"AfterToolCallOutput.output": "Output is a *string so that absent (unchanged) differs from \"\" (rewritten to empty); null decodes to the same nil pointer as absent, so a guest may send it to mean unchanged",
}

// rawJSON gives the JSON type of each json.RawMessage field ("any": any
// JSON value, which the schema must not constrain).
var rawJSON = map[string]string{
	"ToolSpec.parameters":       "object", // a JSON Schema object
	"ToolCallOutput.structured": "any",    // any JSON value (MCP's structuredContent)
}

// altForms lists the struct types that also decode from non-object JSON, with
// the extra JSON types and the reason; their schema is a oneOf of an object
// branch and one branch per extra type.
var altForms = map[reflect.Type]struct {
	types  []string
	reason string
}{
	reflect.TypeFor[PlanStep](): {[]string{"string"}, "PlanStep.UnmarshalJSON reads a bare string as a pending step"},
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// ---- loading and resolving schemas ----

// schemaSet is every schema file of schemaDir, by $id.
type schemaSet struct {
	docs map[string]any // $id -> decoded document
}

// snode is a schema node and where it is: its document's $id and a JSON
// pointer into that document.
type snode struct {
	v   any // map[string]any, or bool for a boolean schema
	doc string
	ptr string
}

func (n snode) m() map[string]any { m, _ := n.v.(map[string]any); return m }

// uri is the node's absolute URI, doc#pointer.
func (n snode) uri() string {
	if n.ptr == "" {
		return n.doc
	}
	return n.doc + "#" + n.ptr
}

// String names the node as a file and a pointer: abi/schema/plan.json#/properties/steps.
func (n snode) String() string {
	name := strings.TrimPrefix(n.doc, schemaBase)
	return "abi/" + schemaDir + "/" + name + "#" + n.ptr
}

// at is the child node reached by the keys path.
func (n snode) at(keys ...string) snode {
	v := n.v
	for _, k := range keys {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				v = nil
			} else {
				v = x[i]
			}
		default:
			v = nil
		}
		n.ptr += "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
	}
	n.v = v
	return n
}

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err == nil {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func loadSchemas(t *testing.T) *schemaSet {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no schema files in abi/%s (err %v)", schemaDir, err)
	}
	ss := &schemaSet{docs: map[string]any{}}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		v, err := decodeJSON(b)
		if err != nil {
			t.Errorf("abi/%s: not valid JSON: %v", filepath.ToSlash(p), err)
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			t.Errorf("abi/%s: not a JSON object", filepath.ToSlash(p))
			continue
		}
		id, _ := m["$id"].(string)
		if want := schemaBase + filepath.Base(p); id != want {
			t.Errorf("abi/%s: $id is %q, want %q", filepath.ToSlash(p), id, want)
			id = want // resolve by file name anyway, so refs still work
		}
		ss.docs[id] = m
	}
	return ss
}

// resolve returns the node ref points to, relative to the document of from.
func (ss *schemaSet) resolve(from snode, ref string) (snode, error) {
	base, err := url.Parse(from.doc)
	if err != nil {
		return snode{}, err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return snode{}, fmt.Errorf("bad $ref %q: %v", ref, err)
	}
	abs := base.ResolveReference(r)
	frag := abs.Fragment
	abs.Fragment = ""
	doc, ok := ss.docs[abs.String()]
	if !ok {
		return snode{}, fmt.Errorf("$ref %q: no schema file has $id %q", ref, abs.String())
	}
	n := snode{v: doc, doc: abs.String()}
	if frag == "" {
		return n, nil
	}
	if !strings.HasPrefix(frag, "/") {
		return snode{}, fmt.Errorf("$ref %q: only JSON pointer fragments are supported", ref)
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		n = n.at(strings.NewReplacer("~1", "/", "~0", "~").Replace(tok))
		if n.v == nil {
			return snode{}, fmt.Errorf("$ref %q: %s does not exist", ref, n)
		}
	}
	return n, nil
}

// lookup resolves a schemaTable ref.
func (ss *schemaSet) lookup(ref string) (snode, error) {
	return ss.resolve(snode{doc: schemaBase}, ref)
}

// annotations may sit beside $ref without changing what the node accepts.
var annotations = map[string]bool{"$ref": true, "$schema": true, "$id": true, "$comment": true, "$defs": true,
	"title": true, "description": true, "examples": true, "default": true, "deprecated": true, "readOnly": true, "writeOnly": true}

// deref follows $ref, returning the node that constrains the value. A $ref
// beside assertion keywords is refused, so that the reflection checks see
// every constraint.
func (ss *schemaSet) deref(n snode) (snode, error) {
	for range 16 {
		m := n.m()
		ref, ok := m["$ref"].(string)
		if !ok {
			return n, nil
		}
		for k := range m {
			if !annotations[k] {
				return n, fmt.Errorf("%s: $ref beside the assertion keyword %q; move it into the referenced schema", n, k)
			}
		}
		target, err := ss.resolve(n, ref)
		if err != nil {
			return n, fmt.Errorf("%s: %v", n, err)
		}
		n = target
	}
	return n, fmt.Errorf("%s: $ref chain too long", n)
}

// schemaTypes is the node's "type" as a list.
func schemaTypes(n snode) ([]string, error) {
	switch t := n.m()["type"].(type) {
	case nil:
		return nil, nil
	case string:
		return []string{t}, nil
	case []any:
		var out []string
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("%s: type lists a non-string %v", n, x)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%s: type is %v, neither a string nor a list", n, t)
	}
}

// ---- the Go side ----

type jsonField struct {
	name      string // json name
	goName    string // Go field name, for messages
	typ       reflect.Type
	omitempty bool
}

// jsonFields are the fields encoding/json encodes for t, in order, with
// untagged embedded structs flattened.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := false
		for _, o := range strings.Split(opts, ",") {
			omit = omit || o == "omitempty" || o == "omitzero"
		}
		out = append(out, jsonField{name: name, goName: t.Name() + "." + f.Name, typ: f.Type, omitempty: omit})
	}
	return out
}

// ---- the reflection check ----

type checker struct {
	t      *testing.T
	ss     *schemaSet
	byType map[reflect.Type]string // URI of each table type's schema
}

func (c *checker) errorf(n snode, format string, args ...any) {
	c.t.Helper()
	c.t.Errorf("%s: %s", n, fmt.Sprintf(format, args...))
}

// expectType checks that n's type is exactly want, or [want, "null"] when
// the field is listed in nullable.
func (c *checker) expectType(n snode, goDesc string, gt reflect.Type, want, field string) {
	c.t.Helper()
	got, err := schemaTypes(n)
	if err != nil {
		c.t.Error(err)
		return
	}
	wantList := []string{want}
	if nullable[field] != "" {
		wantList = append(wantList, "null")
	}
	if !sameSet(got, wantList) {
		extra := ""
		if slices.Contains(got, "null") && nullable[field] == "" {
			extra = fmt.Sprintf(" (to admit null, list %q in nullable with a reason)", field)
		}
		c.errorf(n, "%s is %s: want type %s, the schema has %s%s", goDesc, gt, fmtTypes(wantList), fmtTypes(got), extra)
	}
}

// checkValue checks that the schema node n describes the JSON of Go type gt.
// field is "Type.json_name" when n is a property of a struct.
func (c *checker) checkValue(n snode, gt reflect.Type, field, goDesc string) {
	c.t.Helper()
	if gt.Kind() == reflect.Pointer {
		c.checkValue(n, gt.Elem(), field, goDesc) // encoded as what it points to
		return
	}
	refd, orig := n.m()["$ref"] != nil, n
	n, err := c.ss.deref(n)
	if err != nil {
		c.t.Error(err)
		return
	}
	if gt == rawMessageType {
		want, ok := rawJSON[field]
		if !ok {
			c.errorf(n, "%s is json.RawMessage: list %q in rawJSON with its JSON type", goDesc, field)
			return
		}
		if want != "any" {
			c.expectType(n, goDesc, gt, want, field)
			return
		}
		gt = reflect.TypeFor[any]() // checked as an interface's value is
	}
	switch gt.Kind() {
	case reflect.Interface:
		for _, k := range []string{"type", "enum", "const", "properties", "items", "oneOf", "anyOf", "allOf"} {
			if _, ok := n.m()[k]; ok {
				c.errorf(n, "%s is %s, any JSON value, but the schema constrains it with %q", goDesc, gt, k)
			}
		}
	case reflect.Struct:
		want, inTable := c.byType[gt]
		if refd {
			if !inTable {
				c.errorf(orig, "%s is %s, which has no entry in schemaTable", goDesc, gt)
			} else if n.uri() != want {
				c.errorf(orig, "%s is %s: $ref resolves to %s, want %s", goDesc, gt, strings.TrimPrefix(n.uri(), schemaBase), strings.TrimPrefix(want, schemaBase))
			}
			return // the target is checked as its own table entry
		}
		c.checkStruct(n, gt, field, goDesc)
	case reflect.Slice, reflect.Array:
		if gt.Elem().Kind() == reflect.Uint8 {
			c.expectType(n, goDesc+" (base64)", gt, "string", field)
			return
		}
		c.expectType(n, goDesc, gt, "array", field)
		items := n.at("items")
		if items.v == nil {
			c.errorf(n, "%s is %s but the schema has no items", goDesc, gt)
			return
		}
		c.checkValue(items, gt.Elem(), "", goDesc+" item")
	case reflect.Map:
		if gt.Key().Kind() != reflect.String {
			c.errorf(n, "%s is %s: only string-keyed maps are JSON objects", goDesc, gt)
			return
		}
		c.expectType(n, goDesc, gt, "object", field)
		if _, ok := n.m()["properties"]; ok {
			c.errorf(n, "%s is %s, a map, but the schema lists properties", goDesc, gt)
		}
		ap := n.at("additionalProperties")
		if gt.Elem().Kind() == reflect.Interface {
			switch v := ap.v.(type) {
			case nil:
			case bool:
				if !v {
					c.errorf(n, "%s is %s but additionalProperties is false", goDesc, gt)
				}
			case map[string]any:
				if len(v) != 0 {
					c.errorf(n, "%s is %s, values of any type, but additionalProperties constrains them", goDesc, gt)
				}
			}
			return
		}
		if ap.m() == nil {
			c.errorf(n, "%s is %s but additionalProperties is not a schema of its values", goDesc, gt)
			return
		}
		c.checkValue(ap, gt.Elem(), "", goDesc+" value")
	case reflect.String:
		c.expectType(n, goDesc, gt, "string", field)
	case reflect.Bool:
		c.expectType(n, goDesc, gt, "boolean", field)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		c.expectType(n, goDesc, gt, "integer", field)
	case reflect.Float32, reflect.Float64:
		c.expectType(n, goDesc, gt, "number", field)
	default:
		c.errorf(n, "%s is %s, a kind this test does not map to JSON", goDesc, gt)
	}
}

// checkStruct checks a struct's schema, which is an object schema, or a
// oneOf of one when the type has alternative forms.
func (c *checker) checkStruct(n snode, gt reflect.Type, field, goDesc string) {
	c.t.Helper()
	alt, hasAlt := altForms[gt]
	branchKey := ""
	for _, k := range []string{"oneOf", "anyOf"} {
		if _, ok := n.m()[k]; ok {
			branchKey = k
		}
	}
	if !hasAlt {
		if branchKey != "" {
			c.errorf(n, "%s is %s, an object, but the schema has %s (list the type in altForms if it really has other forms)", goDesc, gt, branchKey)
			return
		}
		c.checkObject(n, gt, field, goDesc)
		return
	}
	if branchKey == "" {
		c.errorf(n, "%s is %s, which also decodes from %v (%s), but the schema is not a oneOf of those forms", goDesc, gt, alt.types, alt.reason)
		return
	}
	if _, ok := n.m()["type"]; ok {
		c.errorf(n, "%s: type beside %s; put it in the branches", goDesc, branchKey)
	}
	branches, _ := n.m()[branchKey].([]any)
	var objects int
	var others []string
	for i := range branches {
		b, err := c.ss.deref(n.at(branchKey, strconv.Itoa(i)))
		if err != nil {
			c.t.Error(err)
			continue
		}
		ts, err := schemaTypes(b)
		if err != nil {
			c.t.Error(err)
			continue
		}
		if slices.Contains(ts, "object") {
			objects++
			c.checkObject(b, gt, field, goDesc)
		} else {
			others = append(others, ts...)
		}
	}
	if objects != 1 {
		c.errorf(n, "%s is %s: want exactly one object branch in %s, found %d", goDesc, gt, branchKey, objects)
	}
	if !sameSet(others, alt.types) {
		c.errorf(n, "%s is %s, whose other forms are %v (%s), but the schema's other branches are %v", goDesc, gt, alt.types, alt.reason, others)
	}
}

// checkObject compares an object schema with the json fields of struct gt.
func (c *checker) checkObject(n snode, gt reflect.Type, field, goDesc string) {
	c.t.Helper()
	c.expectType(n, goDesc, gt, "object", field)
	for _, k := range []string{"additionalProperties", "unevaluatedProperties"} {
		if v, ok := n.m()[k].(bool); ok && !v {
			c.errorf(n, "%s is false: v1 payloads must allow unknown fields (SPEC.md §7)", k)
		}
	}
	props, _ := n.m()["properties"].(map[string]any)
	fields := jsonFields(gt)
	seen := map[string]bool{}
	var wantReq []string
	for _, f := range fields {
		seen[f.name] = true
		key := gt.Name() + "." + f.name
		if !f.omitempty && notRequired[key] == "" {
			wantReq = append(wantReq, f.name)
		}
		p := n.at("properties", f.name)
		if _, ok := props[f.name]; !ok {
			c.errorf(n, "no property %q for Go field %s (%s)", f.name, f.goName, f.typ)
			continue
		}
		if d, _ := p.m()["description"].(string); strings.TrimSpace(d) == "" {
			c.errorf(p, "property %q has no description", f.name)
		}
		c.checkValue(p, f.typ, key, fmt.Sprintf("property %q (Go field %s)", f.name, f.goName))
	}
	for name := range props {
		if !seen[name] {
			c.errorf(n.at("properties", name), "property %q has no json field in Go type %s", name, gt)
		}
	}
	var gotReq []string
	if r, ok := n.m()["required"].([]any); ok {
		for _, x := range r {
			s, _ := x.(string)
			gotReq = append(gotReq, s)
		}
	}
	for _, name := range wantReq {
		if !slices.Contains(gotReq, name) {
			c.errorf(n, "property %q is not in required, but Go field %s.%s has no omitempty (add it, or list %s.%s in notRequired with a reason)",
				name, gt.Name(), goFieldName(fields, name), gt.Name(), name)
		}
	}
	for _, name := range gotReq {
		if slices.Contains(wantReq, name) {
			continue
		}
		switch {
		case !seen[name]:
			c.errorf(n, "required lists %q, which is no json field of %s", name, gt)
		case notRequired[gt.Name()+"."+name] != "":
			c.errorf(n, "required lists %q, but notRequired exempts %s.%s: %s", name, gt.Name(), name, notRequired[gt.Name()+"."+name])
		default:
			c.errorf(n, "required lists %q, but Go field %s.%s is omitempty", name, gt.Name(), goFieldName(fields, name))
		}
	}
	if len(gotReq) != len(slices.Compact(slices.Sorted(slices.Values(gotReq)))) {
		c.errorf(n, "required has duplicates: %v", gotReq)
	}
}

func goFieldName(fields []jsonField, name string) string {
	for _, f := range fields {
		if f.name == name {
			_, after, _ := strings.Cut(f.goName, ".")
			return after
		}
	}
	return name
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Compact(slices.Sorted(slices.Values(a))), slices.Compact(slices.Sorted(slices.Values(b))))
}

func fmtTypes(ts []string) string {
	switch len(ts) {
	case 0:
		return "none"
	case 1:
		return strconv.Quote(ts[0])
	}
	q := make([]string, len(ts))
	for i, s := range ts {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func newChecker(t *testing.T) *checker {
	t.Helper()
	ss := loadSchemas(t)
	c := &checker{t: t, ss: ss, byType: map[reflect.Type]string{}}
	for _, e := range schemaTable {
		n, err := ss.lookup(e.ref)
		if err != nil {
			t.Errorf("schemaTable %s (%s): %v", e.ref, e.typ, err)
			continue
		}
		if prev, dup := c.byType[e.typ]; dup {
			t.Errorf("schemaTable lists %s twice (%s and %s)", e.typ, prev, e.ref)
		}
		c.byType[e.typ] = n.uri()
	}
	return c
}

// ---- tests ----

// TestSchemaMatchesGoTypes compares each schema with its Go type.
func TestSchemaMatchesGoTypes(t *testing.T) {
	c := newChecker(t)
	for _, e := range schemaTable {
		t.Run(e.typ.Name(), func(t *testing.T) {
			c := *c
			c.t = t
			n, err := c.ss.lookup(e.ref)
			if err != nil {
				t.Fatal(err)
			}
			if title, _ := n.m()["title"].(string); title != e.typ.Name() {
				t.Errorf("%s: title is %q, want the Go type's name %q", n, title, e.typ.Name())
			}
			if d, _ := n.m()["description"].(string); strings.TrimSpace(d) == "" {
				t.Errorf("%s: no description", n)
			}
			c.checkStruct(n, e.typ, "", "the payload")
		})
	}
}

// TestSchemaExceptions checks that every exception above names a real field
// of a payload type, of a kind the exception makes sense for, with a reason.
func TestSchemaExceptions(t *testing.T) {
	fieldOf := func(key string) (jsonField, bool) {
		typeName, name, _ := strings.Cut(key, ".")
		for _, e := range schemaTable {
			if e.typ.Name() != typeName {
				continue
			}
			for _, f := range jsonFields(e.typ) {
				if f.name == name {
					return f, true
				}
			}
		}
		return jsonField{}, false
	}
	for key, reason := range notRequired {
		f, ok := fieldOf(key)
		switch {
		case !ok:
			t.Errorf("notRequired[%q]: no such json field of a schemaTable type", key)
		case f.omitempty:
			t.Errorf("notRequired[%q]: %s is omitempty already; drop the exception", key, f.goName)
		case strings.TrimSpace(reason) == "":
			t.Errorf("notRequired[%q]: no reason given", key)
		}
	}
	for key, reason := range nullable {
		f, ok := fieldOf(key)
		switch {
		case !ok:
			t.Errorf("nullable[%q]: no such json field of a schemaTable type", key)
		case !slices.Contains([]reflect.Kind{reflect.Slice, reflect.Map, reflect.Pointer}, f.typ.Kind()) || f.typ == rawMessageType:
			t.Errorf("nullable[%q]: %s is %s, which Go never encodes as null", key, f.goName, f.typ)
		case strings.TrimSpace(reason) == "":
			t.Errorf("nullable[%q]: no reason given", key)
		}
	}
	for key := range rawJSON {
		f, ok := fieldOf(key)
		if !ok || f.typ != rawMessageType {
			t.Errorf("rawJSON[%q]: not a json.RawMessage field of a schemaTable type", key)
		}
	}
	for typ, alt := range altForms {
		if _, ok := reflect.PointerTo(typ).MethodByName("UnmarshalJSON"); !ok {
			t.Errorf("altForms[%s]: the type has no UnmarshalJSON, so it cannot decode from %v", typ, alt.types)
		}
	}
}

// TestSchemaFiles checks each file's header and that every $ref resolves.
func TestSchemaFiles(t *testing.T) {
	ss := loadSchemas(t)
	for id, doc := range ss.docs {
		root := snode{v: doc, doc: id}
		m := root.m()
		if s, _ := m["$schema"].(string); s != schemaDialect {
			t.Errorf("%s: $schema is %q, want %q", root, s, schemaDialect)
		}
		for _, k := range []string{"title", "description"} {
			if s, _ := m[k].(string); strings.TrimSpace(s) == "" {
				t.Errorf("%s: no %s", root, k)
			}
		}
		if ty, _ := m["type"].(string); ty != "object" {
			t.Errorf("%s: type is %v; every payload is a JSON object", root, m["type"])
		}
		var walk func(n snode)
		walk = func(n snode) {
			switch v := n.v.(type) {
			case map[string]any:
				if ref, ok := v["$ref"].(string); ok {
					if _, err := ss.resolve(n, ref); err != nil {
						t.Errorf("%s: %v", n, err)
					}
				}
				if ap, ok := v["additionalProperties"].(bool); ok && !ap {
					t.Errorf("%s: additionalProperties is false: v1 payloads must allow unknown fields (SPEC.md §7)", n)
				}
				for _, k := range slices.Sorted(maps.Keys(v)) {
					if k == "enum" || k == "const" || k == "examples" || k == "default" {
						continue // values, not schemas
					}
					walk(n.at(k))
				}
			case []any:
				for i := range v {
					walk(n.at(strconv.Itoa(i)))
				}
			}
		}
		walk(root)
	}
}

// TestSchemaCoverage checks that no schema file is left out of schemaTable
// and that every exported struct type of the package has a schema, error
// types excepted (see packageStructs).
func TestSchemaCoverage(t *testing.T) {
	inTable := map[string]bool{}
	tableTypes := map[string]bool{}
	for _, e := range schemaTable {
		file, _, _ := strings.Cut(e.ref, "#")
		inTable[file] = true
		tableTypes[e.typ.Name()] = true
		if e.typ.PkgPath() != reflect.TypeFor[Manifest]().PkgPath() || !ast.IsExported(e.typ.Name()) {
			t.Errorf("schemaTable %s: %s is not an exported type of package abi", e.ref, e.typ)
		}
	}
	paths, _ := filepath.Glob(filepath.Join(schemaDir, "*.json")) // the Go files beside them are package abi/schema
	for _, p := range paths {
		if !inTable[filepath.Base(p)] {
			t.Errorf("abi/%s is an orphan: no schemaTable entry pairs it with a Go type", filepath.ToSlash(p))
		}
	}
	for file := range inTable {
		if _, err := os.Stat(filepath.Join(schemaDir, file)); err != nil {
			t.Errorf("schemaTable names abi/%s/%s, which does not exist", schemaDir, file)
		}
	}

	structs, err := packageStructs()
	if err != nil {
		t.Fatal(err)
	}
	if len(structs) == 0 {
		t.Fatal("found no exported struct types in package abi: the source scan is broken")
	}
	for _, s := range structs {
		if !tableTypes[s.name] && notOnTheWire[s.name] == "" {
			t.Errorf("%s: exported struct type %s has no schema in abi/%s (add the file and a schemaTable entry)", s.pos, s.name, schemaDir)
		}
	}
}

type declaredStruct struct {
	name string
	pos  token.Position
}

// notOnTheWire are the exported struct types that describe the ABI to Go
// code and never travel between host and guest, with why.
var notOnTheWire = map[string]string{
	"Hook":   "a row of the hook table (Hooks)",
	"Export": "a row of the export table (Exports)",
}

// packageStructs are the exported struct types declared in the package's
// non-test Go files, but for error types (DepthError): a type with an
// Error() string method reports a failure to Go callers and never travels
// on the wire, so it has no schema.
func packageStructs() ([]declaredStruct, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		return nil, err
	}
	var out []declaredStruct
	errorTypes := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if f.Name.Name != "abi" {
			continue
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok {
				if recv, ok := errorMethodOf(fn); ok {
					errorTypes[recv] = true
				}
				continue
			}
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if _, isStruct := ts.Type.(*ast.StructType); isStruct && ts.Name.IsExported() {
					out = append(out, declaredStruct{ts.Name.Name, fset.Position(ts.Pos())})
				}
			}
		}
	}
	return slices.DeleteFunc(out, func(s declaredStruct) bool { return errorTypes[s.name] }), nil
}

// errorMethodOf returns the receiver type's name when fn is the method
// Error() string, which makes its type (or its pointer) implement error.
func errorMethodOf(fn *ast.FuncDecl) (string, bool) {
	if fn.Recv == nil || len(fn.Recv.List) != 1 || fn.Name.Name != "Error" || fn.Type.Params.NumFields() != 0 ||
		fn.Type.Results.NumFields() != 1 {
		return "", false
	}
	if res, ok := fn.Type.Results.List[0].Type.(*ast.Ident); !ok || res.Name != "string" {
		return "", false
	}
	recv := fn.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	id, ok := recv.(*ast.Ident)
	if !ok {
		return "", false
	}
	return id.Name, true
}

// TestStdlibOnly checks the package doc's promise: package abi, tests
// included, imports only the standard library (the tests also import
// abi/schema, the schemas' package of this module, itself standard library
// only).
func TestStdlibOnly(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") && !(strings.HasSuffix(name, "_test.go") && path == "github.com/morphhost/morph/abi/schema") {
				t.Errorf("%s: imports %q; package abi may import only the standard library", fset.Position(imp.Pos()), path)
			}
		}
	}
}

// ---- validating sample payloads ----

// validate checks v (decoded with UseNumber) against n and returns the
// violations, each with the instance path.
func (ss *schemaSet) validate(n snode, v any, at string) []string {
	switch b := n.v.(type) {
	case bool:
		if !b {
			return []string{at + ": the schema " + n.String() + " is false"}
		}
		return nil
	case map[string]any:
	default:
		return []string{fmt.Sprintf("%s: %s is not a schema", at, n)}
	}
	m := n.m()
	var errs []string
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%s: %s (%s)", at, fmt.Sprintf(format, args...), n))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch k {
		case "$ref":
			target, err := ss.resolve(n, m[k].(string))
			if err != nil {
				fail("%v", err)
				continue
			}
			errs = append(errs, ss.validate(target, v, at)...)
		case "type":
			ts, err := schemaTypes(n)
			if err != nil {
				fail("%v", err)
			} else if !slices.ContainsFunc(ts, func(t string) bool { return hasJSONType(v, t) }) {
				fail("is %s, want %s", jsonTypeOf(v), fmtTypes(ts))
			}
		case "enum":
			if !slices.ContainsFunc(m[k].([]any), func(e any) bool { return jsonEqual(e, v) }) {
				fail("%s is not one of %v", compact(v), m[k])
			}
		case "const":
			if !jsonEqual(m[k], v) {
				fail("%s is not %s", compact(v), compact(m[k]))
			}
		case "pattern":
			if s, ok := v.(string); ok {
				re, err := regexp.Compile(m[k].(string))
				if err != nil {
					fail("bad pattern: %v", err)
				} else if !re.MatchString(s) {
					fail("%q does not match %s", s, m[k])
				}
			}
		case "minLength":
			if s, ok := v.(string); ok {
				if min, _ := m[k].(json.Number).Int64(); int64(utf8.RuneCountInString(s)) < min {
					fail("%q is shorter than %d", s, min)
				}
			}
		case "properties", "additionalProperties", "required":
			obj, ok := v.(map[string]any)
			if !ok {
				continue
			}
			props, _ := m["properties"].(map[string]any)
			switch k {
			case "properties":
				for _, name := range slices.Sorted(maps.Keys(obj)) {
					if _, ok := props[name]; ok {
						errs = append(errs, ss.validate(n.at("properties", name), obj[name], at+"/"+name)...)
					}
				}
			case "additionalProperties":
				for _, name := range slices.Sorted(maps.Keys(obj)) {
					if _, ok := props[name]; !ok {
						errs = append(errs, ss.validate(n.at(k), obj[name], at+"/"+name)...)
					}
				}
			case "required":
				for _, r := range m[k].([]any) {
					if _, ok := obj[r.(string)]; !ok {
						fail("missing required property %q", r)
					}
				}
			}
		case "maxItems", "maxProperties":
			max, _ := m[k].(json.Number).Int64()
			switch x := v.(type) {
			case []any:
				if k == "maxItems" && int64(len(x)) > max {
					fail("%d items, more than %d", len(x), max)
				}
			case map[string]any:
				if k == "maxProperties" && int64(len(x)) > max {
					fail("%d properties, more than %d", len(x), max)
				}
			}
		case "items":
			if arr, ok := v.([]any); ok {
				for i, x := range arr {
					errs = append(errs, ss.validate(n.at(k), x, at+"/"+strconv.Itoa(i))...)
				}
			}
		case "oneOf", "anyOf":
			var matched int
			var why []string
			for i := range m[k].([]any) {
				e := ss.validate(n.at(k, strconv.Itoa(i)), v, at)
				if len(e) == 0 {
					matched++
				} else {
					why = append(why, strings.Join(e, "; "))
				}
			}
			if matched == 0 || (k == "oneOf" && matched > 1) {
				fail("%s matches %d branches of %s: %s", compact(v), matched, k, strings.Join(why, " | "))
			}
		default:
			if !annotations[k] {
				fail("the test's validator does not implement keyword %q; extend it", k)
			}
		}
	}
	return errs
}

func jsonTypeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if hasJSONType(x, "integer") {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func hasJSONType(v any, t string) bool {
	switch t {
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := n.Float64()
		return err == nil && f == math.Trunc(f) && !math.IsInf(f, 0)
	case "number":
		_, ok := v.(json.Number)
		return ok
	}
	return jsonTypeOf(v) == t
}

func jsonEqual(a, b any) bool {
	if x, ok := a.(json.Number); ok {
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, err1 := x.Float64()
		fy, err2 := y.Float64()
		return err1 == nil && err2 == nil && fx == fy
	}
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, jsonEqual)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			if yv, ok := y[k]; !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return a == b
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// schemaFor is the table's schema of a Go type name.
func schemaFor(t *testing.T, ss *schemaSet, name string) (snode, reflect.Type) {
	t.Helper()
	for _, e := range schemaTable {
		if e.typ.Name() == name {
			n, err := ss.lookup(e.ref)
			if err != nil {
				t.Fatal(err)
			}
			return n, e.typ
		}
	}
	t.Fatalf("no schemaTable entry for %s", name)
	return snode{}, nil
}

// checkSample validates raw against the schema of typ, decodes it into typ
// (refusing unknown fields, so a sample's field names match the Go type's),
// and validates the re-encoded value too.
func checkSample(t *testing.T, ss *schemaSet, typeName, origin string, raw []byte) {
	t.Helper()
	n, typ := schemaFor(t, ss, typeName)
	v, err := decodeJSON(raw)
	if err != nil {
		t.Errorf("%s: %s sample is not JSON: %v", origin, typeName, err)
		return
	}
	for _, e := range ss.validate(n, v, typeName) {
		t.Errorf("%s: %s sample fails its schema: %s", origin, typeName, e)
	}
	p := reflect.New(typ)
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(p.Interface()); err != nil {
		t.Errorf("%s: %s sample does not decode into the Go type: %v", origin, typeName, err)
		return
	}
	again, err := json.Marshal(p.Interface())
	if err != nil {
		t.Fatal(err)
	}
	v, _ = decodeJSON(again)
	for _, e := range ss.validate(n, v, typeName) {
		t.Errorf("%s: %s sample, decoded into Go and encoded again as %s, fails its schema: %s", origin, typeName, again, e)
	}
}

// jsonValues splits b into its successive JSON values.
func jsonValues(b []byte) ([]json.RawMessage, error) {
	var out []json.RawMessage
	d := json.NewDecoder(bytes.NewReader(b))
	for {
		var raw json.RawMessage
		if err := d.Decode(&raw); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
}

// TestSchemaSpecSamples validates the JSON examples of SPEC.md (§4, §10). A ```json
// block holds one value per **TypeName** in the text before it; blocks with
// placeholders that are not JSON are checked line by line, skipping the
// lines that are not JSON.
func TestSchemaSpecSamples(t *testing.T) {
	ss := loadSchemas(t)
	spec, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Skipf("no SPEC.md: %v", err)
	}
	known := map[string]bool{}
	for _, e := range schemaTable {
		known[e.typ.Name()] = true
	}
	bold := regexp.MustCompile(`\*\*([A-Za-z]+)\*\*`)
	block := regexp.MustCompile("(?s)```json\n(.*?)```")
	prev, checked := 0, 0
	for _, loc := range block.FindAllSubmatchIndex(spec, -1) {
		intro := spec[prev:loc[0]]
		body := spec[loc[2]:loc[3]]
		prev = loc[1]
		var names []string
		for _, m := range bold.FindAllSubmatch(intro, -1) {
			if known[string(m[1])] {
				names = append(names, string(m[1]))
			}
		}
		line := 1 + bytes.Count(spec[:loc[0]], []byte("\n"))
		values, err := jsonValues(body)
		if err != nil {
			// Placeholders such as [ToolSpec...]: fall back to one value per
			// line, checking the lines that are JSON.
			lines := bytes.Split(bytes.TrimSpace(body), []byte("\n"))
			if len(lines) != len(names) {
				t.Logf("SPEC.md:%d: %v sample is not literal JSON, skipped: %v", line, names, err)
				continue
			}
			for i, l := range lines {
				origin := fmt.Sprintf("SPEC.md:%d", line+1+i)
				if !json.Valid(l) {
					t.Logf("%s: %s sample is not literal JSON, skipped", origin, names[i])
					continue
				}
				checkSample(t, ss, names[i], origin, l)
				checked++
			}
			continue
		}
		if len(values) != len(names) {
			t.Errorf("SPEC.md:%d: the block holds %d JSON values but the text before it names %d payload types %v", line, len(values), len(names), names)
			continue
		}
		for i, raw := range values {
			checkSample(t, ss, names[i], fmt.Sprintf("SPEC.md:%d", line), raw)
			checked++
		}
	}
	if checked == 0 {
		t.Error("SPEC.md: no ```json sample was checked; has the format of §4 changed?")
	}
	t.Logf("checked %d SPEC.md samples", checked)
}

// TestSchemaGoSamples validates fully populated Go values, as the host and a
// Go guest encode them, against the schemas.
func TestSchemaGoSamples(t *testing.T) {
	ss := loadSchemas(t)
	tool := ToolSpec{Name: "word_count", Description: "Counts words",
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}
	plan := &Plan{Thought: "t", Summary: "s", Risks: []string{"r"}, Questions: []string{"q"}, Completion: "c",
		Steps: []PlanStep{{Step: "a", Status: StepPending}, {Step: "b", Status: StepInProgress}, {Step: "c", Status: StepCompleted}, {Step: "d"}}}
	history := []Message{{Role: "system", Content: "p"}, {Role: "user", Content: "count"}, {Role: "assistant", Content: "{}"}}
	redacted := "[redacted]"
	samples := []any{
		Manifest{Name: "go-hooks", Version: "0.1.0", ABIVersion: Version, Hooks: []string{HookBuildPrompt, HookFallbackFinal},
			Tools: []ToolSpec{tool}, Capabilities: []string{"log", "config"}, History: true, Requires: []string{"audit"}},
		Manifest{Name: "tools-only", Version: "1", ABIVersion: Version, Tools: []ToolSpec{tool}}, // nil Hooks: null
		tool,
		Usage{InputTokens: 1200, OutputTokens: 300, TotalTokens: 1500, Cost: 0.0042},
		RunOptions{Model: "m", MaxSteps: 15, ParseRetries: -1, TokenBudget: 1000, Parameters: map[string]any{"temperature": 0.2}},
		RunOptions{},
		Final{Thought: "t", Output: map[string]any{"n": 3}, Plan: plan},
		Final{Thought: "t"}, // nil Output: null, any JSON value
		*plan,
		PlanStep{Step: "x"},
		PromptInput{Task: "task", Tools: []ToolSpec{tool}, DefaultPrompt: "p"},
		PromptInput{Task: "task", Tools: []ToolSpec{}, DefaultPrompt: "p"},
		PromptOutput{SystemPrompt: "Be brief."},
		ParamsInput{Task: "task", Options: RunOptions{Model: "m", Parameters: map[string]any{"top_p": 0.9}}},
		ParamsOutput{Parameters: map[string]any{"temperature": 0.1, "max_tokens": 800}},
		ParamsOutput{}, // nil Parameters: null, no override
		ToolSuccessInput{Tool: "word_count", Step: 3, Params: map[string]any{"text": "a b"}, Observation: "2"},
		FallbackInput{Task: "task", Reason: "r", Steps: 15, Usage: Usage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3, Cost: 1.5}},
		ToolCallInput{Tool: "word_count", Params: map[string]any{"text": "a b c"}},
		ToolCallInput{Tool: "word_count", Params: map[string]any{"text": "a b c"}, CallID: "s1/K3QZ7PA2MX/2/1/1"},
		ToolCallOutput{Output: "3"},
		ToolCallOutput{Output: "a chart [image 1: image/png]", Images: []Image{{MimeType: "image/png", Data: "iVBORw0KGgo="}}},
		ToolCallOutput{Output: "a greeting [audio 1: audio/wav]\nhello", Content: []Content{{Type: "audio", MimeType: "audio/wav", Data: "UklGRg=="},
			{Type: "resource", URI: "test://greeting", MimeType: "text/plain", Text: "hello"}, {Type: "resource_link", URI: "file:///a.txt", Name: "a.txt"}},
			Structured: json.RawMessage(`{"n":3}`)},
		Image{MimeType: "image/jpeg", Data: "/9j/4AAQ"},
		Content{Type: "resource", URI: "test://blob", MimeType: "application/octet-stream", Data: "AAE="},
		Message{Role: "user", Content: "How many words?"},
		TurnStart{SessionID: "s1", Turn: 2, Input: "and now?", History: history},
		TurnStart{SessionID: "s1", Turn: 1, Input: "count"}, // no history asked for
		Action{SessionID: "s1", Turn: 1, Step: 1, Tool: "word_count", Thought: "t", Input: map[string]any{"text": "a b"}, History: history},
		Action{SessionID: "s1", Turn: 1, Step: 2, Tool: "now", Input: map[string]any{}},
		Observation{SessionID: "s1", Turn: 1, Step: 1, Tool: "word_count", Observation: "2", History: history},
		Observation{SessionID: "s1", Turn: 1, Step: 2, Tool: "nope", Observation: "error: unknown tool", IsError: true},
		TurnEnd{SessionID: "s1", Turn: 1, Step: 2, Final: `{"thought":"t","output":2}`, Status: StatusFinal,
			StepUsage: Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, TurnUsage: Usage{InputTokens: 30, OutputTokens: 9, TotalTokens: 39, Cost: 0.001}},
		TurnEnd{SessionID: "s1", Turn: 2, Status: StatusError, Error: "model call failed"},
		BeforeRunInput{SessionID: "s1", Turn: 1, SystemPrompt: "p", Tools: []string{"word_count", "now"}, Model: "m"},
		BeforeRunInput{SessionID: "s1", Turn: 1, SystemPrompt: "p", Tools: []string{}},
		BeforeRunOutput{SystemPrompt: "Be brief.", Tools: []string{"word_count"}},
		BeforeRunOutput{}, // changes nothing
		BeforeToolCallInput{SessionID: "s1", Turn: 1, Step: 1, Tool: "word_count", Input: map[string]any{"text": "a b"}},
		BeforeToolCallOutput{Input: map[string]any{"text": "a"}},
		BeforeToolCallOutput{Deny: true, Reason: "word_count is disabled here"},
		BeforeToolCallOutput{}, // changes nothing
		AfterToolCallInput{SessionID: "s1", Turn: 1, Step: 1, Tool: "word_count", Input: map[string]any{"text": "a b"}, Output: "2"},
		AfterToolCallInput{SessionID: "s1", Turn: 1, Step: 1, Tool: "fetch", Input: map[string]any{}, Output: "timeout", IsError: true},
		AfterToolCallOutput{Output: &redacted},
		AfterToolCallOutput{Output: new(string)}, // rewritten to empty
		AfterToolCallOutput{},                    // changes nothing
		AfterRunInput{SessionID: "s1", Turn: 1, Final: &Final{Thought: "t", Output: 2, Plan: plan}, Status: StatusForced,
			Usage: Usage{InputTokens: 30, OutputTokens: 9, TotalTokens: 39}, Steps: 15},
		AfterRunInput{SessionID: "s1", Turn: 1, Status: StatusCanceled, Error: "context canceled", Steps: 1},
		HTTPRequest{Method: "POST", URL: "https://api.example.com/v1/notes", Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"text":"hi"}`},
		HTTPRequest{URL: "http://api.example.com/"}, // GET, no headers, no body
		HTTPResponse{Status: 200, Headers: map[string]string{"Content-Type": "text/plain; charset=utf-8"}, Body: "ok"},
		HTTPResponse{Status: 204}, // no headers, empty body
		StageInput{NodeID: "verify", Attrs: map[string]string{"type": "wasm:verify", "marker": "tests pass"}, Goal: "ship it",
			Context:  map[string]any{"last_response": "all tests pass", "internal.retry_count.verify": 1},
			Previous: &StageOutcome{Status: StageSuccess, ContextUpdates: map[string]any{"implement.output": "done"}, Notes: "n"}},
		StageInput{NodeID: "first", Attrs: map[string]string{}, Context: map[string]any{}}, // no goal, no previous stage
		StageOutcome{Status: StageFail, PreferredLabel: "fix", SuggestedNextIDs: []string{"implement"},
			ContextUpdates: map[string]any{"verify.passed": false, "verify.tries": 2}, Notes: "n", FailureReason: "no marker"},
		StageOutcome{Status: StageSkipped},
		InstanceReplaced{SessionID: "s1", Reason: ReplacedIdle},
	}
	covered := map[string]bool{}
	for i, s := range samples {
		name := reflect.TypeOf(s).Name()
		covered[name] = true
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		checkSample(t, ss, name, fmt.Sprintf("Go sample %d (%s)", i, name), raw)
	}
	// A schema's own examples are samples too: a type may have those alone.
	for _, e := range schemaTable {
		file, frag, _ := strings.Cut(e.ref, "#")
		if frag != "" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(schemaDir, file))
		if err != nil {
			continue // TestSchemaCoverage reports it
		}
		var doc struct{ Examples []json.RawMessage }
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("abi/%s/%s: %v", schemaDir, file, err)
		}
		for i, ex := range doc.Examples {
			covered[e.typ.Name()] = true
			checkSample(t, ss, e.typ.Name(), fmt.Sprintf("abi/%s/%s example %d", schemaDir, file, i), ex)
		}
	}
	for _, e := range schemaTable {
		if !covered[e.typ.Name()] {
			t.Errorf("%s has no sample: add one to TestSchemaGoSamples or an \"examples\" entry to abi/%s/%s", e.typ.Name(), schemaDir, e.ref)
		}
	}
}

// TestSchemaRejects makes sure the schemas, and the validator, do reject.
func TestSchemaRejects(t *testing.T) {
	ss := loadSchemas(t)
	cases := []struct{ typ, raw, why string }{
		{"Manifest", `{"version":"1","abi_version":1,"hooks":[]}`, "no name"},
		{"Manifest", `{"name":"  ","version":"1","abi_version":1,"hooks":[]}`, "blank name"},
		{"Manifest", `{"name":"x","version":"1","abi_version":2,"hooks":[]}`, "abi_version 2"},
		{"Manifest", `{"name":"x","version":"1","abi_version":1,"hooks":[],"tools":[{"name":"t","description":"d"}]}`, "tool without parameters"},
		{"Plan", `{"steps":[{"step":"a","status":"done"}]}`, "unknown step status"},
		{"Plan", `{"steps":[3]}`, "step neither string nor object"},
		{"Plan", `{"summary":"s"}`, "no steps"},
		{"PromptOutput", `{"system_prompt":""}`, "empty system prompt"},
		{"PromptInput", `{"task":"t","tools":null,"default_prompt":"p"}`, "null tools"},
		{"ToolSuccessInput", `{"tool":"t","step":"3","params":{},"observation":"o"}`, "step as a string"},
		{"FallbackInput", `{"task":"t","reason":"r","steps":1.5,"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2,"cost":0}}`, "fractional steps"},
		{"FallbackInput", `{"task":"t","reason":"r","steps":1,"usage":{"input_tokens":1}}`, "incomplete usage"},
		{"Final", `{"thought":"t"}`, "no output"},
		{"ParamsOutput", `{"parameters":[1]}`, "parameters not an object"},
		{"Manifest", `{"name":"x","version":"1","abi_version":1,"hooks":[],"history":"yes"}`, "history not a boolean"},
		{"TurnStart", `{"session_id":"s","turn":1,"input":"i","history":[{"role":"user"}]}`, "history message without content"},
		{"TurnStart", `{"session_id":"s","input":"i"}`, "no turn"},
		{"Action", `{"session_id":"s","turn":1,"step":1,"tool":"t","input":null}`, "null input"},
		{"TurnEnd", `{"session_id":"s","turn":1,"step":1,"status":"done","step_usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"cost":0},"turn_usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"cost":0}}`, "unknown status"},
		{"TurnEnd", `{"session_id":"s","turn":1,"step":1,"status":"final","final":{"thought":"t","output":1},"step_usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"cost":0},"turn_usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"cost":0}}`, "final as an object, not JSON text"},
		{"BeforeRunInput", `{"session_id":"s","turn":1,"system_prompt":"p","tools":null}`, "null tools"},
		{"BeforeRunOutput", `{"tools":"word_count"}`, "tools not a list"},
		{"BeforeToolCallOutput", `{"deny":"yes"}`, "deny not a boolean"},
		{"AfterToolCallOutput", `{"output":3}`, "output not a string"},
		{"AfterRunInput", `{"session_id":"s","turn":1,"status":"forced","usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"cost":0},"steps":1}`, "unknown status"},
		{"AfterRunInput", `{"session_id":"s","turn":1,"status":"final","final":"{}","usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"cost":0},"steps":1}`, "final as JSON text, not an object"},
		{"HTTPRequest", `{"method":"GET"}`, "no url"},
		{"HTTPRequest", `{"url":"ftp://example.com/x"}`, "not an http or https URL"},
		{"HTTPRequest", `{"url":"https://example.com","headers":{"X-N":1}}`, "a header value that is not a string"},
		{"HTTPResponse", `{"status":"200","body":""}`, "status as a string"},
		{"HTTPResponse", `{"status":200}`, "no body"},
		{"StageInput", `{"node_id":"n","attrs":{"retries":3},"goal":"","context":{}}`, "an attribute that is not text"},
		{"StageInput", `{"node_id":"n","attrs":{},"goal":"","context":{},"previous":{"status":"done"}}`, "a previous outcome of an unknown status"},
		{"StageOutcome", `{"status":"SUCCESS"}`, "a status not in lower case"},
		{"StageOutcome", `{"notes":"n"}`, "no status"},
		{"StageOutcome", `{"status":"success","suggested_next_ids":[""]}`, "an empty suggested id"},
		{"StageOutcome", `{"status":"success","suggested_next_ids":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}`, "17 suggested ids"},
		{"StageOutcome", `{"status":"success","context_updates":[1]}`, "context updates not an object"},
	}
	for _, c := range cases {
		n, _ := schemaFor(t, ss, c.typ)
		v, err := decodeJSON([]byte(c.raw))
		if err != nil {
			t.Fatalf("%s %s: %v", c.typ, c.raw, err)
		}
		if errs := ss.validate(n, v, c.typ); len(errs) == 0 {
			t.Errorf("%s accepts %s (%s)", n, c.raw, c.why)
		}
	}
	// Unknown fields are allowed everywhere (SPEC.md §7).
	n, _ := schemaFor(t, ss, "ToolCallOutput")
	v, _ := decodeJSON([]byte(`{"output":"3","added_in_v1_1":true}`))
	if errs := ss.validate(n, v, "ToolCallOutput"); len(errs) != 0 {
		t.Errorf("an unknown field is refused: %v", errs)
	}
}

// stringConsts are the exported string constants of the package's non-test
// Go files whose names start with prefix, name -> value.
func stringConsts(t *testing.T, prefix string) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, prefix) || !id.IsExported() || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						out[id.Name] = v
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("found no string constants %s* in package abi: the source scan is broken", prefix)
	}
	return out
}

// TestSchemaEnums checks that each enum of the schemas lists exactly the
// values of the Go constants it stands for.
func TestSchemaEnums(t *testing.T) {
	ss := loadSchemas(t)
	cases := []struct{ ref, prefix string }{
		{"turn_end.json#/properties/status", "Status"},
		{"after_run_input.json#/properties/status", "Status"},
		{"plan.json#/$defs/plan_step/oneOf/1/properties/status", "Step"},
		{"stage_outcome.json#/properties/status", "Stage"},
		{"instance_replaced.json#/properties/reason", "Replaced"},
	}
	for _, c := range cases {
		n, err := ss.lookup(c.ref)
		if err != nil {
			t.Errorf("%s: %v", c.ref, err)
			continue
		}
		var got []string
		enum, _ := n.m()["enum"].([]any)
		for _, v := range enum {
			s, _ := v.(string)
			got = append(got, s)
		}
		want := slices.Collect(maps.Values(stringConsts(t, c.prefix)))
		if !sameSet(got, want) || len(got) != len(want) {
			t.Errorf("%s: enum is %v, want the values of the %s* constants %v", n, got, c.prefix, slices.Sorted(slices.Values(want)))
		}
	}
}

// TestSpecListsExports checks that the table of SPEC.md §3 has a row for
// every export of v1, and that each hook's export is morph_<hook>, as the
// manifest schema says.
func TestSpecListsExports(t *testing.T) {
	spec, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Skipf("no SPEC.md: %v", err)
	}
	for name, export := range stringConsts(t, "Export") {
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(export) + "[`(]")
		if !row.Match(spec) {
			t.Errorf("SPEC.md: the exports table of §3 has no row for %s (%s)", export, name)
		}
	}
	for _, m := range []map[string]string{EngineHookExports, MiddlewareExports} {
		for hook, export := range m {
			if export != "morph_"+hook {
				t.Errorf("hook %s has export %s, want morph_%s", hook, export, hook)
			}
		}
	}
}
