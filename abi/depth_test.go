package abi

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckDepth(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	cases := []struct {
		doc   string
		limit int
		err   bool
	}{
		{`{"a":[1,{"b":2}]}`, 3, false},
		{`{"a":[1,{"b":2}]}`, 2, true},
		{nest(64), 64, false},
		{nest(65), 64, true},
		{`"[[[[[[[["`, 1, false},                  // brackets inside a string do not count
		{`["\"[[[[", "\\", [[1]]]`, 3, false},     // nor after an escaped quote; an escaped backslash ends the escape
		{`["\"[[[[", "\\", [[[1]]]]`, 3, true},    //
		{`{"k":{"k":{"k":{}}}}`, 4, false},        //
		{strings.Repeat("{\"a\":", 70), 64, true}, // unterminated: still refused at the 65th level
		{``, 1, false},
		{`]]]][[[[`, 3, true}, // stray closing brackets do not allow deeper nesting after them
		{`]]]][[[]]]`, 3, false},
		{`{}}}{"a":[[1]]}`, 3, false},
		{`{}}}{"a":[[[1]]]}`, 3, true},
	}
	for _, c := range cases {
		err := CheckDepth([]byte(c.doc), c.limit)
		var de *DepthError
		if (err != nil) != c.err {
			t.Errorf("CheckDepth(%.40q, %d) = %v, want error %v", c.doc, c.limit, err, c.err)
			continue
		}
		if err == nil {
			continue
		}
		if !errors.As(err, &de) {
			t.Errorf("CheckDepth(%.40q, %d) = %v (%T), want a *DepthError", c.doc, c.limit, err, err)
		} else if de.Limit != c.limit {
			t.Errorf("CheckDepth(%.40q, %d): DepthError.Limit = %d, want %d", c.doc, c.limit, de.Limit, c.limit)
		}
	}
	err := CheckDepth([]byte(`[[[`), 2)
	if de := (*DepthError)(nil); !errors.As(err, &de) || de.Offset != 2 {
		t.Fatalf("offset: %v", err)
	}
}
