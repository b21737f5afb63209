package engine

import (
	"encoding/json"

	"github.com/morphhost/morph/llm"
)

// ResponseSchema is the JSON Schema of the response protocol (see
// ParseResponse): one object whose type is tool_call, plan or final, with
// the matching payload. The engine sends it with every model request
// (llm.Request.ResponseSchema); a client in structured-output mode (the
// openai client's JSON mode "json_schema") has the server hold the reply to
// it. It is kept loose where the protocol is (a tool's parameters, a
// final's output are any JSON), so a server's schema support need not go
// beyond objects, strings, arrays and enums.
var ResponseSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "type": {"type": "string", "enum": ["tool_call", "plan", "final"]},
    "tool_call": {
      "type": "object",
      "properties": {
        "thought": {"type": "string"},
        "tool_name": {"type": "string"},
        "tool_params": {"type": "object"}
      },
      "required": ["thought", "tool_name", "tool_params"]
    },
    "plan": {
      "type": "object",
      "properties": {
        "thought": {"type": "string"},
        "summary": {"type": "string"},
        "steps": {
          "type": "array",
          "items": {
            "type": "object",
            "properties": {
              "step": {"type": "string"},
              "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
            },
            "required": ["step", "status"]
          }
        },
        "risks": {"type": "array", "items": {"type": "string"}},
        "questions": {"type": "array", "items": {"type": "string"}},
        "completion": {"type": "string"}
      },
      "required": ["thought", "steps"]
    },
    "final": {
      "type": "object",
      "properties": {
        "thought": {"type": "string"},
        "output": {}
      },
      "required": ["thought", "output"]
    }
  },
  "required": ["type"]
}`)

// responseSchema is ResponseSchema as a request carries it.
var responseSchema = &llm.JSONSchema{Name: "morph_response", Schema: ResponseSchema}
