package abi

import "fmt"

// MaxDepth is how deeply the host lets a payload nest its arrays and
// objects by default: deeper than any real payload (a manifest's tool
// schemas included), shallow enough that a reply of a few KB cannot make
// whoever decodes, re-encodes or pretty-prints it do quadratic work.
const MaxDepth = 64

// DepthError reports a JSON document nested deeper than allowed.
type DepthError struct {
	Limit  int // the depth allowed
	Offset int // byte offset of the bracket that went past it
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("JSON nested more than %d levels deep (at byte %d)", e.Limit, e.Offset)
}

// CheckDepth returns a *DepthError when data, read as JSON, opens more than
// limit arrays and objects inside one another; it does not otherwise
// validate data: a closing bracket with nothing open is not counted. It
// reads data once and allocates nothing, so a host can call it on untrusted
// bytes before decoding them.
func CheckDepth(data []byte, limit int) error {
	depth, inString, escaped := 0, false, false
	for i, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > limit {
				return &DepthError{Limit: limit, Offset: i}
			}
		case (c == ']' || c == '}') && depth > 0:
			// A stray closing bracket does not bank depth for later
			// openings: "]]]][[[[" opens four levels.
			depth--
		}
	}
	return nil
}
