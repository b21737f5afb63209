package abi

import "reflect"

// HookKind is what a hook is to the engine.
type HookKind int

const (
	// EngineHook: one per engine (the host's, or a plugin's), asked for
	// something the engine would otherwise make itself (the system prompt,
	// the model parameters, the fallback final) or told of a tool's success.
	EngineHook HookKind = iota
	// Middleware: session middleware, chained across plugins in order, called
	// at the points of a turn.
	Middleware
	// StageHandler: a pipeline's stage, run by the plugin a node's type
	// names ("wasm:<plugin>"); the engine never calls it.
	StageHandler
)

// String is the kind as the SPEC and the PDKs name it.
func (k HookKind) String() string {
	switch k {
	case Middleware:
		return "middleware"
	case StageHandler:
		return "stage handler"
	}
	return "engine hook"
}

// Hook describes one hook of ABI v1.
type Hook struct {
	Name   string   // as in Manifest.Hooks and morph.toml
	Export string   // the guest's export of it
	Kind   HookKind //
	// Mutates: its answer can change what the engine or the pipeline does
	// (a prompt, a rewritten tool call, a stage's outcome); otherwise it
	// observes, and answers nothing.
	Mutates bool
	Input   reflect.Type // the payload it is called with
	Output  reflect.Type // the payload it answers; nil when it answers nothing
}

// Hooks is the one table of ABI v1's hooks, in the order the SPEC and the
// manifest list them: the engine hooks, the session middleware, then the
// pipeline stage handler. The host's exports, the engine's hook names, the
// conformance harness, the Go PDK's registry and the checks of the Rust PDK
// and of abi/schema derive from it: adding a hook is a row here, its
// payload types, and its PDK functions.
var Hooks = []Hook{
	{HookBuildPrompt, ExportBuildPrompt, EngineHook, true, reflect.TypeOf(PromptInput{}), reflect.TypeOf(PromptOutput{})},
	{HookBuildParams, ExportBuildParams, EngineHook, true, reflect.TypeOf(ParamsInput{}), reflect.TypeOf(ParamsOutput{})},
	{HookOnToolSuccess, ExportOnToolSuccess, EngineHook, false, reflect.TypeOf(ToolSuccessInput{}), nil},
	{HookFallbackFinal, ExportFallbackFinal, EngineHook, true, reflect.TypeOf(FallbackInput{}), reflect.TypeOf(Final{})},
	{HookOnTurnStart, ExportOnTurnStart, Middleware, false, reflect.TypeOf(TurnStart{}), nil},
	{HookOnAction, ExportOnAction, Middleware, false, reflect.TypeOf(Action{}), nil},
	{HookOnObservation, ExportOnObservation, Middleware, false, reflect.TypeOf(Observation{}), nil},
	{HookOnFinal, ExportOnFinal, Middleware, false, reflect.TypeOf(TurnFinal{}), nil},
	{HookBeforeRun, ExportBeforeRun, Middleware, true, reflect.TypeOf(BeforeRunInput{}), reflect.TypeOf(BeforeRunOutput{})},
	{HookAfterRun, ExportAfterRun, Middleware, false, reflect.TypeOf(AfterRunInput{}), nil},
	{HookBeforeToolCall, ExportBeforeToolCall, Middleware, true, reflect.TypeOf(BeforeToolCallInput{}), reflect.TypeOf(BeforeToolCallOutput{})},
	{HookAfterToolCall, ExportAfterToolCall, Middleware, true, reflect.TypeOf(AfterToolCallInput{}), reflect.TypeOf(AfterToolCallOutput{})},
	{HookHandleStage, ExportHandleStage, StageHandler, true, reflect.TypeOf(StageInput{}), reflect.TypeOf(StageOutcome{})},
}

// HookByName is the row of Hooks of that name.
func HookByName(name string) (Hook, bool) {
	for _, h := range Hooks {
		if h.Name == name {
			return h, true
		}
	}
	return Hook{}, false
}

// HookNames are the names of the hooks of a kind, in the table's order.
func HookNames(kind HookKind) []string {
	var out []string
	for _, h := range Hooks {
		if h.Kind == kind {
			out = append(out, h.Name)
		}
	}
	return out
}

// exportsOf maps the hooks of a kind to their exports.
func exportsOf(kind HookKind) map[string]string {
	m := map[string]string{}
	for _, h := range Hooks {
		if h.Kind == kind {
			m[h.Name] = h.Export
		}
	}
	return m
}
