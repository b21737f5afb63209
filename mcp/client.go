package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
)

// ServerConfig is one [[mcp_servers]] entry of morph.toml: an MCP server
// whose tools morph's agent uses. Package config checks it and resolves
// its headers; a zero limit takes its Default* value.
type ServerConfig struct {
	// Name names the server in errors, logs and Status.
	Name string
	// Command and Args start a server that speaks MCP on its standard
	// input and output; Dir is its working directory (empty: morph's).
	Command string
	Args    []string
	Dir     string
	// Env is the whole environment of the server's process, with PATH
	// and HOME added from morph's when it does not set them (see environ).
	Env map[string]string
	// URL is a Streamable HTTP server's endpoint, in place of Command.
	URL string
	// Headers are sent with every HTTP request (Authorization, ...),
	// their values already read from the environment.
	Headers map[string]string
	// OAuth, when set, has morph authorize itself to the server with
	// OAuth 2.1 (see OAuthConfig).
	OAuth *OAuthConfig
	// Tools, when not empty, are the only tools of the server's that are
	// used (by the server's names for them).
	Tools []string
	// Prefix, when not empty, names each tool Prefix + "." + the server's
	// name for it.
	Prefix string
	// Timeout bounds each tool call; past it the call is cancelled (the
	// server is told) and fails.
	Timeout time.Duration
	// StartupTimeout bounds the start: the process (or first request),
	// initialize and the first tools/list.
	StartupTimeout time.Duration
	// StopGrace is how long a stdio server has to exit once its input is
	// closed, before its process group is killed.
	StopGrace time.Duration
	// MaxOutputBytes caps a call's result (text, images and structured
	// content together). A message on the wire may hold more (see
	// wireLimit); one past that fails its call (stdio) or ends the
	// connection (HTTP).
	MaxOutputBytes int
	// MaxTools caps the tools a server may list (pages included).
	MaxTools int
	// Optional makes a server that fails to start a warning, its tools
	// absent, rather than an error that stops the engine.
	Optional bool
	// Restart is what happens to a server whose connection ended (it
	// exited, or sent what is not JSON-RPC): RestartOnFailure (the
	// default, "") or RestartNever.
	Restart string
	// MaxRestarts caps the restarts within restartWindow; past it the
	// server stays down.
	MaxRestarts int
	// ForwardLogs passes the server's log messages to the caller of its
	// one call in flight (engine.CallNotifier). Off by default: a log
	// message names no call, and may be about another caller's (morph
	// multiplexes its callers onto one session), so it is for an entry
	// whose callers are one party. Progress, which names its call, is
	// forwarded in any case.
	ForwardLogs bool
}

// Restart policies (ServerConfig.Restart).
const (
	// RestartOnFailure starts the server again on the next call that finds
	// its connection ended: at most MaxRestarts within restartWindow, each
	// after the last by a backoff that doubles (restartBackoff, at most
	// maxRestartBackoff); a call within the backoff fails at once.
	RestartOnFailure = "on-failure"
	// RestartNever keeps the server down until morph starts again.
	RestartNever = "never"
)

// Defaults of ServerConfig's limits.
const (
	DefaultTimeout        = 60 * time.Second
	DefaultStartupTimeout = 30 * time.Second
	DefaultStopGrace      = 5 * time.Second
	DefaultMaxOutputBytes = 1 << 20
	DefaultMaxTools       = 256
	DefaultMaxRestarts    = 5
)

// restartWindow is the window MaxRestarts counts restarts in;
// restartBackoff and maxRestartBackoff space restarts within it.
const (
	restartWindow     = 10 * time.Minute
	restartBackoff    = time.Second
	maxRestartBackoff = time.Minute
)

// withDefaults is c with its zero limits at their defaults.
func (c ServerConfig) withDefaults() ServerConfig {
	set := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	set(&c.Timeout, DefaultTimeout)
	set(&c.StartupTimeout, DefaultStartupTimeout)
	set(&c.StopGrace, DefaultStopGrace)
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.MaxTools <= 0 {
		c.MaxTools = DefaultMaxTools
	}
	if c.Restart == "" {
		c.Restart = RestartOnFailure
	}
	if c.MaxRestarts <= 0 {
		c.MaxRestarts = DefaultMaxRestarts
	}
	return c
}

// transport names how morph reaches the server.
func (c ServerConfig) transport() string {
	if c.URL != "" {
		return "http"
	}
	return "stdio"
}

// source is where the server is, for Status.
func (c ServerConfig) source() string {
	if c.URL != "" {
		return "mcp:" + c.URL
	}
	return "mcp:" + c.Command
}

// wireMargin is what a message on the wire may hold beyond its content:
// the JSON-RPC envelope, escaping, annotations.
const wireMargin = 64 << 10

// minWireBytes is the least content a message on the wire may carry,
// whatever MaxOutputBytes is: a tools/list page of large schemas is not a
// result, and a result a little over MaxOutputBytes is better refused
// alone than by ending the connection.
const minWireBytes = 4 << 20

// wireLimit is the longest message read from the server: a stdio line
// past it is read without being kept and fails its call (stdioClient); an
// HTTP body past it ends the connection. A result within it but over
// MaxOutputBytes is refused alone.
func (c ServerConfig) wireLimit() int { return max(c.MaxOutputBytes, minWireBytes) + wireMargin }

// protocolVersion is the version morph asks servers for: the newest with
// the initialize handshake (the SDK's default, 2026-07-28, is stateless).
const protocolVersion = "2025-11-25"

// ServersOptions are what the servers of one engine share.
type ServersOptions struct {
	// Logger receives what happens to the servers, their standard error
	// and log messages (escaped, rate-limited); nil: slog.Default().
	Logger *slog.Logger
	// Check checks a tool of a server's as the engine's registry will
	// (engine.Registry.CheckTool); one that fails is left out with a
	// warning rather than failing its server. Nil: no check here.
	Check func(engine.Tool) error
	// Version is morph's version, sent to the servers in clientInfo.
	Version string
	// HTTPTransport is the base of the HTTP servers' requests; nil:
	// http.DefaultTransport.
	HTTPTransport http.RoundTripper
	// AuthPrompt is where a server's OAuth authorization URL is printed
	// for the user (also when BROWSER opens it); nil, and no BROWSER: such
	// a server without usable cached tokens fails to start (an unattended
	// run), with an error saying to run `morph mcp login`.
	AuthPrompt io.Writer
}

// Servers are the MCP servers of one engine. The first of their extenders
// that the engine opens starts them all, in parallel, each bounded by its
// StartupTimeout, so an Initialize that opens plugins one by one waits for
// the slowest server, not for their sum.
type Servers struct {
	opts    ServersOptions
	servers []*server
	start   sync.Once
}

// NewServers returns the servers of cfgs, not started.
func NewServers(cfgs []ServerConfig, opts ServersOptions) *Servers {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Version == "" {
		opts.Version = "devel"
	}
	if opts.HTTPTransport == nil {
		opts.HTTPTransport = http.DefaultTransport
	}
	s := &Servers{opts: opts}
	for _, c := range cfgs {
		c = c.withDefaults()
		log := opts.Logger.With("mcp_server", c.Name)
		s.servers = append(s.servers, &server{cfg: c, opts: &s.opts, log: log, lines: &rateLog{log: log},
			ready: make(chan struct{}), relist: make(chan struct{}, 1), stop: make(chan struct{}), restarting: make(chan struct{}, 1)})
	}
	return s
}

// Extenders are the servers as plugins of the engine, in order, each
// named as its entry.
func (s *Servers) Extenders() []engine.Extender {
	out := make([]engine.Extender, len(s.servers))
	for i, srv := range s.servers {
		out[i] = extender{s, srv}
	}
	return out
}

// Close stops every server that is running, in parallel (each stdio
// server may take its StopGrace), also those whose extender the engine
// never opened or closed (an engine that failed to initialize). Each
// server's Extension.Close calls it: the engine closes its plugins one by
// one, and servers closed one by one would add up their grace periods.
func (s *Servers) Close(ctx context.Context) error {
	errs := make([]error, len(s.servers))
	var wg sync.WaitGroup
	for i, srv := range s.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = srv.close(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ServerStats is what Servers.Stats tells of one server.
type ServerStats struct {
	Name string
	// Running is whether its connection is up.
	Running bool
	// Notifications counts the notifications it sent (log messages,
	// progress, list changes), however many were logged or acted on.
	Notifications int64
	// LinesDropped counts lines of its standard error and log messages
	// not logged, past the rate limit.
	LinesDropped int64
	// RequestsDropped counts requests of a stdio server's (ping, ...)
	// dropped unanswered, past the rate limit.
	RequestsDropped int64
	// MessagesTooLarge counts a stdio server's messages over the line
	// limit, skipped (the call each answered failed with
	// ErrOutputTooLarge).
	MessagesTooLarge int64
	// ForwardsDropped counts its notifications for a call's caller
	// (progress, log messages) dropped because the caller had not taken
	// the ones before (a queue of 64 a call).
	ForwardsDropped int64
}

// Stats tells of each server, in order.
func (s *Servers) Stats() []ServerStats {
	out := make([]ServerStats, len(s.servers))
	for i, srv := range s.servers {
		c := srv.current()
		out[i] = ServerStats{Name: srv.cfg.Name, Running: c != nil && !c.isDown(),
			Notifications: srv.notifications.Load(), LinesDropped: srv.lines.dropped.Load(),
			RequestsDropped: srv.requestsDropped.Load(), MessagesTooLarge: srv.tooLarge.Load(),
			ForwardsDropped: srv.forwardsDropped.Load()}
	}
	return out
}

// startAll starts every server, once, each in a goroutine of its own.
func (s *Servers) startAll(ctx context.Context) {
	s.start.Do(func() {
		for _, srv := range s.servers {
			srv.began.Store(true)
			go srv.startUp(ctx)
		}
	})
}

// extender is a server as an engine.Extender.
type extender struct {
	s   *Servers
	srv *server
}

// Name is the entry's name.
func (x extender) Name() string { return x.srv.cfg.Name }

// Open starts the servers (all of them, the first time) and waits for this
// one: its tools, or its failure, which for an optional server is a
// warning and no tools.
func (x extender) Open(ctx context.Context) (*engine.Extension, error) {
	x.s.startAll(context.WithoutCancel(ctx))
	srv := x.srv
	select {
	case <-srv.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	details := &ServerDetails{Transport: srv.cfg.transport()}
	ext := &engine.Extension{Source: srv.cfg.source(), Details: details, Close: x.s.Close}
	if srv.startErr != nil {
		if !srv.cfg.Optional {
			return nil, srv.startErr
		}
		details.Error = srv.startErr.Error()
		ext.Warnings = []string{"optional MCP server not started, its tools left out: " + srv.startErr.Error()}
		return ext, nil
	}
	info := srv.info
	if info.ServerInfo != nil {
		details.Server, details.Version = info.ServerInfo.Name, info.ServerInfo.Version
		ext.Version = info.ServerInfo.Version
	}
	details.Protocol = info.ProtocolVersion
	ext.Tools, ext.Warnings = srv.firstTools, srv.firstWarnings
	ext.WatchTools = srv.watch
	return ext, nil
}

// ServerDetails are what Status reports of an MCP server (its
// Extension.Details).
type ServerDetails struct {
	Transport string `json:"transport"`          // "stdio" or "http"
	Server    string `json:"server,omitempty"`   // its serverInfo name
	Version   string `json:"version,omitempty"`  // its serverInfo version
	Protocol  string `json:"protocol,omitempty"` // the protocol version agreed
	// Error is why an optional server is not running.
	Error string `json:"error,omitempty"`
}

// server is one MCP server and its connection.
type server struct {
	cfg   ServerConfig
	opts  *ServersOptions
	log   *slog.Logger
	lines *rateLog // its standard error and log messages

	began         atomic.Bool   // startUp was started
	ready         chan struct{} // closed when startUp is done
	startErr      error
	info          *sdk.InitializeResult // the server's answer to initialize
	firstTools    []engine.Tool
	firstWarnings []string

	mu        sync.Mutex
	conn      *conn                                      // nil before the start and after close
	update    func(context.Context, []engine.Tool) error // the engine's, from WatchTools
	closed    bool
	following following // the calls in flight (client_notify.go)
	asks      asks      // what a server's questions left to say (client_ask.go)

	restarting chan struct{} // one slot, held by the one restart under way (revive)
	restarts   []time.Time   // the restarts within restartWindow; restarting
	restartErr error         // the last failed restart's; restarting

	relist          chan struct{} // a list change to follow (one slot: changes coalesce)
	stop            chan struct{} // closed by close
	stopOnce        sync.Once
	watching        sync.WaitGroup
	notifications   atomic.Int64
	requestsDropped atomic.Int64
	tooLarge        atomic.Int64 // messages over the line limit (stdio)
	forwardsDropped atomic.Int64 // notifications for a caller past its queue (forward)
}

// startUp connects to the server and reads its tools, all within its
// StartupTimeout.
func (srv *server) startUp(ctx context.Context) {
	defer close(srv.ready)
	ctx, cancel := context.WithTimeout(ctx, srv.cfg.StartupTimeout)
	defer cancel()
	c, listed, err := srv.open(ctx)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("%w: not ready within %s (startup_timeout): %w", ErrStartup, srv.cfg.StartupTimeout, err)
		} else {
			err = fmt.Errorf("%w: %w", ErrStartup, err)
		}
		srv.startErr = &ServerError{Server: srv.cfg.Name, Err: err}
		srv.log.Warn("mcp server did not start", "error", err)
		return
	}
	srv.info = c.cs.InitializeResult()
	srv.firstTools, srv.firstWarnings = srv.tools(listed)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.closed { // closed while starting
		go c.close(context.Background())
		srv.startErr = &ServerError{Server: srv.cfg.Name, Err: fmt.Errorf("%w: closed while starting", ErrStartup)}
		return
	}
	srv.conn = c
	srv.watching.Add(1)
	go srv.followLists()
	srv.log.Info("mcp server started", "tools", len(srv.firstTools))
}

// open connects to the server and lists its tools: a start, or a
// restart (revive).
func (srv *server) open(ctx context.Context) (*conn, []*sdk.Tool, error) {
	c, err := srv.dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	listed, err := c.list(ctx)
	if err != nil {
		c.close(context.Background())
		return nil, nil, err
	}
	return c, listed, nil
}

// current is the server's connection, nil when there is none.
func (srv *server) current() *conn {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.conn
}

// watch is the Extension's WatchTools: it keeps the engine's update.
func (srv *server) watch(update func(context.Context, []engine.Tool) error) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.update = update
}

// relistGap is the least time between two tools/list requests that follow
// list changes: a server that floods notifications/tools/list_changed
// costs one listing per relistGap, the changes in between coalesced.
const relistGap = 500 * time.Millisecond

// listChanged is the client's ToolListChangedHandler. It runs on the
// connection's reading goroutine, so it only signals followLists.
func (srv *server) listChanged(context.Context, *sdk.ToolListChangedRequest) {
	srv.notifications.Add(1)
	select {
	case srv.relist <- struct{}{}:
	default: // one is pending already
	}
}

// followLists lists the tools again after each change the server tells of
// (at most one listing per relistGap, each bounded by the call Timeout)
// and gives the list to the engine, which checks it and keeps a tool of
// another source's name (a built-in's) from being taken, with a warning.
func (srv *server) followLists() {
	defer srv.watching.Done()
	for {
		select {
		case <-srv.stop:
			return
		case <-srv.relist:
		}
		srv.relistOnce()
		select {
		case <-srv.stop:
			return
		case <-time.After(relistGap):
		}
	}
}

// relistOnce lists the tools and hands them to the engine.
func (srv *server) relistOnce() {
	c := srv.current()
	if c == nil || c.isDown() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), srv.cfg.Timeout)
	defer cancel()
	listed, err := c.list(ctx)
	if err != nil {
		srv.log.Warn("mcp server's changed tool list not read; its tools stay as they were", "error", err)
		return
	}
	tools, warnings := srv.tools(listed)
	for _, w := range warnings {
		srv.log.Warn("mcp server's changed tool list: " + w)
	}
	srv.mu.Lock()
	update := srv.update
	srv.mu.Unlock()
	if update != nil {
		_ = update(ctx, tools) // the engine logs a refusal, naming the server
	}
}

// close stops the server: its connection closed, a stdio server's process
// group killed after StopGrace. It is idempotent.
func (srv *server) close(ctx context.Context) error {
	if srv.began.Load() { // a start under way ends within its StartupTimeout
		select {
		case <-srv.ready:
		case <-ctx.Done(): // startUp closes what it started once it sees closed
		}
	}
	srv.stopOnce.Do(func() { close(srv.stop) })
	srv.mu.Lock()
	c := srv.conn
	srv.conn, srv.closed = nil, true
	srv.mu.Unlock()
	select { // a restart under way sees closed, and closes what it started
	case srv.restarting <- struct{}{}:
		<-srv.restarting
	case <-ctx.Done():
	}
	srv.watching.Wait()
	if c == nil {
		return nil
	}
	return c.close(ctx)
}

// dial starts the server (stdio) or reaches it (HTTP) and initializes the
// session.
func (srv *server) dial(ctx context.Context) (*conn, error) {
	c := &conn{srv: srv, limit: srv.cfg.wireLimit(), ended: make(chan struct{})}
	c.closing, c.closed = context.WithCancel(context.Background())
	var t sdk.Transport
	if srv.cfg.URL != "" {
		st := &sdk.StreamableClientTransport{
			Endpoint:     srv.cfg.URL,
			HTTPClient:   &http.Client{Transport: &httpLimit{base: srv.opts.HTTPTransport, headers: srv.cfg.Headers, c: c}},
			MaxRetries:   2,
			MaxEventSize: c.limit,
		}
		if srv.cfg.OAuth != nil {
			h, err := srv.oauthHandler()
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrAuthorization, err)
			}
			st.OAuthHandler = h
		}
		t = st
	} else {
		var err error
		if t, err = c.startProcess(); err != nil {
			return nil, err
		}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "morph", Version: srv.opts.Version}, &sdk.ClientOptions{
		Logger:                      srv.log,
		Capabilities:                &sdk.ClientCapabilities{}, // no roots; the handlers below add sampling and elicitation
		ElicitationHandler:          srv.elicit,                // relayed to a call's caller (client_ask.go)
		CreateMessageHandler:        srv.createMessage,
		ToolListChangedHandler:      srv.listChanged,
		LoggingMessageHandler:       srv.logMessage,
		ProgressNotificationHandler: func(ctx context.Context, req *sdk.ProgressNotificationClientRequest) { srv.progress(ctx, req.Params) },
		PromptListChangedHandler:    func(context.Context, *sdk.PromptListChangedRequest) { srv.notifications.Add(1) },
		ResourceListChangedHandler:  func(context.Context, *sdk.ResourceListChangedRequest) { srv.notifications.Add(1) },
	})
	// The start's end ends its HTTP requests: on a failed initialize the
	// SDK closes the session, which waits for the request's write, which
	// a server that never answers would hold forever.
	stop := context.AfterFunc(ctx, c.closed)
	cs, err := client.Connect(ctx, t, &sdk.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if !stop() && err == nil { // the start ended as it succeeded: its requests may be cut
		cs.Close()
		err = ctx.Err()
	}
	if err != nil {
		err = c.explain(err)
		c.close(context.Background())
		return nil, err
	}
	c.cs = cs
	go func() {
		_ = cs.Wait() // its end's cause is explained when a call meets it
		c.down()
	}()
	return c, nil
}

// logMessage is the client's LoggingMessageHandler: the server's log
// message, logged escaped and rate-limited, and forwarded to a call's
// caller (forwardLog).
func (srv *server) logMessage(_ context.Context, req *sdk.LoggingMessageRequest) {
	srv.notifications.Add(1)
	if p := req.Params; p != nil {
		srv.lines.line("mcp server log message", fmt.Sprint(p.Data), "level", string(p.Level))
		srv.forwardLog(p)
	}
}

// conn is one connection to a server: its session and, for a stdio
// server, its process.
type conn struct {
	srv   *server
	cs    *sdk.ClientSession
	limit int // bytes of one message on the wire

	cmd           *exec.Cmd
	stdin, stdout *os.File // morph's ends of its pipes
	stderr        *stderrTail
	exited        chan struct{} // closed once the process is reaped
	exit          error         // cmd.Wait's, once exited

	closing context.Context // canceled by close: ends the HTTP requests still open
	closed  context.CancelFunc

	ended chan struct{} // closed when the session ended (down)
	once  sync.Once

	closeOnce sync.Once
	closeErr  error

	mu     sync.Mutex
	broken error // what the server did that ended the connection: a limit broken, a line not JSON-RPC
}

// broke records err, a limit the server broke or a line not JSON-RPC, as
// the connection's end's cause (the first one only).
func (c *conn) broke(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = err
		c.srv.log.Warn("mcp server's connection ends", "error", err)
	}
}

// down marks the session ended: when the SDK's connection is done, or as
// soon as a call found it gone (the SDK may tell the call first).
func (c *conn) down() { c.once.Do(func() { close(c.ended) }) }

// isDown reports whether the session has ended.
func (c *conn) isDown() bool {
	select {
	case <-c.ended:
		return true
	default:
		return false
	}
}

// explain is err, a failure of the connection, with what is known of its
// cause: the limit the server broke, or how its process ended and the
// last lines of its standard error.
func (c *conn) explain(err error) error {
	c.mu.Lock()
	broken := c.broken
	c.mu.Unlock()
	if broken != nil {
		return broken
	}
	if c.exited != nil {
		select {
		case <-c.exited:
		case <-time.After(time.Second): // a process that closed its output and lives on
		}
		select {
		case <-c.exited:
			exit := "exited"
			if c.exit != nil {
				exit += ": " + c.exit.Error()
			}
			if tail := c.stderr.String(); tail != "" {
				exit += "; its last standard error: " + tail
			}
			return fmt.Errorf("%s (%w)", exit, err)
		default:
		}
	}
	return err
}

// close ends the connection: the session closed (a stdio server's input
// with it); a stdio server then has StopGrace to exit before its process
// group is killed, which happens in any case, for what it started. It is
// idempotent (a connection restarted from is closed by the restart, and
// by close when the restart failed): the process group is killed once,
// never after its id may have been reused.
func (c *conn) close(ctx context.Context) error {
	c.closeOnce.Do(func() { c.closeErr = c.end(ctx) })
	return c.closeErr
}

// end is close's work. The session's close does not gate the rest: the
// SDK's waits for the requests in flight, whose writes a stdio server that
// does not read its input would hold; so after StopGrace (or ctx) the
// process group is killed and the pipes closed in any case, which ends
// those writes, and the session's close is then waited for a bounded time.
func (c *conn) end(ctx context.Context) error {
	csDone := make(chan error, 1)
	if c.cs != nil {
		go func() { csDone <- c.cs.Close() }()
	} else {
		csDone <- nil
	}
	var err error
	if c.cmd == nil {
		select {
		case err = <-csDone:
			c.closed()
		case <-ctx.Done():
			c.closed() // ends the HTTP requests the close waits for
			err = c.waitClose(csDone)
		}
	} else {
		if c.cs == nil { // the session never began: its pipes are still open
			c.closePipes()
		}
		select {
		case <-c.exited:
		case <-time.After(c.srv.cfg.StopGrace):
		case <-ctx.Done():
		}
		killGroup(c.cmd)
		c.closePipes() // a write held by a server that did not read ends
		<-c.exited
		c.closed()
		err = c.waitClose(csDone)
	}
	if err != nil && !errors.Is(err, sdk.ErrConnectionClosed) {
		return &ServerError{Server: c.srv.cfg.Name, Err: err}
	}
	return nil
}

// sessionCloseBound is how long end waits for the session's close once
// the connection's pipes or requests are ended under it.
const sessionCloseBound = 5 * time.Second

// waitClose is the session close's error, or one saying it did not end
// within sessionCloseBound (it goes on in the background).
func (c *conn) waitClose(csDone <-chan error) error {
	select {
	case err := <-csDone:
		return err
	case <-time.After(sessionCloseBound):
		return fmt.Errorf("the session's close did not end within %s of its connection's", sessionCloseBound)
	}
}
