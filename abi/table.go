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
	// Tool: morph_call_tool, which runs the tools the manifest lists. No
	// hook of the manifest; only in Exports.
	Tool
	// Lifecycle: an export the host calls about the plugin or one of its
	// instances rather than at a point of a turn (morph_describe,
	// morph_destroy, morph_instance_replaced). No hook of the manifest;
	// only in Exports.
	Lifecycle
)

// String is the kind as the SPEC and the PDKs name it.
func (k HookKind) String() string {
	switch k {
	case Middleware:
		return "middleware"
	case StageHandler:
		return "stage handler"
	case Tool:
		return "tool"
	case Lifecycle:
		return "lifecycle"
	}
	return "engine hook"
}

// Hook describes one hook of ABI v1.
type Hook struct {
	Name   string       // as in Manifest.Hooks and morph.toml
	Export string       // the guest's export of it
	Kind   HookKind     //
	Input  reflect.Type // the payload it is called with
	// Output is the payload it answers, with which it can change what the
	// engine or the pipeline does (a prompt, a rewritten tool call, a
	// stage's outcome); nil when it observes, and answers nothing.
	Output reflect.Type
	// Doc says, to a plugin's author, when the hook is called and what its
	// answer may change: the PDKs' documentation of the hook is made from
	// it (abi/internal/gen), after "registers the <name> hook".
	Doc string
}

//go:generate go run ./internal/gen -root ..

// Hooks is the one table of ABI v1's hooks, in the order the SPEC and the
// manifest list them: the engine hooks, the session middleware, then the
// pipeline stage handler. The host's exports, the engine's hook names, the
// conformance harness and the Go PDK's registry derive from it, and the
// PDKs' per-hook code is generated from it (go generate in abi, which runs
// abi/internal/gen): adding a hook is a row here, its payload types and
// their schemas, and the regenerated PDK files.
var Hooks = []Hook{
	{Name: HookBuildPrompt, Export: ExportBuildPrompt, Kind: EngineHook,
		Input: reflect.TypeOf(PromptInput{}), Output: reflect.TypeOf(PromptOutput{}),
		Doc: "it receives the task, the tools and the engine's default prompt, and returns the run's system prompt. " +
			"An empty system prompt counts as a failure and the engine uses its default."},
	{Name: HookBuildParams, Export: ExportBuildParams, Kind: EngineHook,
		Input: reflect.TypeOf(ParamsInput{}), Output: reflect.TypeOf(ParamsOutput{}),
		Doc: "the returned parameters override the run's base model parameters key by key, " +
			"for every model request of the run."},
	{Name: HookOnToolSuccess, Export: ExportOnToolSuccess, Kind: EngineHook,
		Input: reflect.TypeOf(ToolSuccessInput{}),
		Doc: "called after every tool call that was found and returned no error. " +
			"An error it returns is logged by the host; the tool's result stands."},
	{Name: HookFallbackFinal, Export: ExportFallbackFinal, Kind: EngineHook,
		Input: reflect.TypeOf(FallbackInput{}), Output: reflect.TypeOf(Final{}),
		Doc: "it gives the run's final answer when the model failed to conclude. " +
			"If it fails, the engine uses its default final."},
	{Name: HookOnTurnStart, Export: ExportOnTurnStart, Kind: Middleware,
		Input: reflect.TypeOf(TurnStart{}),
		Doc:   "a turn's input was recorded."},
	{Name: HookOnAction, Export: ExportOnAction, Kind: Middleware,
		Input: reflect.TypeOf(Action{}),
		Doc:   "the model asked for a tool, which has not run yet."},
	{Name: HookOnObservation, Export: ExportOnObservation, Kind: Middleware,
		Input: reflect.TypeOf(Observation{}),
		Doc:   "a tool's result was written back to the conversation."},
	{Name: HookOnFinal, Export: ExportOnFinal, Kind: Middleware,
		Input: reflect.TypeOf(TurnEnd{}),
		Doc:   "a turn ended, on whichever path (its status says which); it is called exactly once per turn."},
	{Name: HookBeforeRun, Export: ExportBeforeRun, Kind: Middleware,
		Input: reflect.TypeOf(BeforeRunInput{}), Output: reflect.TypeOf(BeforeRunOutput{}),
		Doc: "called before a turn's first model call; its output may replace the system prompt " +
			"(empty: unchanged) and narrow the tools to a subset (absent: unchanged)."},
	{Name: HookAfterRun, Export: ExportAfterRun, Kind: Middleware,
		Input: reflect.TypeOf(AfterRunInput{}),
		Doc:   "how a turn ended, after on_final."},
	{Name: HookBeforeToolCall, Export: ExportBeforeToolCall, Kind: Middleware,
		Input: reflect.TypeOf(BeforeToolCallInput{}), Output: reflect.TypeOf(BeforeToolCallOutput{}),
		Doc: "called before a tool runs; its output may rewrite the input (absent: unchanged) " +
			"or deny the call (deny, with the reason the model sees as the observation)."},
	{Name: HookAfterToolCall, Export: ExportAfterToolCall, Kind: Middleware,
		Input: reflect.TypeOf(AfterToolCallInput{}), Output: reflect.TypeOf(AfterToolCallOutput{}),
		Doc: "called after a tool returned (or failed, is_error); its output may rewrite what the model sees " +
			"(absent output: unchanged), to redact a secret, say."},
	{Name: HookHandleStage, Export: ExportHandleStage, Kind: StageHandler,
		Input: reflect.TypeOf(StageInput{}), Output: reflect.TypeOf(StageOutcome{}),
		Doc: "it runs the stages of morph's pipelines whose node's type is \"wasm:<plugin>\" (SPEC section 11), " +
			"and answers the stage's outcome, whose status is required. The host checks the outcome " +
			"(the section's rules: bounded names, counts and sizes, no context key the pipeline runner owns) " +
			"and fails the stage on one that breaks a rule, as it does on an error or a panic."},
}

// Export describes one guest export of ABI v1 of the shape
// (ptr i32, len i32) -> i64 (the marker and morph_alloc have others).
type Export struct {
	Name string   // the export's name, morph_*
	Kind HookKind //
	// Hook is the hook of Hooks it serves; "" for an export that is no hook.
	Hook   string
	Input  reflect.Type // the payload it is called with; nil: empty input
	Output reflect.Type // the payload it answers; nil when it answers nothing
}

// Exports are every (ptr, len) -> i64 export of ABI v1: the hooks', in
// Hooks' order, then the tools' and the lifecycle's. A module a PDK builds
// has each one (abi/internal/gen writes the Go PDK's from this table).
var Exports = append(hookExports(), []Export{
	{Name: ExportDescribe, Kind: Lifecycle, Output: reflect.TypeOf(Manifest{})},
	{Name: ExportCallTool, Kind: Tool, Input: reflect.TypeOf(ToolCallInput{}), Output: reflect.TypeOf(ToolCallOutput{})},
	{Name: ExportDestroy, Kind: Lifecycle},
	{Name: ExportInstanceReplaced, Kind: Lifecycle, Input: reflect.TypeOf(InstanceReplaced{})},
}...)

// hookExports are the exports of Hooks.
func hookExports() []Export {
	out := make([]Export, 0, len(Hooks))
	for _, h := range Hooks {
		out = append(out, Export{Name: h.Export, Kind: h.Kind, Hook: h.Name, Input: h.Input, Output: h.Output})
	}
	return out
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
