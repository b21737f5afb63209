package conform

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/abi/schema"
)

// declaredHooks splits the manifest's hooks into those this host calls, in
// the order of abi.Hooks (the SPEC's: the engine hooks, the session
// middleware, the pipeline stage handler), and those it does not know, in
// the manifest's order.
func declaredHooks(declared []string) (known, unknown []string) {
	for _, h := range abi.Hooks {
		if slices.Contains(declared, h.Name) {
			known = append(known, h.Name)
		}
	}
	for _, h := range declared {
		if _, ok := abi.HookByName(h); !ok && !slices.Contains(unknown, h) {
			unknown = append(unknown, h)
		}
	}
	return known, unknown
}

// payloadCheck describes an export's payloads for the runner.
type payloadCheck struct {
	input  func() any // a new input value, to check a fixture's shape
	output func() any // a new output value: the host's own decode (a failure is host.ErrBadOutput and retires the instance)
	// answer is the payload type answered, whose schema of abi/schema/ the
	// answer must satisfy; nil when the export answers nothing (any JSON,
	// which the host ignores).
	answer reflect.Type
	// semantic checks what the schema cannot say, once it is satisfied;
	// note is for a conforming answer worth a remark. Nil: nothing more.
	semantic func(out []byte) (note string, err error)
}

// check checks an answer against the schema of its type, then semantic.
// An answer nested deeper than the host decodes (abi.MaxDepth, the
// default of every plugin's max JSON depth) is refused first: the host's
// adapters take it for a bad output, whatever its schema says.
func (pc payloadCheck) check(out []byte) (note string, err error) {
	if err := abi.CheckDepth(out, abi.MaxDepth); err != nil {
		return "", fmt.Errorf("the host does not decode it: %w", err)
	}
	if pc.answer == nil {
		return "", nil
	}
	if err := pc.checkSchema(out); err != nil {
		return "", err
	}
	if pc.semantic == nil {
		return "", nil
	}
	return pc.semantic(out)
}

// checkSchema checks an answer against the schema of its type only.
func (pc payloadCheck) checkSchema(out []byte) error {
	file, ok := schema.File(pc.answer)
	if !ok {
		return fmt.Errorf("abi/schema/ has no schema for %s", pc.answer)
	}
	return checkAnswer(file, out)
}

// hookExport is the export of a hook of conformHooks.
func hookExport(hook string) string {
	h, _ := abi.HookByName(hook)
	return h.Export
}

func newOf[T any]() func() any { return func() any { return new(T) } }

// newOfType is newOf of a reflect.Type.
func newOfType(t reflect.Type) func() any { return func() any { return reflect.New(t).Interface() } }

// conformHooks is every hook this host calls, with its payloads, from
// abi.Hooks, and the semantic checks of those that answer something.
var conformHooks = func() map[string]payloadCheck {
	m := map[string]payloadCheck{}
	for _, h := range abi.Hooks {
		pc := payloadCheck{input: newOfType(h.Input), output: newOf[json.RawMessage]()}
		if h.Output != nil {
			pc.output, pc.answer, pc.semantic = newOfType(h.Output), h.Output, semanticChecks[h.Name]
		}
		m[h.Name] = pc
	}
	return m
}()

var toolPayloads = payloadCheck{input: newOf[abi.ToolCallInput](), output: newOf[abi.ToolCallOutput](),
	answer: reflect.TypeFor[abi.ToolCallOutput]()}
