package conform

import (
	"encoding/json"
	"reflect"
	"slices"

	"github.com/morphhost/morph/abi"
)

// hookOrder is the order of the rows: the engine hooks, the middleware in
// the order a turn calls them, then the pipeline stage handler.
var hookOrder = []string{
	abi.HookBuildPrompt, abi.HookBuildParams, abi.HookOnToolSuccess, abi.HookFallbackFinal,
	abi.HookOnTurnStart, abi.HookBeforeRun, abi.HookOnAction, abi.HookBeforeToolCall,
	abi.HookAfterToolCall, abi.HookOnObservation, abi.HookOnFinal, abi.HookAfterRun,
	abi.HookHandleStage,
}

// declaredHooks splits the manifest's hooks into those this host calls, in
// hookOrder, and those it does not know, in the manifest's order.
func declaredHooks(declared []string) (known, unknown []string) {
	for _, h := range hookOrder {
		if slices.Contains(declared, h) {
			known = append(known, h)
		}
	}
	for _, h := range declared {
		if _, ok := conformHooks[h]; !ok && !slices.Contains(unknown, h) {
			unknown = append(unknown, h)
		}
	}
	return known, unknown
}

// payloadCheck describes a hook's payloads for the runner.
type payloadCheck struct {
	input  func() any // a new input value, to check a fixture's shape
	output func() any // a new output value: the host's own decode (a failure is host.ErrBadOutput and retires the instance)
	// check applies the output schema; note is for a conforming answer worth a remark.
	check func(out []byte) (note string, err error)
}

// hookExport is the export of a hook of conformHooks.
func hookExport(hook string) string {
	h, _ := abi.HookByName(hook)
	return h.Export
}

func newOf[T any]() func() any { return func() any { return new(T) } }

// newOfType is newOf of a reflect.Type.
func newOfType(t reflect.Type) func() any { return func() any { return reflect.New(t).Interface() } }

// answerChecks are the checks of the answers of the hooks that answer
// something (abi.Hook.Mutates); the others must answer nothing.
var answerChecks = map[string]func(out []byte) (note string, err error){
	abi.HookBuildPrompt:    noNote(checkPromptOutput),
	abi.HookBuildParams:    noNote(checkParamsOutput),
	abi.HookFallbackFinal:  noNote(checkFinal),
	abi.HookBeforeRun:      noNote(checkBeforeRunOutput),
	abi.HookBeforeToolCall: checkBeforeToolCallOutput,
	abi.HookAfterToolCall:  noNote(checkAfterToolCallOutput),
	abi.HookHandleStage:    checkStageOutcome,
}

// conformHooks is every hook this host calls, with its payloads: those of
// abi.Hooks, and the checks above.
var conformHooks = func() map[string]payloadCheck {
	m := map[string]payloadCheck{}
	for _, h := range abi.Hooks {
		pc := payloadCheck{input: newOfType(h.Input), output: newOf[json.RawMessage](), check: noNote(checkEmptyOutput)}
		if h.Mutates {
			pc.output, pc.check = newOfType(h.Output), answerChecks[h.Name]
		}
		m[h.Name] = pc
	}
	return m
}()

var toolPayloads = payloadCheck{newOf[abi.ToolCallInput](), newOf[abi.ToolCallOutput](), noNote(checkToolCallOutput)}

func noNote(f func([]byte) error) func([]byte) (string, error) {
	return func(b []byte) (string, error) { return "", f(b) }
}
