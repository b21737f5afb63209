// Package schemaerr says in one line why a JSON value broke its JSON
// Schema (a santhosh-tekuri/jsonschema validation error): what a model
// reads to fix a tool call (package engine) and what a plugin author reads
// of an answer conform refused (package host/conform). Both quote values
// the model or a guest wrote, so every violation is escaped and cut.
package schemaerr

import (
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/morphhost/morph/internal/safetext"
)

// Bounds of Describe: one value can break its schema at thousands of
// places, and a schema's messages quote its enums and patterns.
const (
	maxViolations      = 10
	maxViolationLength = 300
)

// Describe flattens ve to its leaves, one "at <JSON pointer>: <reason>"
// each (RFC 6901 pointers; "the top level" for the value itself), the
// first ten of them, each escaped and cut to 300 bytes, then "and N
// more". With base, the URL the schemas' IDs start with, each also names
// where in its schema it failed: " (<file>#/<keyword path>)".
func Describe(ve *jsonschema.ValidationError, base string) string {
	p := message.NewPrinter(language.English)
	var parts []string
	more := 0
	var walk func(*jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) > 0 {
			for _, c := range branchCauses(v) {
				walk(c)
			}
			return
		}
		if len(parts) == maxViolations {
			more++
			return
		}
		text := v.ErrorKind.LocalizedString(p)
		switch k := v.ErrorKind.(type) { // the library's own texts quote the whole value
		case *kind.Pattern: // the pattern, unless the schema's location is named below
			text = "does not match the pattern"
			if base == "" {
				text += " " + k.Want
			}
		case *kind.Format:
			text = fmt.Sprintf("not a valid %s: %v", k.Want, k.Err)
		}
		where := "the top level"
		if len(v.InstanceLocation) > 0 {
			where = Pointer(v.InstanceLocation)
		}
		msg := fmt.Sprintf("at %s: %s", where, text)
		if base != "" {
			keyword := strings.TrimPrefix(v.SchemaURL, base)
			if kw := v.ErrorKind.KeywordPath(); len(kw) > 0 {
				keyword = strings.TrimSuffix(keyword, "/") + "/" + Pointer(kw)[1:]
			}
			msg += " (" + keyword + ")"
		}
		parts = append(parts, safetext.Line(msg, maxViolationLength))
	}
	walk(ve)
	if more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	return strings.Join(parts, "; ")
}

// branchCauses are v's causes, less, under a oneOf or anyOf, the branches
// that only failed for the value's JSON type when another branch went
// further: of a plan step {"step": "a", "status": "done"}, the status, not
// that the step is no string.
func branchCauses(v *jsonschema.ValidationError) []*jsonschema.ValidationError {
	switch v.ErrorKind.(type) {
	case *kind.OneOf, *kind.AnyOf:
	default:
		return v.Causes
	}
	var kept []*jsonschema.ValidationError
	for _, c := range v.Causes {
		if _, wrongType := c.ErrorKind.(*kind.Type); !wrongType {
			kept = append(kept, c)
		}
	}
	if len(kept) == 0 {
		return v.Causes
	}
	return kept
}

// pointerEscaper escapes a JSON pointer's reference token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// Pointer is the RFC 6901 pointer of tokens.
func Pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(t))
	}
	return b.String()
}
