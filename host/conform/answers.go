package conform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/morphhost/morph/abi"
)

// The output checks: the schemas of abi/schema/, in Go.

// field is what a schema says of one property: whether it is required and
// the JSON types it may have (none listed: any).
type field struct {
	name     string
	required bool
	types    []string
}

// checkPayload checks out against an object schema of fields: out must be a
// JSON object (or, with emptyOK, no bytes at all: the zero payload), with
// every required field and every listed field of an allowed type. Field
// names are exact: encoding/json would match them case-insensitively.
// Unknown fields are allowed (SPEC.md section 7).
func checkPayload(typ string, out []byte, emptyOK bool, fields ...field) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(out)) == 0 {
		if emptyOK {
			return map[string]json.RawMessage{}, nil
		}
		return nil, fmt.Errorf("empty output: the export must answer a %s object", typ)
	}
	var obj map[string]json.RawMessage
	if t := jsonType(out); t != "object" {
		return nil, fmt.Errorf("a JSON %s, not a %s object", t, typ)
	}
	if err := json.Unmarshal(out, &obj); err != nil {
		return nil, fmt.Errorf("not a %s: %v", typ, err)
	}
	var errs []string
	for _, f := range fields {
		raw, ok := obj[f.name]
		if !ok {
			if f.required {
				errs = append(errs, fmt.Sprintf("%s lacks the required field %q", typ, f.name))
			}
			continue
		}
		if t := jsonType(raw); len(f.types) > 0 && !slices.Contains(f.types, t) &&
			!(t == "number" && slices.Contains(f.types, "integer")) {
			errs = append(errs, fmt.Sprintf("%s.%s is a JSON %s, want %s", typ, f.name, t, strings.Join(f.types, " or ")))
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return obj, nil
}

// checkPromptOutput: prompt_output.json; system_prompt is required and not blank.
func checkPromptOutput(out []byte) error {
	obj, err := checkPayload("PromptOutput", out, false, field{"system_prompt", true, []string{"string"}})
	if err != nil {
		return err
	}
	var s string
	if json.Unmarshal(obj["system_prompt"], &s); strings.TrimSpace(s) == "" {
		return errors.New("PromptOutput.system_prompt is blank: morph would use its default prompt")
	}
	return nil
}

// checkParamsOutput: params_output.json; the zero payload is no override.
func checkParamsOutput(out []byte) error {
	_, err := checkPayload("ParamsOutput", out, true, field{"parameters", false, []string{"object", "null"}})
	return err
}

// checkFinal: final.json and plan.json.
func checkFinal(out []byte) error {
	obj, err := checkPayload("Final", out, false,
		field{"thought", true, []string{"string"}}, field{"output", true, nil}, field{"plan", false, []string{"object"}})
	if err != nil {
		return err
	}
	raw, ok := obj["plan"]
	if !ok {
		return nil
	}
	plan, err := checkPayload("Plan", raw, false,
		field{"thought", false, []string{"string"}}, field{"summary", false, []string{"string"}},
		field{"steps", true, []string{"array"}}, field{"risks", false, []string{"array"}},
		field{"questions", false, []string{"array"}}, field{"completion", false, []string{"string"}})
	if err != nil {
		return fmt.Errorf("Final.plan: %v", err)
	}
	var steps []json.RawMessage
	if err := json.Unmarshal(plan["steps"], &steps); err != nil {
		return fmt.Errorf("Final.plan.steps: %v", err)
	}
	for i, st := range steps {
		if jsonType(st) == "string" {
			continue
		}
		step, err := checkPayload("PlanStep", st, false, field{"step", true, []string{"string"}}, field{"status", false, []string{"string"}})
		if err != nil {
			return fmt.Errorf("Final.plan.steps[%d]: %v (a step is a string or an object)", i, err)
		}
		if raw, ok := step["status"]; ok {
			var status string
			json.Unmarshal(raw, &status)
			if status != abi.StepPending && status != abi.StepInProgress && status != abi.StepCompleted {
				return fmt.Errorf("Final.plan.steps[%d].status is %q, want %s, %s or %s", i, status, abi.StepPending, abi.StepInProgress, abi.StepCompleted)
			}
		}
	}
	return nil
}

// checkToolCallOutput: tool_call_output.json; output is required.
func checkToolCallOutput(out []byte) error {
	_, err := checkPayload("ToolCallOutput", out, false, field{"output", true, []string{"string"}})
	return err
}

// checkBeforeRunOutput: before_run_output.json; tools may also be null
// (unchanged), as SPEC.md section 10.1 says.
func checkBeforeRunOutput(out []byte) error {
	obj, err := checkPayload("BeforeRunOutput", out, true,
		field{"system_prompt", false, []string{"string"}}, field{"tools", false, []string{"array", "null"}})
	if err != nil {
		return err
	}
	var tools []string
	if raw, ok := obj["tools"]; ok {
		if err := json.Unmarshal(raw, &tools); err != nil {
			return fmt.Errorf("BeforeRunOutput.tools is not a list of strings: %v", err)
		}
	}
	return nil
}

// checkBeforeToolCallOutput: before_tool_call_output.json; input may also be
// null (unchanged). A denial conforms, with a note.
func checkBeforeToolCallOutput(out []byte) (string, error) {
	obj, err := checkPayload("BeforeToolCallOutput", out, true,
		field{"input", false, []string{"object", "null"}}, field{"deny", false, []string{"boolean"}}, field{"reason", false, []string{"string"}})
	if err != nil {
		return "", err
	}
	var deny bool
	var reason string
	json.Unmarshal(obj["deny"], &deny)
	json.Unmarshal(obj["reason"], &reason)
	if deny {
		return fmt.Sprintf("denies the sample call (reason %q)", reason), nil
	}
	return "", nil
}

// checkAfterToolCallOutput: after_tool_call_output.json.
func checkAfterToolCallOutput(out []byte) error {
	_, err := checkPayload("AfterToolCallOutput", out, true, field{"output", false, []string{"string", "null"}})
	return err
}

// checkStageOutcome: stage_outcome.json, and the rules of SPEC.md section
// 11.2 the host applies (abi.StageOutcome.Check). A failed stage conforms,
// with a note: a handler that checks something may well fail the sample.
func checkStageOutcome(out []byte) (string, error) {
	if _, err := checkPayload("StageOutcome", out, false,
		field{"status", true, []string{"string"}}, field{"preferred_label", false, []string{"string"}},
		field{"suggested_next_ids", false, []string{"array"}}, field{"context_updates", false, []string{"object"}},
		field{"notes", false, []string{"string"}}, field{"failure_reason", false, []string{"string"}}); err != nil {
		return "", err
	}
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

// checkEmptyOutput: observing hooks and on_tool_success answer nothing, or
// JSON the host ignores; the host's decode has checked it is JSON.
func checkEmptyOutput([]byte) error { return nil }
