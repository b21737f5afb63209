package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// ErrConfig is matched (errors.Is) by every *Error, so a caller can tell a
// configuration mistake (exit code 2 in the CLI) from a failure at run time
// without knowing the error's details.
var ErrConfig = errors.New("configuration error")

// Error is a mistake in a config file, or in a value that came from it.
// Load returns one, or several joined with errors.Join when the file has
// several mistakes; errors.As finds the first.
type Error struct {
	File string // the config file, as given to Load
	Line int    // 1-based line of Key in File; 0 when unknown
	Key  string // the full dotted key path, e.g. "agent.max_steps"; "" for the file as a whole
	Msg  string // what is wrong, and how to fix it when that is not obvious
	Err  error  // the underlying error, if any (a *toml.ParseError, an *os.PathError, ...)
}

// Error formats the error as "file:line: key: msg", leaving out the parts
// that are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": ")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is ErrConfig.
func (e *Error) Is(target error) bool { return target == ErrConfig }

// badType matches BurntSushi/toml's type-mismatch errors, which are plain
// errors: `toml: line 3 (last key "agent.max_steps"): incompatible types:
// TOML value has type string; destination has type integer`.
var (
	badTypeRE  = regexp.MustCompile(`^toml: (?:line (\d+) )?\(last key ("(?:[^"\\]|\\.)*")\): (.*)$`)
	mismatchRE = regexp.MustCompile(`^incompatible types: TOML value has type (.+); destination has type (.+)$`)
	tableRE    = regexp.MustCompile(`^type mismatch for \S+: expected table but found (.+)$`)
)

// decodeError turns an error of toml.Decode into an *Error with the key and
// line it is about, where the toml package says.
func decodeError(file string, err error, decoded bool) *Error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		e := &Error{File: file, Line: pe.Position.Line, Msg: pe.Message, Err: err}
		if decoded {
			// A value error (bad duration, out of range): LastKey is its key.
			// During parsing LastKey is only the last key read, which may be
			// on another line, so it is left out then.
			e.Key = pe.LastKey
		}
		return e
	}
	m := badTypeRE.FindStringSubmatch(err.Error())
	if m == nil {
		return &Error{File: file, Msg: strings.TrimPrefix(err.Error(), "toml: "), Err: err}
	}
	e := &Error{File: file, Msg: m[3], Err: err}
	e.Line, _ = strconv.Atoi(m[1])
	if key, uerr := strconv.Unquote(m[2]); uerr == nil {
		e.Key = key
	}
	if t := mismatchRE.FindStringSubmatch(m[3]); t != nil {
		e.Msg = fmt.Sprintf("want %s, got %s", tomlType(t[2]), tomlType(t[1]))
	} else if t := tableRE.FindStringSubmatch(m[3]); t != nil {
		e.Msg = fmt.Sprintf("want table, got %s", tomlType(t[1]))
	}
	return e
}

// tomlType names, in TOML's terms, a type as the toml package's messages
// spell it (Go types of decoded values, or destination kinds).
func tomlType(s string) string {
	switch {
	case s == "int64" || s == "integer":
		return "integer"
	case s == "float64" || s == "float":
		return "float"
	case s == "bool" || s == "boolean":
		return "boolean"
	case s == "string" || strings.HasPrefix(s, "primitive"):
		return "string"
	case s == "slice" || strings.HasPrefix(s, "[]"):
		return "array"
	case s == "map" || strings.HasPrefix(s, "map["):
		return "table"
	case strings.HasPrefix(s, "time.") || strings.HasPrefix(s, "toml.Local"):
		return "datetime"
	}
	return s
}

// knownKeys lists the keys the schema allows in the table holding key, or
// nil when that table takes any key.
func knownKeys(key toml.Key) []string {
	t := reflect.TypeFor[Config]()
	for _, part := range key[:len(key)-1] {
		// [[plugins]] entries have no index in the key: a slice takes no part.
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Map: // the part is the map's key
			t = t.Elem()
		case reflect.Struct:
			f, ok := fieldByTag(t, part)
			if !ok {
				return nil
			}
			t = f.Type
		default:
			return nil
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		if name := tagName(t.Field(i)); name != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); tagName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tagName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

// keyLine returns the 1-based line of src where key is defined, or 0 when it
// cannot tell. It understands what config files use: [table] and
// [[array]] headers, dotted, quoted and literal keys, inline tables and
// multi-line strings; it is a locator for error messages, not a parser.
// An entry of an array of tables is named by its index, as the validator's
// keys name it: plugins.1.timeout is the timeout of the second [[plugins]].
func keyLine(src []byte, key []string) int {
	if len(key) == 0 {
		return 0
	}
	var table []string
	arrays := map[string]int{} // [[array]] path -> entries seen
	inString := ""             // the delimiter of the multi-line string being skipped
	for i, line := range strings.Split(string(src), "\n") {
		if inString != "" {
			if strings.Count(line, inString)%2 == 1 {
				inString = ""
			}
			continue
		}
		s := strings.TrimSpace(line)
		if s == "" || s[0] == '#' {
			continue
		}
		if s[0] == '[' {
			path, rest, ok := parseKey(strings.TrimPrefix(s[1:], "["))
			if !ok || !strings.HasPrefix(rest, "]") {
				continue
			}
			if strings.HasPrefix(s, "[[") {
				arrays[strings.Join(path, ".")]++
			}
			// Index every array of tables on the path by its latest entry.
			table = nil
			for j := range path {
				table = append(table, path[j])
				if n := arrays[strings.Join(path[:j+1], ".")]; n > 0 {
					table = append(table, strconv.Itoa(n-1))
				}
			}
			path = table
			if hasPrefix(path, key) {
				return i + 1
			}
			continue
		}
		path, rest, ok := parseKey(s)
		if !ok || !strings.HasPrefix(rest, "=") {
			continue
		}
		full := append(slices.Clone(table), path...)
		value := strings.TrimSpace(rest[1:])
		if hasPrefix(full, key) || (hasPrefix(key, full) && strings.HasPrefix(value, "{")) {
			return i + 1
		}
		for _, delim := range []string{`"""`, `'''`} {
			if strings.Count(value, delim)%2 == 1 {
				inString = delim
				break
			}
		}
	}
	return 0
}

// hasPrefix reports whether path starts with prefix.
func hasPrefix(path, prefix []string) bool {
	return len(path) >= len(prefix) && slices.Equal(path[:len(prefix)], prefix)
}

// parseKey reads a dotted TOML key at the start of s and returns its parts
// and the rest of s, with leading blanks trimmed.
func parseKey(s string) (path []string, rest string, ok bool) {
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return nil, "", false
		}
		var part string
		switch s[0] {
		case '"':
			end := 1
			for end < len(s) && s[end] != '"' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(s) {
				return nil, "", false
			}
			var err error
			if part, err = strconv.Unquote(s[:end+1]); err != nil {
				part = s[1:end]
			}
			s = s[end+1:]
		case '\'':
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return nil, "", false
			}
			part, s = s[1:end+1], s[end+2:]
		default:
			end := strings.IndexFunc(s, func(r rune) bool {
				return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
			})
			if end == 0 {
				return nil, "", false
			}
			if end < 0 {
				end = len(s)
			}
			part, s = s[:end], s[end:]
		}
		path = append(path, part)
		s = strings.TrimLeft(s, " \t")
		if !strings.HasPrefix(s, ".") {
			return path, s, true
		}
		s = s[1:]
	}
}
