package guest

import (
	"context"
	"encoding/json"
)

// A Notifier takes a call's progress and log notifications for the caller
// (engine.CallNotifier, which host hands a guest's call through
// WithNotifier: this package does not know the engine).
type Notifier interface {
	Progress(progress, total float64, message string)
	Log(level, logger string, data json.RawMessage)
	ProgressToken() any
}

// notifierKey is the context key of a call's Notifier.
type notifierKey struct{}

// WithNotifier is ctx carrying n for the calls made under it.
func WithNotifier(ctx context.Context, n Notifier) context.Context {
	return context.WithValue(ctx, notifierKey{}, n)
}

// NotifierOf is ctx's Notifier, or nil.
func NotifierOf(ctx context.Context) Notifier {
	n, _ := ctx.Value(notifierKey{}).(Notifier)
	return n
}

// An Elicitor is a Notifier that can ask the caller's user for input
// (engine.CallElicitor).
type Elicitor interface {
	Notifier
	Elicit(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
}
