// Package schema holds the JSON Schemas (draft 2020-12) of ABI v1's
// payloads, the *.json files of this directory, embedded, for hosts and
// tools that validate payloads: morph's conformance runner checks every
// hook's answer against them. Guests never import it.
//
// Each file's $id is Base followed by its name, and the files refer to one
// another by those names ("$ref": "plan.json"): add every file to a
// validator under its $id before compiling one.
//
// Standard library only, like package abi, and it builds for wasip1 and
// TinyGo.
package schema

import (
	"embed"
	"io/fs"
	"reflect"
	"strings"
	"unicode"
)

// FS holds the schema files, at its root.
//
//go:embed *.json
var FS embed.FS

// Base is the URL the schemas' $id are relative to.
const Base = "https://morph.dev/abi/v1/"

// File is the name of the schema file of a payload type of package abi:
// the type's name in snake_case, with ".json" ("PromptOutput":
// "prompt_output.json", "HTTPRequest": "http_request.json"); ok is false
// when FS has no such file (name is then the file the type should have).
func File(t reflect.Type) (name string, ok bool) {
	if t == nil {
		return "", false
	}
	name = snake(t.Name()) + ".json"
	_, err := fs.Stat(FS, name)
	return name, err == nil
}

// snake is an identifier in snake_case: an underscore before each upper
// case letter that starts a word (after a lower case letter or a digit, or
// before a lower case letter after an initialism).
func snake(id string) string {
	r := []rune(id)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 &&
			(!unicode.IsUpper(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
