package main

import (
	"strings"
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
	if out.Output != 451.5 || out.StopReason != "final" || m.LLMRounds != 2 || m.ToolCalls != 1 {
		t.Errorf("output %v, stop %q, %d rounds, %d tool calls; want 451.5, final, 2, 1", out.Output, out.StopReason, m.LLMRounds, m.ToolCalls)
	}
	if m.InputTokens != 230 || m.OutputTokens != 22 || m.TotalTokens != 252 {
		t.Errorf("tokens %d in, %d out, %d total; want the server's 230, 22, 252", m.InputTokens, m.OutputTokens, m.TotalTokens)
	}
	if !strings.Contains(stderr, "step 1  tool calc  tokens 110 (+110)") || !strings.Contains(stderr, "step 2  final  tokens 252 (+142)") {
		t.Errorf("progress lines:\n%s", stderr)
	}
}
