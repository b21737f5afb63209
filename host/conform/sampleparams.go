package conform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/internal/safetext"
)

// SampleParams builds tool params from a tool's parameters schema, simply:
//
//   - a const, else the first enum value, else the default, else the first
//     of examples, when the schema has one;
//   - an object gets its required properties, each built from its own
//     schema (an empty schema: the string "sample"), and, short of
//     minProperties, its other properties in name order, then additional
//     ones ("sample_1", ...) unless additionalProperties is false; a string
//     is "sample" (padded to minLength, cut to maxLength; a few formats get a
//     value of theirs: date-time, date, time, email, uri, uuid, ipv4); a
//     number or an integer is 1, moved into [minimum, maximum]; a boolean is
//     true; an array gets minItems items; null is null;
//   - with several types, the first that is not null; without one, an object
//     when the schema has properties, required or minProperties, else a
//     string;
//   - anyOf and oneOf take their first branch, allOf merges its branches'
//     properties and required lists; a $ref is followed within the schema
//     ("#/$defs/...", "#/definitions/...").
//
// An empty or absent schema gives {}. Patterns, formats beyond those and
// cross-field rules are not attempted: Run validates the sample against
// the schema and skips the call when it does not satisfy it.
//
// The schema is the plugin's, and a few hundred bytes of it can ask for a
// string of 1e18 bytes or, through $refs, a tree of 10^15 values. So a
// sample nests at most 16 levels (each $ref followed is one), is at most
// 64 KiB of JSON, and is given up after 500ms; a schema beyond those bounds
// is an error matching ErrUnsampleable that names the keyword, where it is,
// and the bound.
func SampleParams(schema json.RawMessage) (map[string]any, error) {
	return sampleParams(schema, time.Now().Add(maxSampleTime), maxSampleTime.String())
}

// sampleParams is SampleParams given up at deadline, which bound describes.
func sampleParams(schema json.RawMessage, deadline time.Time, bound string) (map[string]any, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return map[string]any{}, nil
	}
	if err := abi.CheckDepth(schema, abi.MaxDepth); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsampleable, err)
	}
	var root any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, fmt.Errorf("the parameters schema is not JSON: %v", err)
	}
	if b, ok := root.(bool); ok && b {
		return map[string]any{}, nil
	}
	s, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("the parameters schema is not a JSON object")
	}
	if _, hasType := s["type"]; !hasType && s["properties"] == nil && s["required"] == nil && s["minProperties"] == nil &&
		s["$ref"] == nil && s["allOf"] == nil && s["anyOf"] == nil && s["oneOf"] == nil {
		return map[string]any{}, nil // no constraint on the object's shape
	}
	sm := &sampler{root: root, deadline: deadline, bound: bound}
	v, err := sm.value(s, &schemaPath{tok: "#"}, 0)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the parameters schema describes a JSON %s, not an object", jsonTypeOf(v))
	}
	return obj, nil
}

// The bounds of SampleParams.
const (
	maxSampleDepth = 16       // levels of the sample, each $ref followed counting as one
	maxSampleBytes = 64 << 10 // the sample's JSON, about
	maxSampleTime  = 500 * time.Millisecond
	// maxConformSampleTime bounds the samples of all the tools of one
	// Run: a plugin may declare hundreds of tools.
	maxConformSampleTime = 5 * time.Second
)

// ErrUnsampleable marks a parameters schema that SampleParams gives up on
// because its sample would go beyond the sampler's bounds.
var ErrUnsampleable = errors.New("unsampleable schema")

// sampler builds one sample, counting what it spends.
type sampler struct {
	root     any
	deadline time.Time
	bound    string // what deadline is, for the error: "500ms"
	bytes    int    // JSON bytes of the sample so far
}

// schemaPath is where the sampler is in the schema: a list of JSON pointer
// tokens up to "#" or the $ref last followed, spelled out for errors only.
type schemaPath struct {
	parent *schemaPath
	tok    string
}

func (p *schemaPath) child(toks ...string) *schemaPath {
	for _, t := range toks {
		p = &schemaPath{p, t}
	}
	return p
}

var (
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

func (p *schemaPath) String() string {
	var toks []string
	for ; p.parent != nil; p = p.parent {
		toks = append(toks, pointerEscaper.Replace(p.tok))
	}
	toks = append(toks, p.tok)
	slices.Reverse(toks)
	return strings.Join(toks, "/")
}

// unsampleable is the error of a bound the schema at p goes beyond.
func (sm *sampler) unsampleable(p *schemaPath, format string, args ...any) error {
	return fmt.Errorf("%w: %s (at %s)", ErrUnsampleable, fmt.Sprintf(format, args...), safetext.Truncate(p.String(), 200))
}

// spend counts n bytes of the sample's JSON.
func (sm *sampler) spend(n int, p *schemaPath) error {
	if sm.bytes += n; sm.bytes > maxSampleBytes {
		return sm.unsampleable(p, "the sample would be larger than %d bytes", maxSampleBytes)
	}
	return nil
}

// count reads one of the schema's lower bounds on a count (minLength,
// minItems, minProperties): 0 when absent or not positive, an error when
// more bytes than the sample may have, each counted thing taking one at
// least.
func (sm *sampler) count(s map[string]any, key string, p *schemaPath) (int, error) {
	n, ok := number(s[key])
	if !ok || n <= 0 {
		return 0, nil
	}
	if n > maxSampleBytes {
		return 0, sm.unsampleable(p, "%s %g: the sample would be larger than %d bytes", key, n, maxSampleBytes)
	}
	return int(math.Ceil(n)), nil
}

// literal is a value the schema spells out (const, enum, default,
// examples), counted at its size.
func (sm *sampler) literal(v any, p *schemaPath) (any, error) {
	b, _ := json.Marshal(v)
	if err := sm.spend(len(b), p); err != nil {
		return nil, err
	}
	return v, nil
}

func (sm *sampler) value(schema any, p *schemaPath, depth int) (any, error) {
	switch {
	case depth > maxSampleDepth:
		return nil, sm.unsampleable(p, "the schema nests deeper than %d levels (or its $refs loop)", maxSampleDepth)
	case time.Now().After(sm.deadline):
		return nil, sm.unsampleable(p, "building the sample took longer than %s", sm.bound)
	}
	s, ok := schema.(map[string]any)
	if !ok { // true, absent: anything goes
		return sm.literal("sample", p)
	}
	if ref, ok := s["$ref"].(string); ok {
		target, err := sm.resolve(ref)
		if err != nil {
			return nil, err
		}
		return sm.value(target, &schemaPath{tok: ref}, depth+1)
	}
	if v, ok := s["const"]; ok {
		return sm.literal(v, p.child("const"))
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return sm.literal(enum[0], p.child("enum", "0"))
	}
	if v, ok := s["default"]; ok {
		return sm.literal(v, p.child("default"))
	}
	if ex, ok := s["examples"].([]any); ok && len(ex) > 0 {
		return sm.literal(ex[0], p.child("examples", "0"))
	}
	if all, ok := s["allOf"].([]any); ok && len(all) > 0 {
		return sm.value(sm.merge(s, all), p, depth+1)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if branches, ok := s[k].([]any); ok && len(branches) > 0 {
			return sm.value(branches[0], p.child(k, "0"), depth+1)
		}
	}
	switch schemaType(s) {
	case "object":
		return sm.object(s, p, depth)
	case "array":
		n, err := sm.count(s, "minItems", p)
		if err != nil {
			return nil, err
		}
		if err := sm.spend(2, p); err != nil {
			return nil, err
		}
		items := make([]any, 0, n)
		for range n {
			v, err := sm.value(s["items"], p.child("items"), depth+1)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		return items, nil
	case "integer", "number":
		v := 1.0
		if lo, ok := number(s["minimum"]); ok && v < lo {
			v = lo
		}
		if lo, ok := number(s["exclusiveMinimum"]); ok && v <= lo {
			v = lo + 1
		}
		if hi, ok := number(s["maximum"]); ok && v > hi {
			v = hi
		}
		if hi, ok := number(s["exclusiveMaximum"]); ok && v >= hi {
			v = hi - 1
		}
		if err := sm.spend(24, p); err != nil { // the longest float64 in JSON
			return nil, err
		}
		// An integer beyond 2^53 (a minimum of 1e308) stays a float64,
		// which int64 cannot hold.
		if schemaType(s) == "integer" {
			if v = math.Ceil(v); math.Abs(v) < 1<<53 {
				return int64(v), nil
			}
		}
		return v, nil
	case "boolean":
		return sm.literal(true, p)
	case "null":
		return sm.literal(nil, p)
	default:
		str := "sample"
		switch f, _ := s["format"].(string); f {
		case "date-time":
			str = "2025-01-02T03:04:05Z"
		case "date":
			str = "2025-01-02"
		case "time":
			str = "03:04:05Z"
		case "email":
			str = "sample@example.com"
		case "uri", "url", "iri":
			str = "https://example.com/sample"
		case "uuid":
			str = "00000000-0000-4000-8000-000000000000"
		case "ipv4":
			str = "192.0.2.1"
		}
		n, err := sm.count(s, "minLength", p)
		if err != nil {
			return nil, err
		}
		if len(str) < n {
			str += strings.Repeat("s", n-len(str))
		}
		if max, ok := number(s["maxLength"]); ok && max >= 0 && float64(len(str)) > max {
			str = str[:int(max)]
		}
		return sm.literal(str, p)
	}
}

// object builds an object: its required properties, then, short of
// minProperties, its other properties and additional ones.
func (sm *sampler) object(s map[string]any, p *schemaPath, depth int) (any, error) {
	obj := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	add := func(name string, schema any, at *schemaPath) error {
		if _, done := obj[name]; done {
			return nil
		}
		if err := sm.spend(len(name)+4, p); err != nil { // "name": and a comma
			return err
		}
		v, err := sm.value(schema, at, depth+1)
		if err != nil {
			return err
		}
		obj[name] = v
		return nil
	}
	if err := sm.spend(2, p); err != nil {
		return nil, err
	}
	req, _ := s["required"].([]any)
	for _, r := range req {
		if name, ok := r.(string); ok {
			if err := add(name, props[name], p.child("properties", name)); err != nil {
				return nil, err
			}
		}
	}
	min, err := sm.count(s, "minProperties", p)
	if err != nil || len(obj) >= min {
		return obj, err
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if len(obj) >= min {
			return obj, nil
		}
		if err := add(name, props[name], p.child("properties", name)); err != nil {
			return nil, err
		}
	}
	if extra, ok := s["additionalProperties"].(bool); ok && !extra {
		return obj, nil // too few properties: the validation says so
	}
	for i := 1; len(obj) < min; i++ {
		if err := add(fmt.Sprintf("sample_%d", i), s["additionalProperties"], p.child("additionalProperties")); err != nil {
			return nil, err
		}
	}
	return obj, nil
}

// merge folds allOf's branches into one schema: their properties and
// required lists together, the first type found.
func (sm *sampler) merge(s map[string]any, branches []any) map[string]any {
	out := map[string]any{}
	for k, v := range s {
		if k != "allOf" {
			out[k] = v
		}
	}
	props := map[string]any{}
	if p, ok := s["properties"].(map[string]any); ok {
		for k, v := range p {
			props[k] = v
		}
	}
	req, _ := s["required"].([]any)
	req = slices.Clone(req)
	for _, b := range branches {
		bm, _ := b.(map[string]any)
		for i := 0; i < maxSampleDepth && bm != nil; i++ { // a branch that is only a $ref
			ref, ok := bm["$ref"].(string)
			if !ok {
				break
			}
			t, err := sm.resolve(ref)
			if err != nil {
				break
			}
			bm, _ = t.(map[string]any)
		}
		if bm == nil {
			continue
		}
		if p, ok := bm["properties"].(map[string]any); ok {
			for k, v := range p {
				if _, seen := props[k]; !seen {
					props[k] = v
				}
			}
		}
		if r, ok := bm["required"].([]any); ok {
			req = append(req, r...)
		}
		if _, ok := out["type"]; !ok && bm["type"] != nil {
			out["type"] = bm["type"]
		}
	}
	out["properties"], out["required"] = props, req
	return out
}

// resolve follows a $ref within the schema: "#" or a JSON pointer "#/...".
func (sm *sampler) resolve(ref string) (any, error) {
	if ref == "#" {
		return sm.root, nil
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("$ref %q: only references within the schema are followed", safetext.Truncate(ref, 200))
	}
	v := sm.root
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = pointerUnescaper.Replace(tok)
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", safetext.Truncate(ref, 200))
		}
		if v, ok = m[tok]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", safetext.Truncate(ref, 200))
		}
	}
	return v, nil
}

// schemaType is the schema's type, the first that is not null of a list,
// or a guess from its keywords.
func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if name, ok := x.(string); ok && name != "null" {
				return name
			}
		}
		if len(t) > 0 {
			return "null"
		}
	}
	switch {
	case s["properties"] != nil || s["required"] != nil || s["minProperties"] != nil:
		return "object"
	case s["items"] != nil:
		return "array"
	}
	return "string"
}

func number(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}
