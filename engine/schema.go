package engine

import (
	"fmt"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine/internal/schemacost"
)

// Defaults of SchemaLimits.
const (
	DefaultMaxSchemaBytes      = 64 << 10
	DefaultMaxSchemaDepth      = abi.MaxDepth
	DefaultMaxSchemaSteps      = 500_000
	DefaultMaxDescriptionBytes = 16 << 10
	DefaultMaxPatternBytes     = 4 << 10
	DefaultMaxPatternInsts     = 10_000
)

// SchemaLimits bound what a tool's parameter schema, which a plugin writes,
// may cost the host (package engine/internal/schemacost enforces them).
// Zero fields take the defaults.
//
// MaxSteps bounds validation: one step is one subschema checked against one
// value or one of its members, or 32 bytes of a string or member name read
// by a keyword, or 32 bytes times one instruction of a regular expression,
// or, for "format": "regex" (which schemas of drafts before 2019-09
// assert), 32 steps for each byte of a string parsed as a pattern. A
// schema that may check a single value against more subschemas than
// MaxSteps (allOf, anyOf, oneOf and $ref multiply: a chain of a few KB
// makes millions) is refused when it is compiled; a call whose parameters
// would take more steps is refused before validation, with an error the
// model sees. 500,000 steps take about a third of a second.
type SchemaLimits struct {
	MaxBytes int // the schema's JSON text (default 64 KiB)
	MaxDepth int // how deeply the schema nests arrays and objects (default abi.MaxDepth)
	MaxSteps int // the validation work of one call (default 500,000)
	// MaxDescriptionBytes caps a tool's description (default 16 KiB), which
	// the default prompt sends to the model with every request.
	MaxDescriptionBytes int
	// MaxPatternBytes caps each regular expression compiled: a schema's
	// pattern and patternProperties, and each string that "format": "regex"
	// checks (default 4 KiB). Parsing one costs up to 20 µs a byte.
	MaxPatternBytes int
	// MaxPatternInsts caps the program of each regular expression, counted
	// before it is built (default 10,000): about one instruction per
	// character, times each repetition count ("a{1000}" is 1,000).
	MaxPatternInsts int
	// MaxParamsDepth caps how deeply a call's parameters may nest (default
	// abi.MaxDepth); deeper ones are refused unchecked. Validation cost is
	// analysed down to it, so a larger one costs more when schemas compile.
	MaxParamsDepth int
}

func (l SchemaLimits) withDefaults() SchemaLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxSchemaBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxSchemaDepth
	}
	if l.MaxSteps <= 0 {
		l.MaxSteps = DefaultMaxSchemaSteps
	}
	if l.MaxDescriptionBytes <= 0 {
		l.MaxDescriptionBytes = DefaultMaxDescriptionBytes
	}
	if l.MaxPatternBytes <= 0 {
		l.MaxPatternBytes = DefaultMaxPatternBytes
	}
	if l.MaxPatternInsts <= 0 {
		l.MaxPatternInsts = DefaultMaxPatternInsts
	}
	if l.MaxParamsDepth <= 0 {
		l.MaxParamsDepth = abi.MaxDepth
	}
	return l
}

// costLimits are the limits of l that bound a schema and its values.
func (l SchemaLimits) costLimits() schemacost.Limits {
	return schemacost.Limits{MaxBytes: l.MaxBytes, MaxDepth: l.MaxDepth, MaxSteps: l.MaxSteps,
		MaxPatternBytes: l.MaxPatternBytes, MaxPatternInsts: l.MaxPatternInsts, MaxParamsDepth: l.MaxParamsDepth}
}

// compileSchema compiles the schema text of the tool called name under l,
// which has its defaults. The error wraps ErrInvalidSchema and names the
// tool.
func compileSchema(name, text string, l SchemaLimits) (*schemacost.Schema, error) {
	sch, err := schemacost.Compile(text, l.costLimits())
	if err != nil {
		return nil, fmt.Errorf("%w of tool %s: %v", ErrInvalidSchema, quoteName(name), err)
	}
	return sch, nil
}
