package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/llm"
)

// Response types of the agent protocol.
const (
	TypeToolCall    = "tool_call"
	TypeFinal       = "final"
	TypeFinalAnswer = "final_answer" // alias of final; normalised to TypeFinal by ParseResponse
	TypePlan        = "plan"
)

// Parse errors, told apart with errors.Is.
var (
	// ErrNoJSON: the reply holds no JSON object anywhere.
	ErrNoJSON = errors.New("no JSON object in the reply")
	// ErrUnknownType: the object's "type" is not one of the protocol's.
	ErrUnknownType = errors.New("unknown response type")
	// ErrMissingPayload: the object names a type but lacks its payload.
	ErrMissingPayload = errors.New("response payload missing")
	// ErrMissingToolName: a tool_call without tool_name.
	ErrMissingToolName = errors.New("tool_call without tool_name")
	// ErrTooDeep: the object nests arrays and objects deeper than allowed.
	ErrTooDeep = errors.New("the JSON object is nested too deeply")
)

// maxDetail caps the model-written text (a type name, a decoder's message
// quoting a value) that a parse error repeats: the error goes back to the
// model, into the step record and onto the terminal.
const maxDetail = 200

// brief is err's text cut to maxDetail.
func brief(err error) string { return safetext.Truncate(err.Error(), maxDetail) }

// ToolCall is the model's request to run a tool.
type ToolCall struct {
	Thought    string         `json:"thought"`
	ToolName   string         `json:"tool_name"`
	ToolParams map[string]any `json:"tool_params"`
}

// AgentResponse is one parsed model reply. Type is TypeToolCall, TypeFinal or
// TypePlan, and exactly the matching field is set.
type AgentResponse struct {
	Type     string    `json:"type"`
	ToolCall *ToolCall `json:"tool_call,omitempty"`
	Final    *Final    `json:"final,omitempty"`
	Plan     *Plan     `json:"plan,omitempty"`
	// RawFinalAnswer holds the final payload's bytes as the model sent them, so
	// domain fields beyond thought and output survive; nil unless Type is final.
	RawFinalAnswer json.RawMessage `json:"-"`
}

// envelope is the protocol object before interpretation.
type envelope struct {
	Type        string          `json:"type"`
	ToolCall    json.RawMessage `json:"tool_call"`
	Final       json.RawMessage `json:"final"`
	FinalAnswer json.RawMessage `json:"final_answer"`
	Plan        json.RawMessage `json:"plan"`
}

// ParseResponse reads a model reply. It looks for the protocol object in this
// order: JSON the client already decoded, the whole text, a fenced code block,
// then the first balanced {...} in the text; the first candidate that is a
// JSON object is interpreted, unless it nests deeper than abi.MaxDepth
// (whoever re-encodes or pretty-prints it would do work and output out of
// all proportion to the reply). Errors wrap ErrNoJSON, ErrTooDeep,
// ErrUnknownType, ErrMissingPayload or ErrMissingToolName.
func ParseResponse(res llm.Result) (*AgentResponse, error) {
	return ParseResponseDepth(res, abi.MaxDepth)
}

// ParseResponseDepth is ParseResponse with maxDepth in place of
// abi.MaxDepth, as WithMaxJSONDepth sets it for a run.
//
// When the reply cannot be used and the server cut it off at its token
// limit (res.FinishReason is llm.FinishLength), the error also wraps
// llm.ErrTruncated and says so first, since the cut is the cause.
func ParseResponseDepth(res llm.Result, maxDepth int) (*AgentResponse, error) {
	resp, err := parseResponse(res, maxDepth)
	if err != nil && res.FinishReason == llm.FinishLength {
		err = fmt.Errorf("%w: %w", llm.ErrTruncated, err)
	}
	return resp, err
}

func parseResponse(res llm.Result, maxDepth int) (*AgentResponse, error) {
	obj, err := findObject(res, maxDepth)
	if err != nil {
		return nil, err
	}
	if err := abi.CheckDepth(obj, maxDepth); err != nil {
		return nil, fmt.Errorf("%w: %v; nest at most %d levels", ErrTooDeep, err, maxDepth)
	}
	var env envelope
	if err := json.Unmarshal(obj, &env); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNoJSON, brief(err))
	}
	switch typ := strings.ToLower(strings.TrimSpace(env.Type)); typ {
	case TypeFinal, TypeFinalAnswer:
		return parseFinal(env)
	case TypeToolCall:
		return parseToolCall(env.ToolCall)
	case TypePlan:
		return parsePlan(env.Plan)
	case "":
		// No type: infer it from the payload present, final first.
		switch {
		case present(env.FinalAnswer) || present(env.Final):
			return parseFinal(env)
		case present(env.ToolCall):
			return parseToolCall(env.ToolCall)
		case present(env.Plan):
			return parsePlan(env.Plan)
		}
		return nil, fmt.Errorf("%w: the object has no \"type\" and none of tool_call, final, final_answer, plan", ErrUnknownType)
	default:
		return nil, fmt.Errorf("%w %q: want tool_call, final, final_answer or plan", ErrUnknownType, safetext.Truncate(env.Type, maxDetail))
	}
}

func present(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

func parseFinal(env envelope) (*AgentResponse, error) {
	raw := env.Final
	if present(env.FinalAnswer) { // final_answer wins when both are present
		raw = env.FinalAnswer
	}
	if !present(raw) {
		return nil, fmt.Errorf("%w: type %q needs a final or final_answer object", ErrMissingPayload, safetext.Truncate(env.Type, maxDetail))
	}
	final := &Final{}
	if raw[0] == '{' {
		if err := json.Unmarshal(raw, final); err != nil {
			return nil, fmt.Errorf("%w: final: %s", ErrMissingPayload, brief(err))
		}
	} else {
		// A bare value ("final": "42") is the output itself.
		if err := json.Unmarshal(raw, &final.Output); err != nil {
			return nil, fmt.Errorf("%w: final: %s", ErrMissingPayload, brief(err))
		}
	}
	return &AgentResponse{Type: TypeFinal, Final: final, RawFinalAnswer: append(json.RawMessage(nil), raw...)}, nil
}

func parseToolCall(raw json.RawMessage) (*AgentResponse, error) {
	if !present(raw) {
		return nil, fmt.Errorf("%w: type tool_call needs a tool_call object", ErrMissingPayload)
	}
	var tc ToolCall
	if err := json.Unmarshal(raw, &tc); err != nil {
		return nil, fmt.Errorf("%w: tool_call: %s", ErrMissingPayload, brief(err))
	}
	if strings.TrimSpace(tc.ToolName) == "" {
		return nil, ErrMissingToolName
	}
	if tc.ToolParams == nil {
		tc.ToolParams = map[string]any{}
	}
	return &AgentResponse{Type: TypeToolCall, ToolCall: &tc}, nil
}

func parsePlan(raw json.RawMessage) (*AgentResponse, error) {
	if !present(raw) {
		return nil, fmt.Errorf("%w: type plan needs a plan object", ErrMissingPayload)
	}
	var p Plan
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("%w: plan: %s", ErrMissingPayload, brief(err))
	}
	return &AgentResponse{Type: TypePlan, Plan: &p}, nil
}

// findObject returns the first candidate, in protocol order, that is a
// JSON object; a {...} in the text nested deeper than maxDepth is passed
// over.
func findObject(res llm.Result, maxDepth int) ([]byte, error) {
	if res.JSON != nil {
		if b, err := json.Marshal(res.JSON); err == nil && isObject(b) {
			return b, nil
		}
	}
	text := strings.TrimSpace(res.Text)
	if isObject([]byte(text)) {
		return []byte(text), nil
	}
	if block, ok := fencedBlock(text); ok && isObject([]byte(block)) {
		return []byte(block), nil
	}
	if obj, ok := firstBalancedObject(text, maxDepth); ok {
		return []byte(obj), nil
	}
	return nil, ErrNoJSON
}

func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// fencedBlock returns the body of the first ``` code block, preferring one
// tagged json.
func fencedBlock(text string) (string, bool) {
	var first string
	found := false
	for rest := text; ; {
		start := strings.Index(rest, "```")
		if start < 0 {
			break
		}
		rest = rest[start+3:]
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			break
		}
		lang := strings.TrimSpace(rest[:nl])
		body := rest[nl+1:]
		end := strings.Index(body, "```")
		if end < 0 {
			break
		}
		block := strings.TrimSpace(body[:end])
		rest = body[end+3:]
		if strings.EqualFold(lang, "json") {
			return block, true
		}
		if !found {
			first, found = block, true
		}
	}
	return first, found
}

// firstBalancedObject scans for the first {...} that is valid JSON, skipping
// braces inside strings. A candidate that nests braces deeper than
// maxDepth is given up (it would be refused), and the scans read at most
// scanFactor times the text in all: from every brace of a reply made of
// them, a plain scan is quadratic (seconds for 50 KB).
func firstBalancedObject(text string, maxDepth int) (string, bool) {
	budget := scanFactor * len(text)
	for start := strings.IndexByte(text, '{'); start >= 0; {
		depth, inString, escaped := 0, false, false
		for i := start; i < len(text); i++ {
			if budget--; budget < 0 {
				return "", false
			}
			c := text[i]
			switch {
			case escaped:
				escaped = false
			case inString && c == '\\':
				escaped = true
			case c == '"':
				inString = !inString
			case inString:
			case c == '{':
				if depth++; depth > maxDepth {
					i = len(text) // too deep: try the next opening brace
				}
			case c == '}':
				depth--
				if depth == 0 {
					if cand := text[start : i+1]; json.Valid([]byte(cand)) {
						return cand, true
					}
					i = len(text) // invalid: try the next opening brace
				}
			}
		}
		next := strings.IndexByte(text[start+1:], '{')
		if next < 0 {
			break
		}
		start += 1 + next
	}
	return "", false
}

// scanFactor bounds firstBalancedObject's reading, whatever the depth
// limit: with the default one, a scan given up for depth reads at most
// abi.MaxDepth braces' worth past its start.
const scanFactor = abi.MaxDepth + 2
