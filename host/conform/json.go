package conform

import (
	"bytes"
	"encoding/json"
)

// jsonType is the JSON type of a raw value: object, array, string, number,
// boolean or null ("empty" for no bytes).
func jsonType(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func jsonTypeOf(v any) string {
	b, _ := json.Marshal(v)
	return jsonType(b)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
