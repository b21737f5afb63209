// Package llm is the model client interface the engine talks to, with the
// pricing that turns token counts into cost. Implementations live in
// subpackages: llm/openai for any OpenAI-compatible server, llm/scripted for
// deterministic offline replies.
package llm

import (
	"context"
	"time"

	"github.com/morphhost/morph/abi"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one chat call.
type Request struct {
	Model      string
	Messages   []Message
	ForceJSON  bool           // ask the server for a JSON object reply (JSON mode)
	Parameters map[string]any // temperature, top_p, max_tokens, ...; see the client for the keys it knows

	// Stream, when non-nil, asks the client to stream the reply: it calls
	// Stream with each piece of reply text as it arrives, in order, on the
	// goroutine that called Chat, and only before Chat returns. Pieces are
	// never empty, and when Chat succeeds their concatenation equals
	// Result.Text. Chat still returns the whole Result (text, usage,
	// duration) as without Stream. If Chat fails after some pieces were
	// delivered, they were part of a reply that will not be completed:
	// clients do not retry once text has been delivered. A client that
	// cannot stream calls Stream once with the whole text (if it is not
	// empty) before returning. Stream should return quickly: time spent in
	// it is part of the call.
	Stream func(delta string)
}

// Usage is the token and cost account of one call.
type Usage = abi.Usage

// Result is a model's reply.
type Result struct {
	Text     string
	JSON     any // the reply decoded as JSON when the client already did so; nil otherwise
	Usage    Usage
	Duration time.Duration
}

// Client is a chat model. Chat must honour ctx cancellation promptly.
type Client interface {
	Chat(ctx context.Context, req Request) (Result, error)
}

// ParameterChecker is implemented by clients that know which Parameters keys
// they can send. The engine calls it at the start of each run, after the
// params builder: parameters a builder added that fail are dropped with a
// warning, and base parameters that fail (a misspelt key in the operator's
// config) fail the run before any request instead of being silently dropped.
type ParameterChecker interface {
	CheckParameters(params map[string]any) error
}

// Price is what a model costs, in USD per million tokens.
type Price struct {
	InputPerMillion  float64 `toml:"input" json:"input"`
	OutputPerMillion float64 `toml:"output" json:"output"`
}

// Pricing maps model names to prices.
type Pricing map[string]Price

// Cost is the USD cost of u on model; 0 when the model has no price.
func (p Pricing) Cost(model string, u Usage) float64 {
	price, ok := p[model]
	if !ok {
		return 0
	}
	return (float64(u.InputTokens)*price.InputPerMillion + float64(u.OutputTokens)*price.OutputPerMillion) / 1e6
}
