package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
)

// DefaultMaxRequestBytes bounds one request a client sends (one line on
// stdio) when Options.MaxRequestBytes is zero: far more than any tool's
// arguments need, far less than the SDK's own default (16 MiB) a client
// could make morph buffer per session.
const DefaultMaxRequestBytes = 4 << 20

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
	// MaxRequestBytes bounds one request line on stdio (ServeStdio); a
	// longer one ends the session with a *RequestTooLargeError. Zero is
	// DefaultMaxRequestBytes.
	MaxRequestBytes int
	// SessionEndTimeout bounds releasing an ended session's instances.
	// Zero is DefaultSessionEndTimeout.
	SessionEndTimeout time.Duration
	// MaxNotifications bounds the progress and log notifications a plugin
	// sends one call's client; past it they are dropped and counted
	// (DroppedNotifications). Zero is DefaultMaxNotifications.
	MaxNotifications int
}

// Server serves an engine's tools over MCP. It is safe for concurrent use:
// Serve may run once per client session, concurrently.
type Server struct {
	eng     *engine.Engine
	opts    Options
	log     *slog.Logger
	sdk     *sdk.Server
	served  []string
	skipped []Skipped

	mu       sync.Mutex
	sessions map[*sdk.ServerSession]*session
	closing  bool           // CloseSessions was called
	httpOpen int            // HTTP sessions tracked and not yet ended
	refused  int            // new HTTP sessions refused for MaxSessions
	dropped  int            // notifications dropped for MaxNotifications
	ending   sync.WaitGroup // the HTTP sessions' ends (track)
}

// Skipped is a tool of the engine that is not served, and why.
type Skipped struct {
	Tool string
	Err  error
}

// NewServer initializes eng (loading its plugins, when that has not
// happened yet) and serves its tools as they are now. A tool whose schema
// MCP cannot carry is not served: it is logged and listed by Skipped.
func NewServer(ctx context.Context, eng *engine.Engine, opts Options) (*Server, error) {
	if err := eng.Initialize(ctx); err != nil {
		return nil, err
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
	if opts.SessionEndTimeout <= 0 {
		opts.SessionEndTimeout = DefaultSessionEndTimeout
	}
	if opts.MaxNotifications <= 0 {
		opts.MaxNotifications = DefaultMaxNotifications
	}
	s := &Server{eng: eng, opts: opts, log: opts.Logger, sessions: map[*sdk.ServerSession]*session{}}
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: opts.Name, Version: opts.Version}, &sdk.ServerOptions{
		Logger: opts.Logger,
		// Set, so that a server with no tool still says it serves tools;
		// logging: plugins' log notifications reach the client.
		Capabilities:              &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}, Logging: &sdk.LoggingCapabilities{}},
		SupportedProtocolVersions: ProtocolVersions(),
	})
	s.sdk.AddReceivingMiddleware(s.trackHTTP)
	for _, spec := range eng.Registry().Specs() {
		if opts.Run.Tools != nil && !slices.Contains(opts.Run.Tools, spec.Name) {
			continue
		}
		schema, err := inputSchema(spec.Parameters)
		if err == nil {
			err = s.addTool(&sdk.Tool{Name: spec.Name, Description: spec.Description, InputSchema: schema})
		}
		if err != nil {
			s.skipped = append(s.skipped, Skipped{Tool: spec.Name, Err: err})
			s.log.WarnContext(ctx, "mcp: tool not served", "tool", spec.Name, "error", err)
			continue
		}
		s.served = append(s.served, spec.Name)
	}
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

// Tools are the names of the tools served, sorted.
func (s *Server) Tools() []string { return slices.Clone(s.served) }

// Skipped are the engine's tools that are not served, with why.
func (s *Server) Skipped() []Skipped { return slices.Clone(s.skipped) }

// ServeStdio serves one client over r and w (a process's standard input
// and output) until the client closes r, or ctx ends. See Serve. A request
// line longer than Options.MaxRequestBytes ends the session with a
// *RequestTooLargeError.
func (s *Server) ServeStdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	// The SDK's own line cap is off: lineLimit's is the same, and typed.
	return s.Serve(ctx, &sdk.IOTransport{Reader: &lineLimit{ReadCloser: r, limit: s.opts.MaxRequestBytes}, Writer: w, MaxLineLength: -1})
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
		s.session(ss, false).cancel() // the calls in flight, which Close would wait for
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
