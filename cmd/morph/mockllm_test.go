package main

import (
	"testing"

	"github.com/morphhost/morph/internal/mockllm"
)

// TestRunAgainstMockLLM runs morph run, engine and model client, against
// mock-llm (internal/mockllm), an OpenAI-compatible mock server that others
// wrote: a calc tool call, then a final answer that the server gives only
// when the last message carries calc's result.
func TestRunAgainstMockLLM(t *testing.T) {
	s := mockllm.Start(t)
	const (
		call  = `{"type":"tool_call","tool_call":{"thought":"compute","tool_name":"calc","tool_params":{"expression":"0.175 * 2340 + sqrt(1764)"}}}`
		final = `{"type":"final","final":{"thought":"calc says 451.5","output":451.5}}`
	)
	s.Configure(t,
		mockllm.Rule{Status: 400, Body: mockllm.Error("no rule matched this request", "invalid_request_error", "")},
		mockllm.Rule{Nth: 1, Match: "body.response_format.type == 'json_object'",
			Body: mockllm.Completion(call, `{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}`)},
		mockllm.Rule{Nth: 2, Match: "contains(body.messages[-1].content, 'Tool Result (calc):\n451.5')",
			Body: mockllm.Completion(final, `{"prompt_tokens":130,"completion_tokens":12,"total_tokens":142}`)},
	)
	cfg := serverConfig(t, s.URL+"/v1", "[tools]\nbuiltin = [\"calc\"]\n")
	code, stdout, stderr := morph(t, "", "run", "--config", cfg, "What is 17.5% of 2,340 plus the square root of 1,764?")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	out := decode(t, stdout) // no "usage_estimated": the server's counts
	m := out.Metrics
	if out.Output != 451.5 {
		t.Errorf("output = %v, want 451.5", out.Output)
	}
	if out.StopReason != "final" {
		t.Errorf("stop_reason = %q, want final", out.StopReason)
	}
	if m.LLMRounds != 2 {
		t.Errorf("llm_rounds = %d, want 2", m.LLMRounds)
	}
	if m.ToolCalls != 1 {
		t.Errorf("tool_calls = %d, want 1", m.ToolCalls)
	}
	// The server's counts.
	if m.InputTokens != 230 {
		t.Errorf("input_tokens = %d, want 230", m.InputTokens)
	}
	if m.OutputTokens != 22 {
		t.Errorf("output_tokens = %d, want 22", m.OutputTokens)
	}
	if m.TotalTokens != 252 {
		t.Errorf("total_tokens = %d, want 252", m.TotalTokens)
	}
	assertHas(t, "result", stdout, `"cost_unknown": true`) // [llm.pricing] has no price for the model
	assertHas(t, "progress lines", stderr, "step 1  tool calc  tokens 110 (+110)", "step 2  final  tokens 252 (+142)")
}
