package record

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Secret is a value that must never reach a record file: a granted
// environment variable's, an API key's. Name (an environment variable's
// name) goes into the marker that replaces it; Source says where it was
// found, for the error when it is too short to scrub.
type Secret struct {
	Name   string
	Value  string
	Source string // e.g. "granted to plugin guard"; may be ""
}

// Marker is what replaces the secret named name in a record file.
func Marker(name string) string { return "«redacted:" + name + "»" }

// scrubber replaces every secret, raw and as it reads inside a JSON
// string, by its marker.
type scrubber struct {
	forms []form
	r     *strings.Replacer // nil: no secrets
}

type form struct {
	text []byte
	name string
}

// newScrubber checks secrets (every value MinSecretBytes at least; empty
// values, unset variables, are skipped) and builds their scrubber.
func newScrubber(secrets []Secret) (*scrubber, error) {
	s := &scrubber{}
	for _, sec := range secrets {
		if sec.Value == "" {
			continue
		}
		if len(sec.Value) < MinSecretBytes {
			where := ""
			if sec.Source != "" {
				where = " " + sec.Source
			}
			return nil, fmt.Errorf("%w: the value of %s%s is %d bytes; a recording could not tell it from other text (%d bytes at least): do not grant it, or do not record",
				ErrSecretTooShort, sec.Name, where, len(sec.Value), MinSecretBytes)
		}
		s.forms = append(s.forms, form{[]byte(sec.Value), sec.Name})
		q, _ := json.Marshal(sec.Value) // a string always marshals
		if esc := q[1 : len(q)-1]; string(esc) != sec.Value {
			s.forms = append(s.forms, form{esc, sec.Name})
		}
	}
	if len(s.forms) == 0 {
		return s, nil
	}
	// Longest first: where one secret contains another, the longer one is
	// replaced whole (the Replacer tries its pairs in argument order).
	slices.SortStableFunc(s.forms, func(a, b form) int { return cmp.Compare(len(b.text), len(a.text)) })
	pairs := make([]string, 0, 2*len(s.forms))
	for _, f := range s.forms {
		pairs = append(pairs, string(f.text), Marker(f.name))
	}
	s.r = strings.NewReplacer(pairs...)
	return s, nil
}

// scrub is b with every secret replaced, and the names of those it found
// added to names; b itself when it holds none.
func (s *scrubber) scrub(b []byte, names []string) ([]byte, []string) {
	if s.r == nil || b == nil {
		return b, names
	}
	found := false
	for _, f := range s.forms {
		if bytes.Contains(b, f.text) {
			found = true
			if !slices.Contains(names, f.name) {
				names = append(names, f.name)
			}
		}
	}
	if !found {
		return b, names
	}
	return []byte(s.r.Replace(string(b))), names
}
