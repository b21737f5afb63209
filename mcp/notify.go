package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxNotifications bounds the progress and log notifications one
// call sends its client when Options.MaxNotifications is zero: far more
// than a tool reporting its steps needs, far fewer than a plugin looping
// on notify_progress could make the client read.
const DefaultMaxNotifications = 256

// notifyTimeout bounds sending one notification: a client that does not
// read its stream must not hold the plugin's call for long.
const notifyTimeout = 5 * time.Second

// ErrMaxNotifications marks an elicitation refused because its call sent
// Options.MaxNotifications already (errors.Is); the plugin is answered a
// decline.
var ErrMaxNotifications = errors.New("mcp: max_notifications reached")

// notifier forwards a call's progress and log notifications to the client
// whose call it is (engine.CallNotifier), on the call's own stream, at most
// max of them; past that they are dropped, counted
// (Server.Refusals) and warned about once per call.
type notifier struct {
	s     *Server
	ss    *sdk.ServerSession
	ses   *session
	ctx   context.Context // the call's: the SDK sends on the request's stream
	tool  string
	token any

	mu      sync.Mutex
	sent    int
	stalled bool // a send failed: the client is not taking them
	sampled int  // sampling requests asked (CreateMessage)
}

// notifier is the notifier of a call of tool in ss, under the handler's
// ctx, with the client's progress token (nil: none).
func (s *Server) notifier(ctx context.Context, ss *sdk.ServerSession, tool string, token any) *notifier {
	return &notifier{s: s, ss: ss, ses: s.session(ss, false), ctx: ctx, tool: tool, token: token}
}

// recordLevel is a receiving middleware that keeps the level a session's
// client set (logging/setLevel), for Log to drop what the SDK would drop
// before it is counted.
func (s *Server) recordLevel(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		p, ok := req.GetParams().(*sdk.SetLoggingLevelParams)
		if ss, isServer := req.GetSession().(*sdk.ServerSession); ok && isServer && err == nil && p != nil && method == "logging/setLevel" {
			ses := s.session(ss, false)
			s.mu.Lock()
			ses.level = p.Level
			s.mu.Unlock()
		}
		return res, err
	}
}

// logLevels are MCP's logging levels, least severe first; a level not
// among them ranks as debug, as the SDK ranks it.
var logLevels = []sdk.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// wanted reports whether the client asked for messages of level: it set
// a level (the SDK sends nothing before) and level is at or above it.
// (morph serves no protocol version in which a request carries its own
// level.)
func (n *notifier) wanted(level string) bool {
	n.s.mu.Lock()
	set := n.ses.level
	n.s.mu.Unlock()
	return set != "" && max(0, slices.Index(logLevels, sdk.LoggingLevel(level))) >= max(0, slices.Index(logLevels, set))
}

// take reports whether one more notification may be sent, counting a
// dropped one.
func (n *notifier) take() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sent < n.s.opts.MaxNotifications && !n.stalled {
		n.sent++
		return true
	}
	if n.stalled {
		n.s.mu.Lock()
		n.s.refused.Notifications++
		n.s.mu.Unlock()
		return false
	}
	n.s.mu.Lock()
	n.s.refused.Notifications++
	n.s.mu.Unlock()
	if n.sent == n.s.opts.MaxNotifications {
		n.sent++ // warned
		n.s.log.WarnContext(n.ctx, "mcp: a call's notifications past max_notifications are dropped",
			"tool", n.tool, "max_notifications", n.s.opts.MaxNotifications)
	}
	return false
}

// failed marks the call's notifications stalled once a send failed (the
// client stopped reading, say): the rest are dropped and counted, so a
// plugin's host call waits for one send at most, not for each of them.
func (n *notifier) failed(ctx context.Context, kind string, err error) {
	n.mu.Lock()
	first := !n.stalled
	n.stalled = true
	n.mu.Unlock()
	if first {
		n.s.log.WarnContext(ctx, "mcp: a "+kind+" notification not sent; the call's others are dropped", "tool", n.tool, "error", err)
	}
}

// ProgressToken is the client's token, or nil.
func (n *notifier) ProgressToken() any { return n.token }

// Progress sends notifications/progress with the client's token, when it
// gave one.
func (n *notifier) Progress(progress, total float64, message string) {
	if n.token == nil || !n.take() {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, notifyTimeout)
	defer cancel()
	if err := n.ss.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: n.token, Progress: progress, Total: total, Message: message}); err != nil {
		n.failed(ctx, "progress", err)
	}
}

// Log sends notifications/message, when the client asked for messages of
// level (logging/setLevel); one it did not ask for is neither sent nor
// counted against max_notifications.
func (n *notifier) Log(level, logger string, data json.RawMessage) {
	if !n.wanted(level) || !n.take() {
		return
	}
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	ctx, cancel := context.WithTimeout(n.ctx, notifyTimeout)
	defer cancel()
	if err := n.ss.Log(ctx, &sdk.LoggingMessageParams{Level: sdk.LoggingLevel(level), Logger: logger, Data: data}); err != nil {
		n.failed(ctx, "log", err)
	}
}

// Elicit asks the client's user for input (elicitation/create) with
// params, and answers the client's result; it counts as a notification
// against the cap. The SDK refuses it when the client did not declare the
// elicitation capability, and checks an accepted answer against the
// requested schema.
func (n *notifier) Elicit(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	var p sdk.ElicitParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("mcp: elicitation params: %w", err)
	}
	if !n.take() {
		return nil, fmt.Errorf("%w: %d notifications sent in this call", ErrMaxNotifications, n.s.opts.MaxNotifications)
	}
	res, err := n.ss.Elicit(ctx, &p)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}
