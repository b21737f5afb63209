package conform

import (
	"encoding/json"
	"io/fs"
	"reflect"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/abi/schema"
	"github.com/morphhost/morph/engine"
)

// Sample identifiers, from the examples of abi/SPEC.md.
const (
	sampleSession = "s-7f3a"
	sampleTask    = "Count the words of the first sentence: the quick brown fox jumps over the lazy dog."
)

// hookSamples is the built-in input of every hook of abi.Hooks: the
// sample of its input type (see sampleInputs), or else the first example
// of its input's schema (abi/schema/), so that a new hook needs no code
// here; a hook with neither has none, which the runner reports.
func hookSamples(m abi.Manifest) map[string]any {
	byType := map[reflect.Type]any{}
	for _, v := range sampleInputs(m) {
		byType[reflect.TypeOf(v)] = v
	}
	out := make(map[string]any, len(abi.Hooks))
	for _, h := range abi.Hooks {
		if v, ok := byType[h.Input]; ok {
			out[h.Name] = v
		} else if v, ok := schemaExample(h.Input); ok {
			out[h.Name] = v
		}
	}
	return out
}

// schemaExample is the first of the examples of t's schema, as a t.
func schemaExample(t reflect.Type) (any, bool) {
	file, ok := schema.File(t)
	if !ok {
		return nil, false
	}
	raw, err := fs.ReadFile(schema.FS, file)
	if err != nil {
		return nil, false
	}
	var doc struct{ Examples []json.RawMessage }
	if json.Unmarshal(raw, &doc) != nil || len(doc.Examples) == 0 {
		return nil, false
	}
	v := reflect.New(t)
	if json.Unmarshal(doc.Examples[0], v.Interface()) != nil {
		return nil, false // abi's schema tests check every example decodes
	}
	return v.Elem().Interface(), true
}

// sampleInputs are the built-in input payloads, one of each hook's input
// type, the examples of abi/SPEC.md as abi values. The tools are the
// plugin's own (SPEC.md's word_count when it has none), the prompt input's
// default prompt is the engine's for them, and the middleware inputs carry
// a two-message history when the manifest asks for one, as the engine
// would send. A new hook's input type may have one here, or an example in
// its schema (hookSamples).
func sampleInputs(m abi.Manifest) []any {
	tools := m.Tools
	if len(tools) == 0 {
		tools = []abi.ToolSpec{{Name: "word_count", Description: "Counts words",
			Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}}
	}
	names := toolNames(tools)
	var history []abi.Message
	if m.History {
		history = []abi.Message{
			{Role: "user", Content: "Count the words of the first sentence."},
			{Role: "assistant", Content: `{"thought":"Counted them.","output":5}`},
		}
	}
	usage := abi.Usage{InputTokens: 1700, OutputTokens: 95, TotalTokens: 1795, Cost: 0.0006}
	final := abi.Final{Thought: "Counted with the tool.", Output: 9,
		Plan: &abi.Plan{Summary: "count the words", Steps: []abi.PlanStep{{Step: "count them", Status: abi.StepCompleted}}}}
	finalText, _ := json.Marshal(final)
	params := map[string]any{"text": "the quick brown fox"}
	if len(m.Tools) > 0 {
		if p, err := SampleParams(m.Tools[0].Parameters); err == nil {
			params = p
		}
	}
	return []any{
		abi.PromptInput{Task: sampleTask, Tools: tools,
			DefaultPrompt: engine.DefaultPrompt(engine.DefaultIdentity, engine.DefaultRules, tools)},
		abi.ParamsInput{Task: sampleTask, Options: abi.RunOptions{Model: "gpt-4o-mini", MaxSteps: 15, ParseRetries: 2,
			Parameters: map[string]any{"temperature": 0.2}}},
		abi.ToolSuccessInput{Tool: names[0], Step: 3, Params: params, Observation: "4"},
		abi.FallbackInput{Task: sampleTask,
			Reason: "reached max steps (15); the forced conclusion did not parse: invalid character 'H' looking for beginning of value",
			Steps:  15, Usage: abi.Usage{InputTokens: 1200, OutputTokens: 300, TotalTokens: 1500, Cost: 0.0042}},
		abi.TurnStart{SessionID: sampleSession, Turn: 2, Input: "And the second sentence?", History: history},
		abi.BeforeRunInput{SessionID: sampleSession, Turn: 2, SystemPrompt: engine.DefaultPrompt(engine.DefaultIdentity, engine.DefaultRules, tools),
			Tools: names, Model: "gpt-4o-mini"},
		abi.Action{SessionID: sampleSession, Turn: 2, Step: 1, Tool: names[0], Thought: "Count them with the tool.",
			Input: params, History: history},
		abi.BeforeToolCallInput{SessionID: sampleSession, Turn: 2, Step: 1, Tool: names[0], Input: params},
		abi.AfterToolCallInput{SessionID: sampleSession, Turn: 2, Step: 1, Tool: names[0], Input: params, Output: "4"},
		abi.Observation{SessionID: sampleSession, Turn: 2, Step: 1, Tool: names[0], Observation: "4",
			History: history},
		abi.TurnEnd{SessionID: sampleSession, Turn: 2, Step: 2, Final: string(finalText), Status: abi.StatusFinal,
			StepUsage: abi.Usage{InputTokens: 900, OutputTokens: 40, TotalTokens: 940, Cost: 0.0003}, TurnUsage: usage},
		abi.AfterRunInput{SessionID: sampleSession, Turn: 2, Final: &final, Status: abi.StatusFinal, Usage: usage, Steps: 2},
		abi.StageInput{NodeID: "verify", Attrs: map[string]string{"type": "wasm:" + m.Name, "label": "Verify"},
			Goal: sampleTask, Context: map[string]any{"graph.goal": sampleTask, "outcome": abi.StageSuccess, "last_stage": "count",
				"last_response": string(finalText)},
			Previous: &abi.StageOutcome{Status: abi.StageSuccess, Notes: "counted"}},
	}
}

func toolNames(tools []abi.ToolSpec) []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return names
}
