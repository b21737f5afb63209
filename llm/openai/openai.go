// Package openai is the llm.Client for any server that speaks the OpenAI Chat
// Completions API (OpenAI itself, vLLM, llama.cpp, Ollama, LiteLLM, ...),
// built on github.com/sashabaranov/go-openai.
//
// It adds what a long agent run needs on top of the plain API call: strict
// checking of Request.Parameters (unknown keys are rejected, not dropped),
// retries with exponential backoff and jitter on rate limits, server errors
// and network failures (honouring Retry-After, and logging each wait), a
// timeout per attempt, token cost from llm.Pricing (of estimated counts
// when the server reports none), a JSON mode (Config.JSONMode), and
// server-specific body fields (Config.ExtraBody). A 404 or an HTML page in
// reply names the URL called and hints at the API root; a 404 (or 400)
// whose body says the model does not exist says that instead
// (ErrModelNotFound). A 2xx reply that is not a chat completion is an error
// naming the URL and quoting the start of the body, not retried; a reply cut
// off mid-body is retried, and logged as cut off. A bound over the whole
// call, retries and waits included (Config.TotalTimeout), ends it with
// ErrTotalTimeout; a reply's body is read up to a limit
// (Config.MaxReplyBytes, ErrReplyTooLarge).
//
// # Streaming
//
// When llm.Request.Stream is set, Chat streams the reply (server-sent
// events, "stream": true) and hands each piece of text to Stream as it
// arrives, while still returning the whole llm.Result. It asks the server for
// a final usage chunk ("stream_options": {"include_usage": true}) so token
// counts and cost come back as for a non-streamed call. A failure before the
// first piece of text reached Stream is retried like any other; a failure
// after it is not, since the caller has already seen part of the reply (see
// Chat).
//
// # Usage
//
// A reply without usage (a server that sends none, or no usage chunk in a
// stream) gets estimated token counts, with llm.EstimateTokens over the
// request's message contents and the reply's text, and the cost of those;
// Result.UsageEstimated says so.
package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/morphhost/morph/llm"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultBaseURL        = "https://api.openai.com/v1"
	DefaultTimeout        = 60 * time.Second
	DefaultMaxRetries     = 3
	DefaultRetryBaseDelay = 500 * time.Millisecond
	// DefaultTotalTimeout bounds a whole call by default: two attempts at
	// DefaultTimeout and their backoff fit in it, where four (the first
	// and DefaultMaxRetries retries) with up to a minute's wait between
	// them would keep a run on a hung server for about seven minutes.
	DefaultTotalTimeout = 150 * time.Second
	// DefaultMaxReplyBytes caps the body of a reply by default: a chat
	// completion of a long reply, with log probabilities, is a few
	// megabytes.
	DefaultMaxReplyBytes = 16 << 20
)

var (
	// ErrModelNotFound marks a call the server refused because it has no
	// model of the requested name (a 404 or 400 whose body says so, such
	// as OpenAI's code model_not_found or vLLM's and Ollama's "does not
	// exist" and "not found"): the model name is to fix, not the URL.
	ErrModelNotFound = errors.New("the server has no model")
	// ErrAttemptTimeout marks an attempt cut at the per-attempt bound
	// (Config.Timeout). Such an error also matches
	// context.DeadlineExceeded.
	ErrAttemptTimeout = errors.New("attempt timed out")
	// ErrTotalTimeout marks a call given up at the bound over all its
	// attempts and waits (Config.TotalTimeout).
	ErrTotalTimeout = errors.New("gave up at the total timeout")
	// ErrReplyTooLarge marks a reply whose body passed the limit
	// (Config.MaxReplyBytes); the client stops reading there.
	ErrReplyTooLarge = errors.New("the reply's body is over the limit")
)

// RetryMessage is the message of the warning Chat logs before each retry
// wait, one record per wait, with the attributes model, attempt,
// max_attempts, status (0 when no reply came), wait, reason (the status and
// whether the wait is the server's Retry-After or the backoff) and error. A
// host that shows only some warnings can let these through by message.
const RetryMessage = "openai: retrying chat completion"

const (
	// maxBackoff caps one exponential backoff wait.
	maxBackoff = 30 * time.Second
	// maxRetryAfter caps a server's Retry-After, so a misbehaving server
	// cannot park a run for hours.
	maxRetryAfter = 60 * time.Second
)

// Config is what New needs to reach one server. It is plain data so the
// config layer can fill it from a file; the API key is resolved by the
// caller (from an environment variable) and is never logged by this
// package.
type Config struct {
	// BaseURL is the API root including the version, e.g.
	// "https://api.openai.com/v1" or "http://localhost:8000/v1". Empty means
	// DefaultBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>". Empty sends no
	// Authorization header, for local servers that need none.
	APIKey string
	// Model is used when Request.Model is empty, so a run can name its model
	// once. If both are empty, Chat fails without sending.
	Model string
	// Timeout bounds each attempt separately (not the whole call with its
	// retries), so one hung connection is abandoned and retried instead of
	// eating the caller's whole deadline. Zero means DefaultTimeout. A
	// timed-out attempt's error matches context.DeadlineExceeded; compare
	// with ctx.Err() to tell it from the caller's own deadline, and
	// ErrAttemptTimeout.
	Timeout time.Duration
	// TotalTimeout bounds the whole call: every attempt and every wait
	// between them. A call it ends fails with ErrTotalTimeout, and a retry
	// whose wait would pass it is not started. Zero means
	// DefaultTotalTimeout, or twice Timeout when that is longer, so that a
	// long per-attempt bound still leaves room for a retry.
	TotalTimeout time.Duration
	// MaxReplyBytes caps the body of a reply, error replies and streams
	// included, so that a broken or hostile server cannot make the client
	// read without end: a call whose reply passes it fails, not retried,
	// with ErrReplyTooLarge. Zero means DefaultMaxReplyBytes.
	MaxReplyBytes int64
	// MaxRetries is how many times a failed attempt is retried. Zero means
	// DefaultMaxRetries; negative means no retries.
	MaxRetries int
	// RetryBaseDelay is the first backoff wait; later ones grow
	// exponentially (x2, ±50% jitter, capped at 30s). Zero means
	// DefaultRetryBaseDelay. Tests set it small to run fast.
	RetryBaseDelay time.Duration
	// Pricing turns the reply's token counts into Result.Usage.Cost, keyed
	// by the model name the request used. A model it has no price for
	// costs 0 with Usage.CostUnknown set (see llm.Pricer, which also logs
	// a warning to Logger).
	Pricing llm.Pricing
	// HTTPClient sends the requests; nil means a fresh http.Client. Its own
	// Timeout, if any, applies on top of the per-attempt Timeout.
	HTTPClient *http.Client
	// ExtraBody holds server-specific fields (vLLM's, llama.cpp's or
	// Ollama's top_k, min_p, repetition_penalty, ...) added verbatim to
	// every request body, as JSON. Fields the client sets itself are
	// refused by New (see CheckExtraBody), so a standard parameter keeps
	// its checks.
	ExtraBody map[string]any
	// JSONMode is how a request's ForceJSON is asked of the server:
	// JSONModeObject (the default, for "") sends response_format
	// {"type": "json_object"}; JSONModeSchema sends the request's
	// ResponseSchema as {"type": "json_schema", ...} (structured output),
	// or json_object when the request has none; JSONModeOff sends no
	// response_format, for servers that refuse it.
	JSONMode string
	// Logger receives the warning logged before each retry wait (see
	// RetryMessage) and the one of a model without a price
	// (llm.UnpricedMessage); nil means slog.Default() at the time of
	// logging.
	Logger *slog.Logger
}

// String keeps the API key out of logs and error messages that print a
// Config with %v.
func (c Config) String() string {
	return fmt.Sprintf("openai.Config{BaseURL: %q, Model: %q, APIKey: %s}", c.BaseURL, c.Model, redact(c.APIKey))
}

// GoString keeps the API key out of %#v output, for the same reason as
// String.
func (c Config) GoString() string { return c.String() }

// LogValue keeps the API key out of structured logs.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", c.BaseURL),
		slog.String("model", c.Model),
		slog.String("api_key", redact(c.APIKey)),
	)
}

func redact(key string) string {
	if key == "" {
		return "(none)"
	}
	return "(redacted)"
}

// JSON modes (Config.JSONMode).
const (
	JSONModeObject = "json_object"
	JSONModeSchema = "json_schema"
	JSONModeOff    = "off"
)

// JSONModes lists the valid Config.JSONMode values.
var JSONModes = []string{JSONModeObject, JSONModeSchema, JSONModeOff}

// Client is an llm.Client and llm.ParameterChecker for one
// OpenAI-compatible server. It is safe for concurrent use.
type Client struct {
	api        *goopenai.Client
	model      string
	timeout    time.Duration
	total      time.Duration
	maxReply   int64
	maxRetries int
	baseDelay  time.Duration
	pricer     *llm.Pricer
	apiKey     string // scrubbed from what the server sends back (scrub)
	extraBody  map[string]any
	jsonMode   string
	logger     *slog.Logger
	// now and wait are the client's clock: time.Now, and sleep between
	// attempts (returning early with ctx's error); tests replace both with a
	// clock that records the waits and moves on without taking them.
	now  func() time.Time
	wait func(ctx context.Context, d time.Duration) error
}

var (
	_ llm.Client           = (*Client)(nil)
	_ llm.ParameterChecker = (*Client)(nil)
)

// New checks cfg and builds a Client. It fails on a malformed BaseURL or a
// negative duration now, at configuration time, rather than on the first
// request of a run.
func New(cfg Config) (*Client, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if err := checkBaseURL(base); err != nil {
		return nil, err
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("openai: timeout %s is negative", cfg.Timeout)
	}
	if cfg.TotalTimeout < 0 {
		return nil, fmt.Errorf("openai: total timeout %s is negative", cfg.TotalTimeout)
	}
	if cfg.MaxReplyBytes < 0 {
		return nil, fmt.Errorf("openai: reply limit %d is negative", cfg.MaxReplyBytes)
	}
	if cfg.RetryBaseDelay < 0 {
		return nil, fmt.Errorf("openai: retry base delay %s is negative", cfg.RetryBaseDelay)
	}
	jsonMode := cfg.JSONMode
	if jsonMode == "" {
		jsonMode = JSONModeObject
	}
	if !slices.Contains(JSONModes, jsonMode) {
		return nil, fmt.Errorf("openai: JSON mode %q: want one of %s", cfg.JSONMode, strings.Join(JSONModes, ", "))
	}
	if err := CheckExtraBody(cfg.ExtraBody); err != nil {
		return nil, fmt.Errorf("openai: extra body: %w", err)
	}
	for k, v := range cfg.ExtraBody {
		if _, err := json.Marshal(v); err != nil {
			return nil, fmt.Errorf("openai: extra body field %q cannot be sent as JSON: %w", k, err)
		}
	}
	c := &Client{
		model:      cfg.Model,
		timeout:    cfg.Timeout,
		total:      cfg.TotalTimeout,
		maxReply:   cmp.Or(cfg.MaxReplyBytes, DefaultMaxReplyBytes),
		maxRetries: cfg.MaxRetries,
		baseDelay:  cfg.RetryBaseDelay,
		pricer:     llm.NewPricer(cfg.Pricing, cfg.Logger),
		apiKey:     cfg.APIKey,
		extraBody:  maps.Clone(cfg.ExtraBody),
		jsonMode:   jsonMode,
		logger:     cfg.Logger,
		now:        time.Now,
		wait:       sleep,
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.total == 0 {
		c.total = max(DefaultTotalTimeout, 2*c.timeout)
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	if c.baseDelay == 0 {
		c.baseDelay = DefaultRetryBaseDelay
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	oc := goopenai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(base, "/")
	oc.HTTPClient = &doer{hc: hc}
	c.api = goopenai.NewClientWithConfig(oc)
	return c, nil
}

func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("openai: base URL is malformed: %w", err)
	}
	shown := u.Redacted()
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("openai: base URL %q: want an http:// or https:// URL such as %s", shown, DefaultBaseURL)
	}
	if u.Host == "" {
		return fmt.Errorf("openai: base URL %q has no host", shown)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("openai: base URL %q must not have a query or fragment; the request path is appended to it", shown)
	}
	if root, ok := TrimChatPath(shown); ok {
		return fmt.Errorf("openai: base URL %q ends in %s, which the client appends: use the API root %q", shown, chatPath, root)
	}
	return nil
}

// chatPath is what the client appends to the base URL for a chat call.
const chatPath = "/chat/completions"

// TrimChatPath reports whether baseURL ends in /chat/completions (a
// trailing slash allowed), the endpoint rather than the API root the client
// appends it to, and returns the root without it.
func TrimChatPath(baseURL string) (root string, ok bool) {
	trimmed := strings.TrimRight(baseURL, "/")
	if !strings.HasSuffix(trimmed, chatPath) {
		return baseURL, false
	}
	return strings.TrimSuffix(trimmed, chatPath), true
}

// Chat sends req, retrying transient failures, and returns the first
// choice's text with usage and cost. Parameters are checked first (see
// CheckParameters); a bad key fails the call before anything is sent.
//
// CallBound is the longest a Chat call runs, retries included: the total
// timeout, or less when the attempts within the client's timeout and the
// waits before the retries (each at most a server's capped Retry-After or
// the capped backoff with its jitter) add up to less. For a
// host that runs the call on another's behalf and must not give up on it
// while the client is still retrying (package temporal's activity
// timeouts).
func (c *Client) CallBound() time.Duration {
	wait := max(maxRetryAfter, maxBackoff*3/2) // the jitter is ±50%
	return min(c.total, time.Duration(1+c.maxRetries)*c.timeout+time.Duration(c.maxRetries)*wait)
}

// Retried: HTTP 408, 409, 429 and 5xx (the set OpenAI's own SDKs retry),
// network errors, replies cut off mid-body and per-attempt timeouts. Not
// retried: other 4xx (a model the server does not have wraps
// ErrModelNotFound), a reply the server sent whole that is not a chat
// completion (the error names the URL and quotes the start of the body,
// escaped and capped), a reply over the client's limit (ErrReplyTooLarge),
// and cancellation of ctx, which returns promptly with an error matching
// errors.Is(err, ctx.Err()). A failure after the last attempt wraps the
// last go-openai error (*APIError or *RequestError, reachable with
// errors.As) and states the number of attempts.
//
// On 429 and 503 the server's Retry-After (or retry-after-ms) replaces the
// backoff wait, capped at 60s; a wait that would outlast ctx's deadline
// ends the call at once instead of sleeping into a certain failure. The
// client's total timeout is such a deadline too: a call that reaches it,
// or whose next wait would pass it, fails with ErrTotalTimeout.
//
// Result.Duration covers the whole call, retries included. With ForceJSON,
// Result.JSON holds the decoded reply when it is valid JSON, so the caller
// need not parse it again. A reply without choices is an error.
//
// With req.Stream set the reply is streamed: each non-empty piece of the
// first choice's text is passed to req.Stream on the calling goroutine as it
// arrives, and Result.Text is their concatenation. Usage comes from the
// server's final usage chunk, estimated if it sends none (see Usage). The
// per-attempt timeout covers the whole stream, time spent in req.Stream
// included. A failure before any text was passed to req.Stream (an error
// status, a refused or dropped connection, a stream cut off before its
// first piece of text) is retried exactly as above. Once text has been
// passed on, a failure is not retried, as the caller has already seen part
// of the reply: Chat returns an error that says so and wraps the cause
// (errors.Is(err, ctx.Err()) still holds when ctx ended the stream). A
// stream that ends without the model's finish_reason is treated as cut off.
func (c *Client) Chat(ctx context.Context, req llm.Request) (llm.Result, error) {
	start := c.now()
	creq, extra, err := c.buildRequest(req)
	if err != nil {
		return llm.Result{}, err
	}

	bo := &backoff.ExponentialBackOff{
		InitialInterval:     c.baseDelay,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         maxBackoff,
	}
	bo.Reset()
	maxAttempts := 1 + c.maxRetries
	// tctx is ctx under the total timeout; ctx.Err() tells the caller's
	// end from the total timeout's.
	tctx, cancel := context.WithDeadline(ctx, start.Add(c.total))
	defer cancel()

	for attempt := 1; ; attempt++ {
		resp, info, err := c.attempt(tctx, creq, extra, req.Stream)
		if err == nil {
			return c.result(ctx, creq, req.ForceJSON, resp, start)
		}
		if info.delivered > 0 {
			return llm.Result{}, brokenStream(ctx.Err(), attempt, info.delivered, err)
		}
		if cerr := ctx.Err(); cerr != nil {
			return llm.Result{}, stopped(cerr, attempt, err)
		}
		if tctx.Err() != nil {
			return llm.Result{}, c.gaveUp(attempt, err)
		}
		if errors.Is(err, ErrReplyTooLarge) {
			return llm.Result{}, info.tooLarge(err)
		}
		if !info.sent {
			// go-openai refused the request locally (e.g. its checks
			// for reasoning models); nothing reached the server.
			return llm.Result{}, fmt.Errorf("openai: chat request not sent: %w", err)
		}
		if req.Stream == nil && info.answeredBadly(err) {
			return llm.Result{}, info.notCompletion(err)
		}
		status := statusOf(err)
		if info.modelMissing(status, creq.Model) {
			return llm.Result{}, fmt.Errorf("openai: chat failed; POST %s answered HTTP %d: %w %q: %w", info.url, status, ErrModelNotFound, creq.Model, err)
		}
		if !retryable(status, err) {
			return llm.Result{}, fmt.Errorf("openai: chat failed after %s (not retryable)%s: %w", plural(attempt, "attempt"), info.where(status), err)
		}
		if attempt >= maxAttempts {
			return llm.Result{}, fmt.Errorf("openai: chat failed after %s%s: %w", plural(attempt, "attempt"), info.where(status), err)
		}

		wait := bo.NextBackOff()
		reason := "no reply (network error or timeout); backing off"
		if status != 0 {
			reason = fmt.Sprintf("HTTP %d; backing off", status)
		} else if cut := info.cutReason(); cut != "" {
			reason = cut
		}
		if ra, ok := retryAfter(status, info.header, c.now()); ok {
			wait = ra
			reason = fmt.Sprintf("HTTP %d; waiting as the server's Retry-After asks", status)
		}
		if deadline, ok := tctx.Deadline(); ok && deadline.Sub(c.now()) <= wait {
			if own, ok := ctx.Deadline(); !ok || own.After(deadline) {
				return llm.Result{}, fmt.Errorf("openai: chat %w (%s) after %s; the next retry (in %s) would pass it: %w",
					ErrTotalTimeout, c.total, plural(attempt, "attempt"), wait.Round(time.Millisecond), err)
			}
			return llm.Result{}, fmt.Errorf("openai: chat failed after %s; the next retry (in %s) would pass the context deadline: %w",
				plural(attempt, "attempt"), wait.Round(time.Millisecond), err)
		}
		c.log().LogAttrs(ctx, slog.LevelWarn, RetryMessage,
			slog.String("model", creq.Model),
			slog.Int("attempt", attempt),
			slog.Int("max_attempts", maxAttempts),
			slog.Int("status", status),
			slog.Duration("wait", wait),
			slog.String("reason", reason),
			slog.String("error", err.Error()),
		)

		if werr := c.wait(tctx, wait); werr != nil {
			if ctx.Err() == nil { // the total timeout, not the caller
				return llm.Result{}, c.gaveUp(attempt, err)
			}
			return llm.Result{}, stopped(ctx.Err(), attempt, err)
		}
	}
}

// sleep waits d, or until ctx ends, and then returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopped reports a call cut short by the caller's context, keeping both the
// context error and the last attempt's error reachable.
func stopped(cerr error, attempts int, last error) error {
	if errors.Is(last, cerr) {
		return fmt.Errorf("openai: chat stopped after %s: %w", plural(attempts, "attempt"), last)
	}
	return fmt.Errorf("openai: chat stopped after %s: %w (last error: %w)", plural(attempts, "attempt"), cerr, last)
}

// brokenStream reports a streamed reply that failed after part of it was
// passed to Request.Stream. Such a failure is never retried: the caller has
// already shown or used that part, and a second reply would not continue it.
func brokenStream(cerr error, attempts, delivered int, last error) error {
	how := "broke off"
	if cerr != nil {
		how = "was stopped"
	}
	msg := fmt.Sprintf("openai: chat stream %s on attempt %d after %s of the reply had been delivered (not retried: the caller has seen a partial reply)",
		how, attempts, plural(delivered, "byte"))
	if cerr != nil && !errors.Is(last, cerr) {
		return fmt.Errorf("%s: %w (last error: %w)", msg, cerr, last)
	}
	return fmt.Errorf("%s: %w", msg, last)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

func (c *Client) log() *slog.Logger {
	if c.logger != nil {
		return c.logger
	}
	return slog.Default()
}

// buildRequest turns req into a go-openai request plus the fields to add
// to its body: the explicit zeros go-openai would drop, and ExtraBody.
func (c *Client) buildRequest(req llm.Request) (goopenai.ChatCompletionRequest, map[string]any, error) {
	var creq goopenai.ChatCompletionRequest
	extra, err := applyParameters(&creq, req.Parameters)
	if err != nil {
		return creq, nil, err
	}
	if len(c.extraBody) > 0 {
		// Disjoint from the parameters' keys (New checked).
		all := maps.Clone(c.extraBody)
		maps.Copy(all, extra)
		extra = all
	}
	creq.Model = req.Model
	if creq.Model == "" {
		creq.Model = c.model
	}
	if creq.Model == "" {
		return creq, nil, errors.New("openai: no model: set Request.Model or Config.Model")
	}
	if len(req.Messages) == 0 {
		return creq, nil, errors.New("openai: request has no messages")
	}
	creq.Messages = make([]goopenai.ChatCompletionMessage, len(req.Messages))
	for i, m := range req.Messages {
		creq.Messages[i] = goopenai.ChatCompletionMessage{Role: m.Role, Content: m.Content}
		if len(m.Images) > 0 { // content as parts: the text, then each image as a data URL
			creq.Messages[i].Content = ""
			creq.Messages[i].MultiContent = []goopenai.ChatMessagePart{{Type: goopenai.ChatMessagePartTypeText, Text: m.Content}}
			for _, img := range m.Images {
				creq.Messages[i].MultiContent = append(creq.Messages[i].MultiContent, goopenai.ChatMessagePart{
					Type: goopenai.ChatMessagePartTypeImageURL, ImageURL: &goopenai.ChatMessageImageURL{URL: "data:" + img.MimeType + ";base64," + img.Data}})
			}
		}
	}
	if req.ForceJSON {
		creq.ResponseFormat = c.responseFormat(req.ResponseSchema)
	}
	if req.Stream != nil {
		creq.Stream = true
		creq.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
	}
	return creq, extra, nil
}

// responseFormat is the response_format that asks for a JSON reply in the
// client's JSON mode, or nil for none.
func (c *Client) responseFormat(schema *llm.JSONSchema) *goopenai.ChatCompletionResponseFormat {
	switch {
	case c.jsonMode == JSONModeOff:
		return nil
	case c.jsonMode == JSONModeSchema && schema != nil && len(schema.Schema) > 0:
		return &goopenai.ChatCompletionResponseFormat{
			Type: goopenai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{
				Name:   schema.Name,
				Schema: schema.Schema,
			},
		}
	}
	return &goopenai.ChatCompletionResponseFormat{Type: goopenai.ChatCompletionResponseFormatTypeJSONObject}
}

// attempt makes one HTTP exchange under the per-attempt timeout. With
// deliver set it streams the reply, passing each piece of text to deliver,
// and the timeout covers the whole stream.
func (c *Client) attempt(ctx context.Context, creq goopenai.ChatCompletionRequest, extra map[string]any, deliver func(string)) (goopenai.ChatCompletionResponse, *attemptInfo, error) {
	info := &attemptInfo{extra: extra, maxReply: c.maxReply, key: c.apiKey}
	actx, cancel := context.WithTimeout(context.WithValue(ctx, attemptKey{}, info), c.timeout)
	defer cancel()
	var resp goopenai.ChatCompletionResponse
	var err error
	if deliver == nil {
		resp, err = c.api.CreateChatCompletion(actx, creq)
	} else {
		resp, err = c.receive(actx, creq, info, deliver)
	}
	if err != nil && actx.Err() != nil && ctx.Err() == nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w after %s: %w", ErrAttemptTimeout, c.timeout, err)
		} else {
			err = fmt.Errorf("%w after %s: %w (%w)", ErrAttemptTimeout, c.timeout, context.DeadlineExceeded, err)
		}
	}
	if err != nil {
		err = info.serverText(err)
	}
	return resp, info, err
}

// receive makes one streamed attempt. It passes each non-empty piece of the
// first choice's text to deliver, counting the bytes in info.delivered, and
// assembles the pieces and the final usage chunk into the response a
// non-streamed call would have returned.
func (c *Client) receive(ctx context.Context, creq goopenai.ChatCompletionRequest, info *attemptInfo, deliver func(string)) (goopenai.ChatCompletionResponse, error) {
	var resp goopenai.ChatCompletionResponse
	stream, err := c.api.CreateChatCompletionStream(ctx, creq)
	if err != nil {
		return resp, err
	}
	defer stream.Close()

	var (
		text   strings.Builder
		finish goopenai.FinishReason
		events int
	)
	for {
		// Events already buffered would otherwise still be delivered
		// after ctx ends.
		if err := ctx.Err(); err != nil {
			return resp, err
		}
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) { // "data: [DONE]", or the body ended cleanly (checked below)
			break
		}
		if err != nil {
			return resp, err
		}
		events++
		if chunk.Usage != nil {
			resp.Usage = *chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 { // n > 1: only the first choice is returned, as without streaming
				continue
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
			if d := ch.Delta.Content; d != "" {
				text.WriteString(d)
				info.delivered += len(d)
				deliver(d)
			}
		}
	}
	if events == 0 {
		if ct := info.header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
			// A server that ignores "stream": true; retrying will not help.
			return resp, fmt.Errorf("server answered with %q instead of an event stream; does it support streaming?", ct)
		}
		return resp, fmt.Errorf("reply stream had no events: %w", io.ErrUnexpectedEOF)
	}
	if finish == "" {
		// Every server sends a finish_reason with the last piece of text;
		// without it the stream was cut short (say, by a proxy) even if
		// the connection closed cleanly.
		return resp, fmt.Errorf("reply stream ended without a finish_reason: %w", io.ErrUnexpectedEOF)
	}
	resp.Choices = []goopenai.ChatCompletionChoice{{
		Message:      goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant, Content: text.String()},
		FinishReason: finish,
	}}
	return resp, nil
}

func (c *Client) result(ctx context.Context, creq goopenai.ChatCompletionRequest, forceJSON bool, resp goopenai.ChatCompletionResponse, start time.Time) (llm.Result, error) {
	if len(resp.Choices) == 0 {
		return llm.Result{}, fmt.Errorf("openai: reply from model %q has no choices", creq.Model)
	}
	u := llm.Usage{
		InputTokens:  resp.Usage.PromptTokens,
		OutputTokens: resp.Usage.CompletionTokens,
		TotalTokens:  resp.Usage.TotalTokens,
	}
	estimated := u.InputTokens == 0 && u.OutputTokens == 0 && u.TotalTokens == 0
	if estimated {
		// The server sent no usage (many local servers, or a stream
		// without the usage chunk): estimate rather than report a free
		// call, and say so.
		n := 0
		for _, m := range creq.Messages {
			n += len(m.Content)
		}
		u.InputTokens = llm.EstimateTokens(n)
		u.OutputTokens = llm.EstimateTokens(len(resp.Choices[0].Message.Content))
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.InputTokens + u.OutputTokens
	}
	u = c.pricer.Price(ctx, creq.Model, u)
	res := llm.Result{
		Text:     scrub(resp.Choices[0].Message.Content, c.apiKey),
		Usage:    u,
		Duration: c.now().Sub(start),

		UsageEstimated: estimated,
		FinishReason:   string(resp.Choices[0].FinishReason),
	}
	if forceJSON {
		// JSON mode promises a JSON object; hand it over decoded so the
		// caller need not parse it again. A server that ignored JSON mode
		// leaves JSON nil and the caller falls back to Text.
		var v any
		if json.Unmarshal([]byte(res.Text), &v) == nil {
			res.JSON = v
		}
	}
	return res, nil
}

// statusOf is the HTTP status of a go-openai error, or 0 when no response
// was received.
func statusOf(err error) int {
	// The *RequestError first: when the body's "error" is a string, not
	// an object ({"error": "model not found"}, as Ollama and Express
	// servers answer), go-openai wraps in it an *APIError without status.
	var reqErr *goopenai.RequestError
	if errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0 {
		return reqErr.HTTPStatusCode
	}
	var apiErr *goopenai.APIError
	if errors.As(err, &apiErr) {
		return apiErr.HTTPStatusCode
	}
	return 0
}

// retryable says whether another attempt could succeed.
func retryable(status int, err error) bool {
	if status != 0 {
		switch {
		case status == http.StatusRequestTimeout, status == http.StatusConflict, status == http.StatusTooManyRequests:
			return true
		default:
			return status >= 500
		}
	}
	// No status: the exchange itself failed (connection refused or reset,
	// attempt timeout, reply cut off mid-body), or the reply was not valid
	// JSON, which a retry will not fix.
	// http.Client's *url.Error is a net.Error.
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded)
}

// retryAfter reads the server's requested wait from a 429 or 503 reply:
// OpenAI's retry-after-ms, else Retry-After in seconds or as an HTTP date.
// The wait is capped at maxRetryAfter.
func retryAfter(status int, h http.Header, now time.Time) (time.Duration, bool) {
	if (status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable) || h == nil {
		return 0, false
	}
	var d time.Duration
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms >= 0 {
		d = time.Duration(ms * float64(time.Millisecond))
	} else if v := strings.TrimSpace(h.Get("Retry-After")); v == "" {
		return 0, false
	} else if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		d = time.Duration(secs * float64(time.Second))
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(now), 0)
	} else {
		return 0, false
	}
	return min(d, maxRetryAfter), true
}

// attemptKey carries an *attemptInfo from Chat to doer through the request
// context, since go-openai passes nothing else through.
type attemptKey struct{}

// attemptInfo is what doer learns about one attempt's HTTP exchange.
type attemptInfo struct {
	extra     map[string]any // body fields to add (explicit zeros go-openai drops, Config.ExtraBody)
	maxReply  int64          // the cap on the reply's body
	sent      bool           // the request reached the HTTP client
	url       string         // the URL called, password redacted (the API key is in a header, never here)
	header    http.Header    // response headers, for Retry-After
	status    int            // the reply's HTTP status; 0 when none came
	body      *capture       // the reply's body as go-openai read it; nil when none came
	delivered int            // bytes of streamed text passed to Request.Stream
	key       string         // the API key, scrubbed from what the server sends back
}

// modelMissing says the reply refused the call because the server has no
// model named model: a 400 or 404 whose body has OpenAI's code
// model_not_found, or says the model "does not exist" or is "not found"
// and names it (vLLM, Ollama, LiteLLM). A 404 whose body does not, such
// as a web server's for a wrong path, is about the URL (see where).
func (info *attemptInfo) modelMissing(status int, model string) bool {
	if (status != http.StatusNotFound && status != http.StatusBadRequest) || info.body == nil {
		return false
	}
	body := strings.ToLower(string(info.body.head))
	if strings.Contains(body, "model_not_found") {
		return true
	}
	return strings.Contains(body, strings.ToLower(model)) &&
		(strings.Contains(body, "does not exist") || strings.Contains(body, "not found"))
}

// where is the part of a failed call's error that names the URL called,
// with a hint at the API root, when the reply suggests the URL is wrong: a
// 404 or 405, or an HTML page (a web server's or proxy's, not the API's
// JSON). It is empty otherwise.
func (info *attemptInfo) where(status int) string {
	if info.url == "" {
		return ""
	}
	html := strings.HasPrefix(strings.ToLower(strings.TrimSpace(info.header.Get("Content-Type"))), "text/html")
	if status != http.StatusNotFound && status != http.StatusMethodNotAllowed && !html {
		return ""
	}
	what := fmt.Sprintf("HTTP %d", status)
	if html {
		what = "an HTML page, not the API's JSON"
		if status != 0 {
			what += fmt.Sprintf(" (HTTP %d)", status)
		}
	}
	return fmt.Sprintf("; POST %s answered with %s: is the base URL the API root, usually ending in /v1 (such as http://localhost:8000/v1)? The client appends %s to it",
		info.url, what, chatPath)
}

// doer wraps the HTTP client handed to go-openai. It exists because go-openai
// hides three things Chat needs: response headers on errors (for
// Retry-After), what the server sent when its reply does not decode (see
// capture), and parameters whose explicit zero value (temperature 0) its omitempty
// tags drop, which would silently switch the server to its default; it also
// adds Config.ExtraBody, fields go-openai has no place for, and max_tokens,
// whose go-openai field is deprecated.
type doer struct {
	hc *http.Client
}

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	info, _ := req.Context().Value(attemptKey{}).(*attemptInfo)
	if info == nil {
		return d.hc.Do(req)
	}
	if len(info.extra) > 0 && req.Body != nil {
		if err := addFields(req, info.extra); err != nil {
			return nil, err
		}
	}
	info.sent = true
	info.url = req.URL.Redacted()
	resp, err := d.hc.Do(req)
	if resp != nil {
		info.header = resp.Header.Clone()
		info.status = resp.StatusCode
		info.body = &capture{body: resp.Body, limit: info.maxReply, key: info.key}
		resp.Body = info.body
	}
	return resp, err
}

// addFields merges fields into req's JSON object body.
func addFields(req *http.Request, fields map[string]any) error {
	raw, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return fmt.Errorf("openai: reading request body: %w", err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		return fmt.Errorf("openai: request body is not a JSON object: %w", err)
	}
	for k, v := range fields {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("openai: encoding parameter %q: %w", k, err)
		}
		body[k] = b
	}
	out, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("openai: encoding request body: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(out))
	req.ContentLength = int64(len(out))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out)), nil }
	return nil
}

// gaveUp is the error of a call that ran out of llm.total_timeout after
// attempt attempts, the last ending in err.
func (c *Client) gaveUp(attempt int, err error) error {
	return fmt.Errorf("openai: chat %w (%s) after %s: %w", ErrTotalTimeout, c.total, plural(attempt, "attempt"), err)
}
