// Package llm is the model client interface the engine talks to, with the
// pricing that turns token counts into cost. Implementations live in
// subpackages: llm/openai for any OpenAI-compatible server, llm/scripted for
// deterministic offline replies.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
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
	// Images go with Content to a model that takes images (a tool's
	// result with MCP image content, when the engine is told the model
	// takes them: engine.WithImages). A client that cannot send them drops
	// them; Content says what they show.
	Images []abi.Image `json:"images,omitempty"`
}

// Request is one chat call.
type Request struct {
	Model      string
	Messages   []Message
	ForceJSON  bool           // ask the server for a JSON object reply (JSON mode)
	Parameters map[string]any // temperature, top_p, max_tokens, ...; see the client for the keys it knows

	// ResponseSchema, with ForceJSON, is the JSON Schema the reply should
	// satisfy. A client configured for structured output sends it to the
	// server; others ask for a plain JSON object, or for nothing (see the
	// client's JSON mode). Nil means any JSON object.
	ResponseSchema *JSONSchema

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

// JSONSchema is a named JSON Schema for structured output.
type JSONSchema struct {
	// Name identifies the schema to the server: letters, digits, _ and -.
	Name string
	// Schema is the JSON Schema document.
	Schema json.RawMessage
}

// Usage is the token and cost account of one call.
type Usage = abi.Usage

// Result is a model's reply.
type Result struct {
	Text     string
	JSON     any // the reply decoded as JSON when the client already did so; nil otherwise
	Usage    Usage
	Duration time.Duration
	// UsageEstimated says Usage was estimated by the client (see
	// EstimateTokens) because the server reported none; the cost is then an
	// estimate too.
	UsageEstimated bool
	// FinishReason is why the model stopped, as the server said it
	// ("stop", FinishLength, ...); empty when the client does not know.
	FinishReason string
}

// EstimateTokens estimates the tokens of chars characters of text, at
// about four characters a token, at least 1: what clients report when the
// server gives no count.
func EstimateTokens(chars int) int {
	return max(1, (chars+3)/4)
}

// FinishLength is the FinishReason of a reply the server cut off at its
// token limit (the max_tokens parameter, or the model's context length).
const FinishLength = "length"

// ErrTruncated marks an unusable reply that the server cut off at its token
// limit (Result.FinishReason == FinishLength): raising the limit is then the
// fix, not a better prompt.
var ErrTruncated = errors.New("the reply was cut at its token limit (finish_reason \"length\"): raise [llm.parameters] max_tokens, or max_completion_tokens if that is the one set")

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

// Cost is the USD cost of u at price p.
func (p Price) Cost(u Usage) float64 {
	return (float64(u.InputTokens)*p.InputPerMillion + float64(u.OutputTokens)*p.OutputPerMillion) / 1e6
}

// Pricing maps model names to prices.
type Pricing map[string]Price

// UnpricedMessage is the message of the warning a Pricer logs for a model
// its Pricing has no price for, with the attributes model and priced (the
// models it has prices for, at most maxPricedNames of them).
const UnpricedMessage = "model has no price in [llm.pricing]: its calls count as 0 in the cost, which is marked unknown"

// maxPricedNames caps the priced models an UnpricedMessage warning lists.
const maxPricedNames = 8

// Pricer turns a call's token counts into its cost, for the clients. A
// model without a price costs 0 with Usage.CostUnknown set, so that "no
// price" never reads as "free"; the first such call of each model logs an
// UnpricedMessage warning, whether or not Pricing has prices for other
// models (a misspelt or forgotten entry, most likely, or no table at all):
// an operator watching stderr should not take the run for a free one. A
// Pricer is safe for concurrent use.
type Pricer struct {
	pricing Pricing
	logger  *slog.Logger
	warned  sync.Map // model name -> struct{}: warned of once
}

// NewPricer returns a Pricer of p that logs to logger (nil:
// slog.Default() at the time of logging).
func NewPricer(p Pricing, logger *slog.Logger) *Pricer {
	return &Pricer{pricing: p, logger: logger}
}

// Price returns u with its Cost for model, or with Cost 0 and CostUnknown
// set when the model has no price (logging a warning as Pricer says).
func (p *Pricer) Price(ctx context.Context, model string, u Usage) Usage {
	price, ok := p.pricing[model]
	if ok {
		u.Cost, u.CostUnknown = price.Cost(u), false
		return u
	}
	u.Cost, u.CostUnknown = 0, true
	if _, seen := p.warned.LoadOrStore(model, struct{}{}); !seen {
		priced := slices.Sorted(maps.Keys(p.pricing))
		if len(priced) > maxPricedNames {
			priced = append(priced[:maxPricedNames], "...")
		}
		logger := p.logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.WarnContext(ctx, UnpricedMessage, "model", model, "priced", priced)
	}
	return u
}
