// Package scripted is a deterministic offline model: it replays replies from
// a script, in order, so demos and tests run without a network or an API key.
//
// # Script files
//
// Load reads a JSON script:
//
//	{
//	  "model": "scripted-demo",
//	  "replies": [
//	    {"reply": {"type": "plan", "plan": {"steps": ["compute"]}}, "input_tokens": 812, "output_tokens": 40},
//	    {"reply": "plain text is sent verbatim"}
//	  ]
//	}
//
// A reply that is a JSON string is sent verbatim as the reply text; any other
// JSON value (an object, usually) is sent as its compact JSON text, with its
// keys in the order the file has them. "model" is optional (default
// DefaultModel); unknown keys are errors, so a misspelt field does not go
// unnoticed.
//
// # Token counts and cost
//
// A reply's input_tokens and output_tokens are reported as given. When one is
// omitted (or 0) it is estimated with llm.EstimateTokens, at about four characters a token: output
// tokens as len(reply text)/4, input tokens as the summed length of the
// request's message contents /4, each at least 1. The cost is computed with
// the llm.Pricing given to the client (see WithPricing), for the request's
// model, or the script's model when the request names none; a model
// without a price costs 0 with Usage.CostUnknown set (see llm.Pricer).
//
// # Streaming
//
// When the request sets llm.Request.Stream, Chat passes the reply text to it
// in deterministic pieces before returning: the text is cut after each run
// of white space ("the quick  brown" → "the ", "quick  ", "brown"), and any
// piece still longer than 16 bytes is cut every 16 bytes or so, never inside
// a UTF-8 character. Empty pieces are never sent, so an empty reply sends
// none. Chat checks ctx between pieces and returns ctx.Err() if it ends
// mid-reply; the reply counts as used.
//
// # Callers that number their calls
//
// A caller whose calls of one conversation run on several processes, each
// with a client of its own (a durable workflow's model calls, each on
// whichever worker takes it, perhaps twice when a worker is lost), cannot
// rely on a client's place in the script: it numbers its calls itself and
// passes the number in the call's context (WithReplyIndex), and Chat
// answers that reply of the script, without moving the client's place.
// Every other call takes the next reply, as above.
//
// # Options
//
// New takes functional options: WithModel, WithPricing and WithSource.
// Load sets all three from its arguments and the file.
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strings"
	"sync"
	"unicode"

	"github.com/morphhost/morph/llm"
)

// DefaultModel is the model name of a script that names none.
const DefaultModel = "scripted"

// ErrExhausted is matched (errors.Is) by the error Chat returns when every
// reply of the script has been used. The error itself is an *ExhaustedError.
var ErrExhausted = errors.New("scripted model: script exhausted")

// ExhaustedError is the error Chat returns once the script has run out. It
// matches ErrExhausted.
type ExhaustedError struct {
	Source  string // the script file, or "" for a script built with New and no WithSource
	Replies int    // how many replies the script had, all of them used
}

// Error says how many replies the script had and names its file.
func (e *ExhaustedError) Error() string {
	if e.Source == "" {
		return fmt.Sprintf("scripted model: the script ran out after %d replies", e.Replies)
	}
	return fmt.Sprintf("scripted model: the script %s ran out after %d replies", e.Source, e.Replies)
}

// Is reports whether target is ErrExhausted.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// Reply is one scripted model reply.
type Reply struct {
	Text         string // sent as the reply text, verbatim
	InputTokens  int    // 0: estimated from the request
	OutputTokens int    // 0: estimated from Text
}

// Texts returns one Reply per text, with estimated token counts.
func Texts(texts ...string) []Reply {
	replies := make([]Reply, len(texts))
	for i, t := range texts {
		replies[i] = Reply{Text: t}
	}
	return replies
}

// Client replays a script. It implements llm.Client and is safe for
// concurrent use: concurrent calls take the replies in the order they get
// the client's lock.
type Client struct {
	model   string
	source  string
	pricing llm.Pricing
	logger  *slog.Logger
	pricer  *llm.Pricer

	mu       sync.Mutex
	replies  []Reply
	next     int
	requests []llm.Request
}

// Option configures a Client built with New.
type Option func(*Client)

// WithModel sets the model name used for pricing when a request names no
// model (default DefaultModel).
func WithModel(name string) Option { return func(c *Client) { c.model = name } }

// WithPricing sets the prices used to compute each reply's cost (default
// none: every cost is 0, and unknown, as for any model without a price:
// see llm.Pricer).
func WithPricing(p llm.Pricing) Option { return func(c *Client) { c.pricing = p } }

// WithLogger sets the logger of the warning of a model without a price
// (llm.UnpricedMessage); default slog.Default() at the time of logging.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.logger = l } }

// WithSource names where the script came from (a file path) in errors.
func WithSource(name string) Option { return func(c *Client) { c.source = name } }

// New returns a client that replays replies in order. The slice is copied.
func New(replies []Reply, opts ...Option) *Client {
	c := &Client{model: DefaultModel, replies: append([]Reply(nil), replies...)}
	for _, o := range opts {
		o(c)
	}
	c.pricer = llm.NewPricer(c.pricing, c.logger)
	return c
}

// Load reads the script file at path (see the package doc for its format)
// and returns a client that replays it, priced with pricing (nil: every
// call costs 0 marked unknown, warned of once: see llm.Pricer),
// with opts applied after. Errors name the file and, for a bad reply, its
// index: "replies[3]: ...".
func Load(path string, pricing llm.Pricing, opts ...Option) (*Client, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	model, replies, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("scripted model: %s: %w", path, err)
	}
	return New(replies, append([]Option{WithModel(model), WithPricing(pricing), WithSource(path)}, opts...)...), nil
}

// Model returns the script's model name.
func (c *Client) Model() string { return c.model }

// Len returns the number of replies in the script.
func (c *Client) Len() int { return len(c.replies) }

// Remaining returns the number of replies not yet sent.
func (c *Client) Remaining() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.replies) - c.next
}

// Requests returns a copy of every request Chat received with a live
// context, in order, including one that found the script exhausted.
func (c *Client) Requests() []llm.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]llm.Request, len(c.requests))
	for i, r := range c.requests {
		out[i] = copyRequest(r)
	}
	return out
}

// replyIndexKey is the context key of WithReplyIndex.
type replyIndexKey struct{}

// WithReplyIndex is ctx for a call that Chat answers with the script's
// reply i (from 0), rather than the next: a caller that numbers its calls
// (see the package doc).
func WithReplyIndex(ctx context.Context, i int) context.Context {
	return context.WithValue(ctx, replyIndexKey{}, i)
}

// Chat returns the next reply of the script, or the one WithReplyIndex
// gave ctx. It returns ctx.Err() without
// using a reply when ctx is done, and an *ExhaustedError (errors.Is
// ErrExhausted) once every reply has been used. With req.Stream set it first
// passes the reply to req.Stream in pieces (see the package doc), without
// holding the client's lock, so Stream may call the client's other methods.
func (c *Client) Chat(ctx context.Context, req llm.Request) (llm.Result, error) {
	if err := ctx.Err(); err != nil {
		return llm.Result{}, err
	}
	at, numbered := ctx.Value(replyIndexKey{}).(int)
	res, err := c.take(ctx, req, at, numbered)
	if err != nil || req.Stream == nil {
		return res, err
	}
	for _, p := range pieces(res.Text) {
		if err := ctx.Err(); err != nil {
			return llm.Result{}, err
		}
		req.Stream(p)
	}
	return res, nil
}

// take records req and uses the next reply, or reply at when numbered.
func (c *Client) take(ctx context.Context, req llm.Request, at int, numbered bool) (llm.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, copyRequest(req))
	if !numbered {
		at = c.next
	}
	if at < 0 || at >= len(c.replies) {
		return llm.Result{}, &ExhaustedError{Source: c.source, Replies: len(c.replies)}
	}
	r := c.replies[at]
	if !numbered {
		c.next++
	}

	u := llm.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens}
	if u.InputTokens <= 0 {
		n := 0
		for _, m := range req.Messages {
			n += len(m.Content)
		}
		u.InputTokens = llm.EstimateTokens(n)
	}
	if u.OutputTokens <= 0 {
		u.OutputTokens = llm.EstimateTokens(len(r.Text))
	}
	u.TotalTokens = u.InputTokens + u.OutputTokens
	model := req.Model
	if model == "" {
		model = c.model
	}
	u = c.pricer.Price(ctx, model, u)
	return llm.Result{Text: r.Text, Usage: u}, nil
}

// maxPiece is about the longest piece a streamed reply is cut into.
const maxPiece = 16

// pieces cuts text for streaming: after each run of white space, and within
// a longer stretch every maxPiece bytes or so, at a character boundary.
func pieces(text string) []string {
	var out []string
	start, prevSpace := 0, false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if i > start && (prevSpace && !space || i-start >= maxPiece) {
			out = append(out, text[start:i])
			start = i
		}
		prevSpace = space
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

func copyRequest(r llm.Request) llm.Request {
	r.Messages = append([]llm.Message(nil), r.Messages...)
	r.Parameters = maps.Clone(r.Parameters)
	return r
}

// file is the script file's shape; replies are decoded one by one so that
// errors can name their index.
type file struct {
	Model   *string           `json:"model"`
	Replies []json.RawMessage `json:"replies"`
}

type fileReply struct {
	Reply        json.RawMessage `json:"reply"`
	InputTokens  int             `json:"input_tokens"`
	OutputTokens int             `json:"output_tokens"`
}

func parse(data []byte) (model string, replies []Reply, err error) {
	var f file
	if err := decodeStrict(data, &f); err != nil {
		return "", nil, err
	}
	model = DefaultModel
	if f.Model != nil {
		if model = strings.TrimSpace(*f.Model); model == "" {
			return "", nil, errors.New("model: must not be empty (omit it for the default)")
		}
	}
	if f.Replies == nil {
		return "", nil, errors.New(`missing "replies" (a list of {"reply": ...} objects)`)
	}
	if len(f.Replies) == 0 {
		return "", nil, errors.New("replies: the list is empty")
	}
	replies = make([]Reply, len(f.Replies))
	for i, raw := range f.Replies {
		var fr fileReply
		if err := decodeStrict(raw, &fr); err != nil {
			return "", nil, fmt.Errorf("replies[%d]: %w", i, err)
		}
		text, err := replyText(fr.Reply)
		if err != nil {
			return "", nil, fmt.Errorf("replies[%d]: %w", i, err)
		}
		if fr.InputTokens < 0 {
			return "", nil, fmt.Errorf("replies[%d].input_tokens: must not be negative, got %d", i, fr.InputTokens)
		}
		if fr.OutputTokens < 0 {
			return "", nil, fmt.Errorf("replies[%d].output_tokens: must not be negative, got %d", i, fr.OutputTokens)
		}
		replies[i] = Reply{Text: text, InputTokens: fr.InputTokens, OutputTokens: fr.OutputTokens}
	}
	return model, replies, nil
}

// replyText is the text a reply value is sent as: a string verbatim, any
// other value as compact JSON.
func replyText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", errors.New(`missing "reply" (the model's reply: a JSON object, or a string sent verbatim)`)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("reply: %w", err)
		}
		return s, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", fmt.Errorf("reply: %w", err)
	}
	return b.String(), nil
}

// decodeStrict decodes one JSON value into v, rejecting unknown fields and
// trailing data, with errors that say where and what.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(data, err)
	}
	if dec.More() {
		return fmt.Errorf("%s: unexpected data after the top-level value", position(data, dec.InputOffset()))
	}
	return nil
}

func describeJSONError(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		// Offset counts the bytes read, the offending one included.
		return fmt.Errorf("%s: invalid JSON: %v", position(data, max(0, syn.Offset-1)), syn)
	case errors.As(err, &typ):
		msg := fmt.Sprintf("want %s, got %s", jsonKind(typ.Type.Kind().String()), typ.Value)
		if typ.Field != "" {
			msg = typ.Field + ": " + msg
		}
		return errors.New(msg)
	case errors.Is(err, io.EOF):
		return errors.New("empty file: want a JSON object")
	}
	// Unknown fields: encoding/json says `json: unknown field "x"`.
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "float64":
		return "number"
	case "slice":
		return "array"
	case "struct", "map":
		return "object"
	}
	return goKind
}

// position turns a byte offset into "line L, column C".
func position(data []byte, offset int64) string {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}
