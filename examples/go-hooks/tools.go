package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

const wordCountSchema = `{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "the text to count"}
  },
  "required": ["text"],
  "additionalProperties": false
}`

// Counts is word_count's result.
type Counts struct {
	Words int `json:"words"`
	Lines int `json:"lines"`
	Chars int `json:"chars"` // Unicode code points
}

// WordCount counts text's words (runs of non-space), lines (a final newline
// does not start another; an empty text has none) and code points.
func WordCount(text string) Counts {
	c := Counts{Words: len(strings.Fields(text)), Chars: utf8.RuneCountInString(text)}
	if text != "" {
		c.Lines = strings.Count(text, "\n") + 1
		if strings.HasSuffix(text, "\n") {
			c.Lines--
		}
	}
	return c
}

func wordCountTool(params map[string]any) (string, error) {
	text, ok := params["text"].(string)
	if !ok {
		return "", errors.New(`"text" must be a string`)
	}
	b, err := json.Marshal(WordCount(text))
	return string(b), err
}

const jsonQuerySchema = `{
  "type": "object",
  "properties": {
    "json": {"type": "string", "description": "the JSON document, as text"},
    "path": {"type": "string", "description": "object keys and array indexes, e.g. items[0].name, $.a[\"key.with.dots\"], list[-1]; \"\" or \"$\" is the whole document"}
  },
  "required": ["json", "path"],
  "additionalProperties": false
}`

func jsonQueryTool(params map[string]any) (string, error) {
	doc, ok1 := params["json"].(string)
	path, ok2 := params["path"].(string)
	if !ok1 || !ok2 {
		return "", errors.New(`"json" and "path" must be strings`)
	}
	return JSONQuery(doc, path)
}

// JSONQuery returns the value at path in the JSON document doc, as compact
// JSON. Numbers keep their exact text. A path is a sequence of keys and
// indexes: "a.b", "a[0]", "a[-1]" (the last element), `a["x.y"]`, with an
// optional leading "$".
func JSONQuery(doc, path string) (string, error) {
	steps, err := parsePath(path)
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("invalid JSON document: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", errors.New("invalid JSON document: data after the first value")
	}
	at := "$"
	for _, s := range steps {
		switch node := v.(type) {
		case map[string]any:
			if s.isIndex {
				return "", fmt.Errorf("at %s: an object has keys, not index [%d]", at, s.index)
			}
			next, ok := node[s.key]
			if !ok {
				return "", fmt.Errorf("at %s: no key %q (keys: %s)", at, s.key, keyList(node))
			}
			v = next
		case []any:
			if !s.isIndex {
				return "", fmt.Errorf("at %s: an array has indexes, not key %q", at, s.key)
			}
			i := s.index
			if i < 0 {
				i += len(node)
			}
			if i < 0 || i >= len(node) {
				return "", fmt.Errorf("at %s: index %d out of range (length %d)", at, s.index, len(node))
			}
			v = node[i]
		default:
			return "", fmt.Errorf("at %s: a %s has no %s", at, kind(v), s)
		}
		at += s.String()
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

type step struct {
	key     string
	index   int
	isIndex bool
}

func (s step) String() string {
	if s.isIndex {
		return "[" + strconv.Itoa(s.index) + "]"
	}
	return "." + s.key
}

// parsePath splits a path into keys and indexes.
func parsePath(path string) ([]step, error) {
	p := strings.TrimSpace(path)
	p = strings.TrimPrefix(p, "$")
	var steps []step
	bad := func(why string) ([]step, error) { return nil, fmt.Errorf("invalid path %q: %s", path, why) }
	for i := 0; i < len(p); {
		switch {
		case p[i] == '[':
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				return bad("unclosed [")
			}
			inner := p[i+1 : i+end]
			if strings.HasPrefix(inner, `"`) {
				// A quoted key may hold ']': read the JSON string, then expect ']'.
				dec := json.NewDecoder(strings.NewReader(p[i+1:]))
				var key string
				if err := dec.Decode(&key); err != nil {
					return bad("bad quoted key")
				}
				j := i + 1 + int(dec.InputOffset())
				if j >= len(p) || p[j] != ']' {
					return bad("expected ] after the quoted key")
				}
				steps = append(steps, step{key: key})
				i = j + 1
				continue
			}
			n, err := strconv.Atoi(strings.TrimSpace(inner))
			if err != nil {
				return bad(fmt.Sprintf("[%s] is neither an index nor a quoted key", inner))
			}
			steps = append(steps, step{index: n, isIndex: true})
			i += end + 1
		case p[i] == '.' || i == 0:
			if p[i] == '.' {
				i++
			}
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			if j == i {
				return bad("empty key")
			}
			steps = append(steps, step{key: p[i:j]})
			i = j
		default:
			return bad(fmt.Sprintf("unexpected %q", p[i]))
		}
	}
	return steps, nil
}

func keyList(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, strconv.Quote(k))
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	}
	return fmt.Sprintf("%T", v)
}
