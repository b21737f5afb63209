package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
)

// DefaultMaxRequestBytes bounds one request a client sends (one line on
// stdio) when Options.MaxRequestBytes is zero: far more than any tool's
// arguments need, far less than the SDK's own default (16 MiB) a client
// could make morph buffer per session.
const DefaultMaxRequestBytes = 4 << 20

// DefaultMaxCallsPerSession bounds the tool calls one session runs at once
// when Options.MaxCallsPerSession is zero: more than clients that call
// tools in parallel use, few enough that sessions cannot queue unbounded
// work on the plugins' instances.
const DefaultMaxCallsPerSession = 32

// DefaultSessionEndTimeout bounds the release of an ended session's plugin
// instances (the session_end middleware) when Options.SessionEndTimeout is
// zero.
const DefaultSessionEndTimeout = 10 * time.Second

// protocolVersions are the MCP versions served, newest first. 2026-07-28,
// which the SDK also speaks, is left out: it is the stateless protocol, with
// no session for a morph session to be; a client that asks for it (or any
// other) at initialize is answered with the newest of these.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// ProtocolVersions are the MCP versions served, newest first.
func ProtocolVersions() []string { return slices.Clone(protocolVersions) }

// portableName is a tool name every client can pass on: models' APIs
// (OpenAI's, Anthropic's) take [a-zA-Z0-9_-]{1,64}, and clients prefix
// the server's name (Claude Code: "mcp__morph__", 12 characters; 48 leaves
// room for a longer server name than morph).
var portableName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,48}$`)

// Options configure a Server. The zero value serves every tool with the
// defaults.
type Options struct {
	// Name and Version are the serverInfo clients see; Name defaults to
	// "morph".
	Name, Version string
	// Logger takes the server's warnings (tools not served, sessions that
	// ended on an error); nil is slog.Default().
	Logger *slog.Logger
	// Run is what every call runs under, as a `morph run` would (the
	// config's RunOptions): its Mode and Tools hold for MCP clients too.
	// When Tools is set, only those tools are served.
	Run engine.RunOptions
	// MaxRequestBytes bounds one request: a line on stdio (a longer one
	// is answered with a JSON-RPC error naming the limit, and skipped), a
	// body over HTTP (413). Zero is DefaultMaxRequestBytes.
	MaxRequestBytes int
	// MaxCallsPerSession bounds the tool calls a session runs at once: one
	// more is refused at once, a result with isError naming the limit,
	// counted (Refusals). On stdio, requests read and not yet answered are
	// bounded to twice this: past it, morph stops reading until an answer
	// is written. Zero is DefaultMaxCallsPerSession.
	MaxCallsPerSession int
	// SessionEndTimeout bounds releasing an ended session's instances.
	// Zero is DefaultSessionEndTimeout.
	SessionEndTimeout time.Duration
	// MaxNotifications bounds the progress and log notifications a plugin
	// sends one call's client; past it they are dropped and counted
	// (Refusals). Zero is DefaultMaxNotifications.
	MaxNotifications int
	// MaxItems bounds the prompts, the resources and the resource
	// templates served of each plugin (engine.MCPProvider): past it, the
	// first are served, with a warning. Zero is DefaultMaxItems.
	MaxItems int
	// MaxSamplingPerCall bounds the sampling requests (a plugin's
	// create_message) one call sends its client: one more is refused, the
	// plugin answered an error, counted (Refusals.Sampling). Zero is
	// DefaultMaxSamplingPerCall.
	MaxSamplingPerCall int
	// MaxSubscriptions bounds the resources a session subscribes to
	// (resources/subscribe): one more is refused with a JSON-RPC error
	// naming the limit, counted (Refusals.Subscriptions). Zero is
	// DefaultMaxSubscriptions.
	MaxSubscriptions int
}

// Server serves an engine's tools over MCP. It is safe for concurrent use:
// Serve may run once per client session, concurrently.
type Server struct {
	eng     *engine.Engine
	opts    Options
	log     *slog.Logger
	sdk     *sdk.Server
	tools   servedTools // the engine's tools as served (SyncTools)
	unwatch func()      // stops following the engine's tool changes (Close)
	items   served      // the plugins' prompts and resources as served (syncItems)
	updates updateQueue // notifications/resources/updated to send (resourceUpdated)
	// pollAfter is HTTPOptions.SSEPollAfter, when events are kept
	// (Handler sets it), as a time.Duration.
	pollAfter atomic.Int64

	mu           sync.Mutex
	sessions     map[*sdk.ServerSession]*session
	closing      bool // CloseSessions was called
	httpOpen     int  // HTTP sessions tracked and not yet ended
	httpStarting int  // requests that may start an HTTP session, in flight
	refused      Refusals
	ending       sync.WaitGroup // the HTTP sessions' ends (track)
}

// Skipped is a tool of the engine that is not served, and why.
type Skipped struct {
	Tool string
	Err  error
}

// NewServer initializes eng (loading its plugins, when that has not
// happened yet) and serves its tools as they are now (see SyncTools). A
// tool whose schema MCP cannot carry is not served: it is logged and listed
// by Skipped.
func NewServer(ctx context.Context, eng *engine.Engine, opts Options) (*Server, error) {
	if err := eng.Initialize(ctx); err != nil {
		return nil, fmt.Errorf("mcp: initializing the engine: %w", err)
	}
	if opts.Name == "" {
		opts.Name = "morph"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.MaxCallsPerSession <= 0 {
		opts.MaxCallsPerSession = DefaultMaxCallsPerSession
	}
	if opts.SessionEndTimeout <= 0 {
		opts.SessionEndTimeout = DefaultSessionEndTimeout
	}
	if opts.MaxNotifications <= 0 {
		opts.MaxNotifications = DefaultMaxNotifications
	}
	if opts.MaxItems <= 0 {
		opts.MaxItems = DefaultMaxItems
	}
	if opts.MaxSubscriptions <= 0 {
		opts.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if opts.MaxSamplingPerCall <= 0 {
		opts.MaxSamplingPerCall = DefaultMaxSamplingPerCall
	}
	s := &Server{eng: eng, opts: opts, log: opts.Logger, sessions: map[*sdk.ServerSession]*session{}}
	var complete func(context.Context, *sdk.CompleteRequest) (*sdk.CompleteResult, error)
	if s.findCompleters() {
		complete = s.complete // set only then: the SDK advertises completions when it is
	}
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: opts.Name, Version: opts.Version}, &sdk.ServerOptions{
		Logger:            opts.Logger,
		CompletionHandler: complete,
		// Set, so that a server with no tool still says it serves tools;
		// the list changes when a plugin is reloaded (SyncTools); logging:
		// plugins' log notifications reach the client.
		Capabilities:              &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}, Logging: &sdk.LoggingCapabilities{}},
		SupportedProtocolVersions: ProtocolVersions(),
		// Resources can be subscribed to (the SDK advertises it when some
		// are served): a plugin announces updates, and a reload is one.
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: s.unsubscribe,
	})
	s.sdk.AddReceivingMiddleware(s.trackHTTP)
	s.sdk.AddReceivingMiddleware(s.recordLevel)
	s.SyncTools(ctx)
	s.syncItems(ctx)
	// A plugin's or an MCP server's own list change (and a reload) reach
	// the clients as list_changed.
	s.unwatch = eng.OnToolsChanged(func(ctx context.Context) { s.SyncTools(context.WithoutCancel(ctx)) })
	return s, nil
}

// addTool adds t, turning a panic of the SDK's checks (an annotation it
// refuses, say) into an error: what a plugin declares must not stop the
// server.
func (s *Server) addTool(t *sdk.Tool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: the MCP SDK refused it: %v", ErrSchema, r)
		}
	}()
	s.sdk.AddTool(t, s.handler(t.Name))
	return nil
}

// Close stops following the engine's tool changes (and waits for a
// listing of the plugins' prompts and resources in progress), for a server done
// serving an engine that goes on (the sessions end with Serve, or
// CloseSessions over HTTP).
func (s *Server) Close() {
	s.unwatch()
	s.closeUpdates()
	s.closeItems()
}

// Tools are the names of the tools served, sorted.
func (s *Server) Tools() []string {
	s.tools.mu.Lock()
	defer s.tools.mu.Unlock()
	return slices.Clone(s.tools.names)
}

// Skipped are the engine's tools that are not served, with why.
func (s *Server) Skipped() []Skipped {
	s.tools.mu.Lock()
	defer s.tools.mu.Unlock()
	return slices.Clone(s.tools.skipped)
}

// ServeStdio serves one client over r and w (a process's standard input
// and output, one JSON-RPC message per line) until the client closes r, or
// ctx ends. See Serve. A line longer than Options.MaxRequestBytes, not
// JSON-RPC, or a batch is answered with a JSON-RPC error, counted
// (Refusals) and logged, and the session goes on. Once ctx has ended, an
// answer the client does not take is dropped (ErrClientStalled), so that
// a client that stopped reading cannot hold the server.
func (s *Server) ServeStdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	stop, cancel := context.WithCancel(ctx) // ends the writer when Serve returns
	t := &stdioTransport{r: r, w: w, limit: s.opts.MaxRequestBytes, stop: stop.Done(), wrote: make(chan struct{}),
		pending: 2 * s.opts.MaxCallsPerSession, refuse: s.refuser(ctx)}
	err := s.Serve(ctx, t)
	cancel()
	select { // the last answer is written before the caller (a process) goes
	case <-t.wrote:
	case <-ctx.Done():
	}
	return err
}

// Refusals count what the server refused, by limit.
type Refusals struct {
	// Sessions is new HTTP sessions refused for HTTPOptions.MaxSessions.
	Sessions int
	// Requests is stdio lines refused (over MaxRequestBytes, not
	// JSON-RPC, batches, a duplicate id) and HTTP requests refused for
	// HTTPOptions.MaxBytesInFlight.
	Requests int
	// Calls is tool calls refused for MaxCallsPerSession.
	Calls int
	// Notifications is a plugin's progress and log notifications dropped
	// for MaxNotifications.
	Notifications int
	// Items is plugins' prompts, resources and resource templates not
	// served for MaxItems.
	Items int
	// Sampling is plugins' sampling requests refused for
	// MaxSamplingPerCall.
	Sampling int
	// Subscriptions is resources/subscribe requests refused for
	// MaxSubscriptions.
	Subscriptions int
	// Updates is notifications/resources/updated dropped, with more
	// distinct URIs waiting to be sent than maxPendingUpdates.
	Updates int
}

// Refusals are the refusals so far.
func (s *Server) Refusals() Refusals {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// refuser counts a session's refused lines, and logs the first as a
// warning (the rest at debug level: a client sending nothing else must
// not flood the log).
func (s *Server) refuser(ctx context.Context) func(error) {
	n := 0
	return func(err error) {
		s.mu.Lock()
		s.refused.Requests++
		s.mu.Unlock()
		level := slog.LevelDebug
		if n++; n == 1 {
			level = slog.LevelWarn
		}
		s.log.Log(ctx, level, "mcp: a request refused (the session goes on)", "error", err, "refused_in_session", n)
	}
}

// Serve serves one MCP session over t until the client ends it or ctx
// ends (which cancels the calls in flight), then ends the engine session
// it was (its calls finish first, and its session-isolated instances are
// released). A client that closed the
// connection is a nil error; ctx's end is ctx.Err().
func (s *Server) Serve(ctx context.Context, t sdk.Transport) error {
	ss, err := s.sdk.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcp: connecting: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case <-ctx.Done():
		s.cancelCalls(ss) // the calls in flight, which Close would wait for
		ss.Close()
		<-done
		err = ctx.Err()
	case err = <-done:
		if err != nil {
			err = fmt.Errorf("mcp: session ended: %w", err)
		}
	}
	if eerr := s.end(ctx, ss); eerr != nil {
		s.log.WarnContext(ctx, "mcp: releasing an ended session", "error", eerr)
		err = errors.Join(err, eerr)
	}
	return err
}
