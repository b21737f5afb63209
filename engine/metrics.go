package engine

import (
	"encoding/json"
	"math"
	"time"
)

// metricsJSON is the JSON form of Metrics: the same names and units as the
// "metrics" object "morph run" prints, so that the library (Context's
// JSON) and the CLI say one thing one way. Durations are whole
// milliseconds, the cost is USD rounded to the nano-dollar (summing float
// costs leaves noise below it), and start_time is left out when unset.
type metricsJSON struct {
	LLMRounds      int        `json:"llm_rounds"`
	ToolCalls      int        `json:"tool_calls"`
	ParseRetries   int        `json:"parse_retries"`
	InputTokens    int        `json:"input_tokens"`
	OutputTokens   int        `json:"output_tokens"`
	TotalTokens    int        `json:"total_tokens"`
	CostUSD        float64    `json:"cost_usd"`
	ElapsedMS      int64      `json:"elapsed_ms"`
	LLMTimeMS      int64      `json:"llm_time_ms"`
	StartTime      *time.Time `json:"start_time,omitempty"`
	UsageEstimated bool       `json:"usage_estimated,omitempty"`
	CostUnknown    bool       `json:"cost_unknown,omitempty"`
}

// MarshalJSON writes the metrics with the names of "morph run"'s result:
// llm_rounds, tool_calls, parse_retries, input_tokens, output_tokens,
// total_tokens, cost_usd (TotalCost, rounded to the nano-dollar),
// elapsed_ms and llm_time_ms (Elapsed and LLMTime, in whole milliseconds),
// start_time (RFC 3339, absent when zero), usage_estimated and
// cost_unknown (each absent when false).
func (m Metrics) MarshalJSON() ([]byte, error) {
	j := metricsJSON{
		LLMRounds:      m.LLMRounds,
		ToolCalls:      m.ToolCalls,
		ParseRetries:   m.ParseRetries,
		InputTokens:    m.InputTokens,
		OutputTokens:   m.OutputTokens,
		TotalTokens:    m.TotalTokens,
		CostUSD:        math.Round(m.TotalCost*1e9) / 1e9,
		ElapsedMS:      m.Elapsed.Milliseconds(),
		LLMTimeMS:      m.LLMTime.Milliseconds(),
		UsageEstimated: m.UsageEstimated,
		CostUnknown:    m.CostUnknown,
	}
	if !m.StartTime.IsZero() {
		j.StartTime = &m.StartTime
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes (durations to the
// millisecond).
func (m *Metrics) UnmarshalJSON(b []byte) error {
	var j metricsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*m = Metrics{
		LLMRounds:      j.LLMRounds,
		ToolCalls:      j.ToolCalls,
		ParseRetries:   j.ParseRetries,
		InputTokens:    j.InputTokens,
		OutputTokens:   j.OutputTokens,
		TotalTokens:    j.TotalTokens,
		TotalCost:      j.CostUSD,
		Elapsed:        time.Duration(j.ElapsedMS) * time.Millisecond,
		LLMTime:        time.Duration(j.LLMTimeMS) * time.Millisecond,
		UsageEstimated: j.UsageEstimated,
		CostUnknown:    j.CostUnknown,
	}
	if j.StartTime != nil {
		m.StartTime = *j.StartTime
	}
	return nil
}
