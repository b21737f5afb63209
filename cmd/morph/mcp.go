package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

// mcpServeFlags are the flags of "morph mcp serve".
type mcpServeFlags struct {
	config          string
	maxRequestKB    int
	verbose         bool
	shutdownTimeout time.Duration
	http            string
	tokenEnv        string
	allowOrigins    []string
	sessionIdle     time.Duration
	maxSessions     int
	maxNotify       int
}

func newMCPCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the config's tools to Model Context Protocol clients",
	}
	var f mcpServeFlags
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve every tool of the config (plugins and built-ins) over MCP on standard input and output, or HTTP",
		Long: `Serve every tool of the config (its plugins' and the built-ins) to one MCP client over
standard input and output, until the client closes standard input or a signal comes.
Each call runs as a model's call of the tool runs in 'morph run': validated against
its schema, under the plugin's deadline, limits, grants and isolation; a failure is a
result with isError. The MCP session is a morph session: a plugin in session
isolation keeps one instance for it, released when it ends.

An MCP client's configuration starts it, for example:
  {"command": "morph", "args": ["mcp", "serve", "--config", "/path/to/morph.toml"]}

Standard output carries only the protocol; the summary, warnings and logs go to
standard error.

With --http ADDR it serves any number of clients over Streamable HTTP at
http://ADDR/ instead, until a signal comes; each HTTP session is a morph session,
ended when the client deletes it or it is idle for --session-idle. A request
whose Origin header is not a loopback origin or one of --allow-origin is refused
(403). An address other than loopback needs a bearer token, read from the
environment variable --token-env names; when that variable is set, every request
must carry the token (401 without it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return mcpServe(cmd, f, stdin, stdout, stderr)
		},
	}
	serve.Flags().StringVar(&f.config, "config", "morph.toml", "the config file")
	serve.Flags().IntVar(&f.maxRequestKB, "max-request-kb", mcp.DefaultMaxRequestBytes>>10,
		"the longest request line a client may send, in KiB; a longer one ends its session")
	serve.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "log the engine's and the plugins' debug messages on standard error")
	serve.Flags().DurationVar(&f.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "the bound of closing the plugins")
	serve.Flags().StringVar(&f.http, "http", "", "serve Streamable HTTP on this address (host:port; 127.0.0.1:0 picks a port) instead of standard input and output")
	serve.Flags().StringVar(&f.tokenEnv, "token-env", "MORPH_MCP_TOKEN", "with --http, the environment variable holding the bearer token clients must send")
	serve.Flags().StringArrayVar(&f.allowOrigins, "allow-origin", nil, "with --http, an origin (scheme://host[:port]) browsers may call from besides loopback ones; repeatable")
	serve.Flags().DurationVar(&f.sessionIdle, "session-idle", mcp.DefaultSessionIdle, "with --http, end a session after this long without a request")
	serve.Flags().IntVar(&f.maxSessions, "max-sessions", mcp.DefaultMaxSessions, "with --http, the most sessions open at once; a client starting another gets 503")
	serve.Flags().IntVar(&f.maxNotify, "max-notifications", mcp.DefaultMaxNotifications, "the most progress and log notifications a plugin sends one call's client; the rest are dropped, counted and warned about")
	cmd.AddCommand(serve)
	return cmd
}

func mcpServe(cmd *cobra.Command, f mcpServeFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if f.maxRequestKB <= 0 {
		return usageErrorf("--max-request-kb must be positive, not %d", f.maxRequestKB)
	}
	if f.shutdownTimeout <= 0 {
		return usageErrorf("--shutdown-timeout must be positive, not %s", f.shutdownTimeout)
	}
	if f.sessionIdle <= 0 {
		return usageErrorf("--session-idle must be positive, not %s", f.sessionIdle)
	}
	if f.maxSessions <= 0 {
		return usageErrorf("--max-sessions must be positive, not %d", f.maxSessions)
	}
	if f.maxNotify <= 0 {
		return usageErrorf("--max-notifications must be positive, not %d", f.maxNotify)
	}
	var loopback bool
	if f.http != "" {
		host, _, err := net.SplitHostPort(f.http)
		if err != nil {
			return usageErrorf("--http %s: %v", f.http, err)
		}
		// Decided before binding: a name other than localhost may resolve
		// beyond loopback, and an empty host is every interface.
		ip := net.ParseIP(host)
		loopback = host == "localhost" || (ip != nil && ip.IsLoopback())
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	// The engine's warnings are printed below, from its status: it logs
	// only errors unless -v.
	engineLogger := logger
	if !f.verbose {
		engineLogger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	cfg, err := config.Load(f.config)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	ctx := cmd.Context()
	rt, err := cfg.Open(ctx, logger, engine.WithLogger(engineLogger))
	if err != nil {
		code := exitRunFailed
		if errors.Is(err, config.ErrConfig) {
			code = exitUsage
		}
		return &exitError{code, err}
	}
	defer func() { closeRuntime(ctx, rt, f.shutdownTimeout, ctx.Err() != nil, stderr) }()
	st := rt.Engine.Status()
	fmt.Fprintln(stderr, "morph: "+oneLine(st.Summary(), 0))
	for _, w := range st.Warnings { // a plugin tool taking a built-in's name, ...
		fmt.Fprintln(stderr, "warning: "+oneLine(w, 500))
	}
	// The server logs the tools it does not serve, and why.
	srv, err := mcp.NewServer(ctx, rt.Engine, mcp.Options{Name: "morph", Version: moduleVersion(), Logger: logger,
		Run: cfg.RunOptions(), MaxRequestBytes: f.maxRequestKB << 10, MaxNotifications: f.maxNotify})
	if err != nil {
		return &exitError{exitRunFailed, err}
	}
	if f.http != "" {
		return mcpServeHTTP(ctx, srv, f, loopback, stderr)
	}
	fmt.Fprintf(stderr, "morph: serving %d tools over MCP on standard input and output\n", len(srv.Tools()))
	err = srv.ServeStdio(ctx, io.NopCloser(stdin), nopWriteCloser{stdout})
	switch {
	case err == nil || ctx.Err() != nil:
		return nil
	case errors.Is(err, mcp.ErrRequestTooLarge):
		return &exitError{exitRunFailed, fmt.Errorf("%w (--max-request-kb %d raises it)", err, f.maxRequestKB)}
	default:
		return &exitError{exitRunFailed, err}
	}
}

// nopWriteCloser is standard output as the transport's writer: the
// session's end must not close the process's standard output.
type nopWriteCloser struct{ io.Writer }

// Close does nothing.
func (nopWriteCloser) Close() error { return nil }

// mcpServeHTTP serves srv over Streamable HTTP on f.http until ctx ends.
func mcpServeHTTP(ctx context.Context, srv *mcp.Server, f mcpServeFlags, loopback bool, stderr io.Writer) error {
	h, err := srv.Handler(mcp.HTTPOptions{Loopback: loopback, Token: os.Getenv(f.tokenEnv),
		AllowedOrigins: f.allowOrigins, SessionIdle: f.sessionIdle, MaxSessions: f.maxSessions})
	if errors.Is(err, mcp.ErrNoToken) {
		return &exitError{exitUsage, fmt.Errorf("--http %s is not a loopback address: set the bearer token clients must send in $%s (--token-env names another variable): %w", f.http, f.tokenEnv, err)}
	}
	if err != nil {
		return &exitError{exitRunFailed, err}
	}
	ln, err := net.Listen("tcp", f.http)
	if err != nil {
		return &exitError{exitRunFailed, fmt.Errorf("--http %s: %w", f.http, err)}
	}
	defer ln.Close()
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stderr, "morph: serving %d tools over MCP at http://%s/\n", len(srv.Tools()), ln.Addr())
	select {
	case err := <-served:
		return &exitError{exitRunFailed, fmt.Errorf("serving HTTP: %w", err)}
	case <-ctx.Done():
	}
	// The sessions' streams never go idle: end them, then the listener.
	srv.CloseSessions()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	return nil
}
