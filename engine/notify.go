package engine

import (
	"context"
	"encoding/json"
	"errors"
)

// A CallNotifier takes what a tool reports while it runs (MCP's progress
// and logging notifications from a plugin), for a caller that forwards it
// (morph mcp serve, to the client whose call it is). Its methods are
// called from the tool's goroutine, before the call returns, in the order
// the tool reported; they must not block for long, and bound what they
// forward themselves.
type CallNotifier interface {
	// Progress reports how far the call is; total is 0 when unknown.
	Progress(progress, total float64, message string)
	// Log is a log message at an MCP logging level (debug, info, notice,
	// warning, error, critical, alert, emergency), from a named logger
	// ("" for none), with any JSON value as its data.
	Log(level, logger string, data json.RawMessage)
	// ProgressToken is the caller's token for this call's progress, or nil
	// when the caller wants none (a tool need not report progress then).
	ProgressToken() any
}

// callNotifierKey is the context key of a call's CallNotifier.
type callNotifierKey struct{}

// WithCallNotifier is ctx carrying n, which the tools called under it
// report to (a plugin's notify_progress and notify_logging_message).
func WithCallNotifier(ctx context.Context, n CallNotifier) context.Context {
	return context.WithValue(ctx, callNotifierKey{}, n)
}

// CallNotifierOf is ctx's CallNotifier, or nil.
func CallNotifierOf(ctx context.Context) CallNotifier {
	n, _ := ctx.Value(callNotifierKey{}).(CallNotifier)
	return n
}

// A CallElicitor is a CallNotifier that can also ask its caller's user for
// input while a tool runs (MCP's elicitation/create), for a tool that asks
// (a plugin's create_elicitation). params and the answer are MCP's
// ElicitRequest params and ElicitResult, as JSON.
type CallElicitor interface {
	CallNotifier
	Elicit(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
}

// A CallSampler is a CallNotifier that can also ask its caller's model for
// a message while a tool runs (MCP's sampling/createMessage), for a tool
// that asks (a plugin's create_message). params and the answer are MCP's
// CreateMessageRequest params and CreateMessageResult, as JSON. An error
// wrapping ErrNoSampling means the caller cannot sample at all (its client
// did not declare the capability); any other is why this request was not
// answered (a limit, the client's error, the deadline).
type CallSampler interface {
	CallNotifier
	CreateMessage(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
}

// Bounds of what a tool's question to its caller carries, whoever asks (a
// plugin's create_elicitation and create_message, an MCP server's
// elicitation/create and sampling/createMessage through morph's client):
// MaxElicitAnswer the user's answer, a form, not a file (a longer one is a
// decline); MaxSamplingRequest the conversation sent the caller's model, not
// a bulk upload through its client's connection; MaxSamplingAnswer the
// model's answer (a longer one is an error).
const (
	MaxElicitAnswer    = 64 << 10
	MaxSamplingRequest = 1 << 20
	MaxSamplingAnswer  = 1 << 20
)

// ErrNoSampling marks a sampling request no one can answer: the call has
// no caller that samples (morph run, an MCP client without the sampling
// capability).
var ErrNoSampling = errors.New("sampling is not available: the caller has no MCP client that declared the sampling capability")

// A CallItemNotifier is a CallNotifier that also takes a tool's news of the
// prompts and resources its plugin serves (a plugin's
// notify_resource_updated, notify_resource_list_changed and
// notify_prompt_list_changed): news for every client that follows them,
// not only the caller's.
type CallItemNotifier interface {
	CallNotifier
	// ResourceUpdated says the resource at uri changed.
	ResourceUpdated(uri string)
	// ItemsChanged says the plugin's prompts or resources changed: the
	// caller lists them again.
	ItemsChanged()
}
