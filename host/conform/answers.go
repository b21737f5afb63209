package conform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/abi/schema"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/internal/schemaerr"
)

// An answer is checked against its schema of abi/schema/ (package
// abi/schema embeds them), with the library the engine checks tool params
// with; the schemas are compiled once, on the first check. What no schema
// can say is checked in Go after it (see semanticChecks).

// compiledSchemas are the schemas of abi/schema/ by file name.
var compiledSchemas = sync.OnceValues(compileSchemas)

// embeddedOnly is the compiler's loader: every schema file is added to the
// compiler, so a $ref to anything else is a fault of the schemas, not a
// document to fetch.
type embeddedOnly struct{}

func (embeddedOnly) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is not a schema of abi/schema/", url)
}

func compileSchemas() (map[string]*jsonschema.Schema, error) {
	names, err := fs.Glob(schema.FS, "*.json")
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(embeddedOnly{})
	for _, name := range names {
		b, err := fs.ReadFile(schema.FS, name)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("abi/schema/%s: %w", name, err)
		}
		if err := c.AddResource(schema.Base+name, doc); err != nil {
			return nil, fmt.Errorf("abi/schema/%s: %w", name, err)
		}
	}
	out := make(map[string]*jsonschema.Schema, len(names))
	for _, name := range names {
		if out[name], err = c.Compile(schema.Base + name); err != nil {
			return nil, fmt.Errorf("abi/schema/%s: %w", name, err)
		}
	}
	return out, nil
}

// checkAnswer checks out, what export answered, against the schema file.
// An empty output is the zero payload, checked as {}: it conforms where
// the schema requires nothing (SPEC.md section 4).
func checkAnswer(file string, out []byte) error {
	schemas, err := compiledSchemas()
	if err != nil {
		return err
	}
	sch, ok := schemas[file]
	if !ok {
		return fmt.Errorf("abi/schema/%s: no such schema", file)
	}
	empty := len(bytes.TrimSpace(out)) == 0
	if empty {
		out = []byte("{}")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		return fmt.Errorf("not JSON: %s", safetext.Line(err.Error(), 200))
	}
	var ve *jsonschema.ValidationError
	switch err := sch.Validate(inst); {
	case err == nil:
		return nil
	case !errors.As(err, &ve):
		return err
	case empty:
		return fmt.Errorf("empty output, the zero payload {}, does not satisfy %s: %s", file, schemaerr.Describe(ve, schema.Base))
	default:
		return fmt.Errorf("does not satisfy %s: %s", file, schemaerr.Describe(ve, schema.Base))
	}
}

// semanticChecks are what an answer must be beyond its schema, by hook,
// checked once the schema is satisfied, and the notes a conforming answer
// is worth. A schema cannot say them: the host's own rules on a stage
// outcome count bytes (JSON Schema's lengths count characters), reject
// control and format characters, and reserve context keys by prefix;
// and a note is a remark on a valid answer, not a constraint.
var semanticChecks = map[string]func(out []byte) (note string, err error){
	abi.HookBeforeToolCall: denialNote,
	abi.HookHandleStage:    checkStageOutcome,
}

// denialNote: a before_tool_call denial conforms, with a note.
func denialNote(out []byte) (string, error) {
	var o abi.BeforeToolCallOutput
	if len(bytes.TrimSpace(out)) > 0 {
		if err := json.Unmarshal(out, &o); err != nil {
			return "", err
		}
	}
	if o.Deny {
		return fmt.Sprintf("denies the sample call (reason %q)", o.Reason), nil
	}
	return "", nil
}

// checkStageOutcome: the rules of SPEC.md section 11.2 the host applies
// (abi.StageOutcome.Check). A failed stage conforms, with a note: a
// handler that checks something may well fail the sample.
func checkStageOutcome(out []byte) (string, error) {
	var o abi.StageOutcome
	if err := json.Unmarshal(out, &o); err != nil {
		return "", fmt.Errorf("StageOutcome: %v", err)
	}
	if err := o.Check(); err != nil {
		return "", fmt.Errorf("StageOutcome.%v", err)
	}
	if o.Status == abi.StageFail {
		return fmt.Sprintf("fails the sample stage (reason %q)", o.FailureReason), nil
	}
	return "", nil
}
