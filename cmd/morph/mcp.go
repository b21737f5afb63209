package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/httpguard"
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
	maxCalls        int
	watch           bool
	maxNotify       int
	maxItems        int
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
must carry the token (401 without it).

With --watch it reloads a [[plugins]] entry whose file changes (a rebuild)
while it serves: the new module is checked as at start (sha256 pin, limits,
ABI, grants) and, if it passes, serves new calls while calls in flight
finish on the old one; clients are sent notifications/tools/list_changed.
A session keeps a session-isolated plugin's old instances until it ends.
A file that fails the checks is logged and the old module keeps serving.

With [mcp] pipelines in the config, each DOT pipeline listed is one more
tool: a call runs it as morph pipeline run does, its stages reported as
progress, its human gates asked through the client's elicitation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return mcpServe(cmd, f, stdin, stdout, stderr)
		},
	}
	serve.Flags().StringVar(&f.config, "config", defaultConfigFile, "the config file")
	serve.Flags().IntVar(&f.maxRequestKB, "max-request-kb", mcp.DefaultMaxRequestBytes>>10,
		"the longest request a client may send, in KiB (a line on standard input, a body over HTTP); a longer one is refused with an error, and the session goes on (overrides [mcp] max_request_kb)")
	serve.Flags().IntVar(&f.maxCalls, "max-calls-per-session", mcp.DefaultMaxCallsPerSession,
		"the most tool calls a session runs at once; one more is refused at once with an isError result (overrides [mcp] max_calls_per_session)")
	serve.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "log the engine's and the plugins' debug messages on standard error")
	serve.Flags().DurationVar(&f.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "the bound of closing the plugins, and of releasing an ended session's instances")
	serve.Flags().StringVar(&f.http, "http", "", "serve Streamable HTTP on this address (host:port; 127.0.0.1:0 picks a port) instead of standard input and output")
	serve.Flags().StringVar(&f.tokenEnv, "token-env", "MORPH_MCP_TOKEN", "with --http, the environment variable holding the bearer token clients must send")
	serve.Flags().StringArrayVar(&f.allowOrigins, "allow-origin", nil, "with --http, an origin (scheme://host[:port]) browsers may call from besides loopback ones; repeatable")
	serve.Flags().DurationVar(&f.sessionIdle, "session-idle", mcp.DefaultSessionIdle, "with --http, end a session after this long without a request (overrides [mcp] session_idle)")
	serve.Flags().IntVar(&f.maxSessions, "max-sessions", mcp.DefaultMaxSessions, "with --http, the most sessions open at once; a client starting another gets 503 (overrides [mcp] max_sessions)")
	serve.Flags().BoolVar(&f.watch, "watch", false, "reload a plugin whose file changes, for new calls (see above)")
	serve.Flags().IntVar(&f.maxNotify, "max-notifications", mcp.DefaultMaxNotifications, "the most progress and log notifications a plugin sends one call's client; the rest are dropped, counted and warned about (overrides [mcp] max_notifications)")
	serve.Flags().IntVar(&f.maxItems, "max-items", mcp.DefaultMaxItems, "the most prompts, resources and resource templates served of each plugin; past it the first are served, with a warning (overrides [mcp] max_items)")
	cmd.AddCommand(serve)
	cmd.AddCommand(newMCPLoginCmd(stderr))
	return cmd
}

// newMCPLoginCmd is "morph mcp login NAME": the OAuth flow of one
// [[mcp_servers]] entry (mcp.Login), its tokens cached for the runs.
func newMCPLoginCmd(stderr io.Writer) *cobra.Command {
	var configFile string
	var timeout time.Duration
	login := &cobra.Command{
		Use:   "login NAME",
		Short: "Authorize morph with an MCP server that uses OAuth ([[mcp_servers]] entry NAME), once, for later runs",
		Long: `Run the OAuth authorization of the [[mcp_servers]] entry NAME (one with an oauth
table) and cache its tokens under the user's cache directory, for the runs that
follow, which refresh them. The authorization URL is opened with the command in
BROWSER, if set, and printed here for you to open; the authorization server then
redirects your browser to morph, listening on 127.0.0.1 until --timeout.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usageErrorf("--timeout must be positive, not %s", timeout)
			}
			cfg, err := loadConfig(configFile)
			if err != nil {
				return err
			}
			servers, err := cfg.MCPServerConfigs()
			if err != nil {
				return &exitError{exitUsage, err}
			}
			i := slices.IndexFunc(servers, func(s mcp.ServerConfig) bool { return s.Name == args[0] })
			if i < 0 || servers[i].OAuth == nil {
				return usageErrorf("%s has no [[mcp_servers]] entry %q with an oauth table", configFile, args[0])
			}
			logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			tools, err := mcp.Login(cmd.Context(), servers[i], mcp.LoginOptions{Logger: logger, Prompt: stderr,
				Timeout: timeout, Version: moduleVersion()})
			if err != nil {
				return &exitError{exitRunFailed, err}
			}
			dir, _ := mcp.TokenDir() // Login found it
			fmt.Fprintf(stderr, "morph: authorized with MCP server %s (%d tools); tokens cached in %s\n", args[0], tools, dir)
			return nil
		},
	}
	login.Flags().StringVar(&configFile, "config", defaultConfigFile, "the config file")
	login.Flags().DurationVar(&timeout, "timeout", mcp.DefaultLoginTimeout, "how long to wait for the authorization in the browser")
	return login
}

func mcpServe(cmd *cobra.Command, f mcpServeFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if f.maxRequestKB <= 0 || f.maxRequestKB > config.MaxKB {
		return usageErrorf("--max-request-kb must be from 1 to %d, not %d", config.MaxKB, f.maxRequestKB)
	}
	if f.maxCalls <= 0 {
		return usageErrorf("--max-calls-per-session must be positive, not %d", f.maxCalls)
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
	if f.maxItems <= 0 {
		return usageErrorf("--max-items must be positive, not %d", f.maxItems)
	}
	var loopback bool
	if f.http != "" {
		var err error
		if loopback, err = httpguard.LoopbackAddr(f.http); err != nil {
			return usageErrorf("--http %s: %v", f.http, err)
		}
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
	cfg, err := loadConfig(f.config)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	rt, err := cfg.Open(ctx, logger, engine.WithLogger(engineLogger))
	if err != nil {
		return openFailed(err)
	}
	defer func() { closeRuntime(ctx, rt, f.shutdownTimeout, ctx.Err() != nil, stderr) }()
	// [mcp] pipelines: tools on an engine of their own, closed before rt.
	if prt, err := servePipelines(ctx, cfg, rt.Engine, logger); err != nil {
		return err
	} else if prt != nil {
		defer func() { closeRuntime(ctx, prt, f.shutdownTimeout, ctx.Err() != nil, stderr) }()
	}
	st := rt.Engine.Status()
	fmt.Fprintln(stderr, "morph: "+oneLine(st.Summary(), 0))
	for _, w := range st.Warnings { // a plugin tool taking a built-in's name, ...
		fmt.Fprintln(stderr, "morph: warning: "+oneLine(w, 500))
	}
	// The server logs the tools it does not serve, and why.
	// [mcp] sets the limits; a flag given overrides its key.
	opts, httpOpts := cfg.MCP.Options(), cfg.MCP.HTTPOptions()
	flags := cmd.Flags()
	if flags.Changed("max-request-kb") {
		opts.MaxRequestBytes = f.maxRequestKB << 10
	}
	if flags.Changed("max-calls-per-session") {
		opts.MaxCallsPerSession = f.maxCalls
	}
	if flags.Changed("max-sessions") {
		httpOpts.MaxSessions = f.maxSessions
	}
	if flags.Changed("max-notifications") {
		opts.MaxNotifications = f.maxNotify
	}
	if flags.Changed("max-items") {
		opts.MaxItems = f.maxItems
	}
	if flags.Changed("session-idle") {
		httpOpts.SessionIdle = f.sessionIdle
	}
	opts.Name, opts.Version, opts.Logger, opts.Run, opts.SessionEndTimeout = "morph", moduleVersion(), logger, cfg.RunOptions(), f.shutdownTimeout
	srv, err := mcp.NewServer(ctx, rt.Engine, opts)
	if err != nil {
		return &exitError{exitRunFailed, err}
	}
	defer srv.Close()
	if f.watch {
		stop, err := watchPlugins(ctx, srv, rt, cfg, logger)
		if err != nil {
			return &exitError{exitRunFailed, err}
		}
		defer stop() // before the runtime closes
	}
	if f.http != "" {
		httpOpts.Loopback, httpOpts.Token, httpOpts.AllowedOrigins = loopback, os.Getenv(f.tokenEnv), f.allowOrigins
		return mcpServeHTTP(ctx, srv, f, httpOpts, stderr)
	}
	fmt.Fprintf(stderr, "morph: serving %s over MCP on standard input and output\n", plural(len(srv.Tools()), "tool"))
	if err := srv.ServeStdio(ctx, io.NopCloser(stdin), nopWriteCloser{stdout}); err != nil && ctx.Err() == nil {
		return &exitError{exitRunFailed, err}
	}
	return nil
}

// nopWriteCloser is standard output as the transport's writer: the
// session's end must not close the process's standard output.
type nopWriteCloser struct{ io.Writer }

// Close does nothing.
func (nopWriteCloser) Close() error { return nil }

// mcpServeHTTP serves srv over Streamable HTTP on f.http with o until ctx
// ends.
func mcpServeHTTP(ctx context.Context, srv *mcp.Server, f mcpServeFlags, o mcp.HTTPOptions, stderr io.Writer) error {
	h, err := srv.Handler(o)
	if errors.Is(err, mcp.ErrNoToken) {
		return &exitError{exitUsage, fmt.Errorf("--http %s is not a loopback address: set the bearer token clients must send in $%s (--token-env names another variable): %w", f.http, f.tokenEnv, err)}
	}
	if err != nil {
		return &exitError{exitRunFailed, err}
	}
	err = httpguard.Server{
		Handler: h, ShutdownTimeout: f.shutdownTimeout,
		Ready: func(addr net.Addr) {
			fmt.Fprintf(stderr, "morph: serving %s over MCP at http://%s/\n", plural(len(srv.Tools()), "tool"), addr)
		},
		// The sessions' streams never go idle: end them, then the
		// listener; both within --shutdown-timeout, past which the
		// connections are cut.
		Drain: func(ctx context.Context) {
			if err := srv.CloseSessions(ctx); err != nil {
				fmt.Fprintln(stderr, "morph: "+err.Error()+": cutting the connections")
			}
		},
	}.Serve(ctx, f.http)
	if err != nil {
		return &exitError{exitRunFailed, fmt.Errorf("--http %s: %w", f.http, err)}
	}
	return nil
}

// watchPlugins reloads the config's [[plugins]] whose files change, for
// srv, until ctx ends or stop is called, which waits for a reload under way
// (--watch).
func watchPlugins(ctx context.Context, srv *mcp.Server, rt *config.Runtime, cfg *config.Config, logger *slog.Logger) (stop func(), err error) {
	w, err := mcp.NewWatcher(srv, rt.Loader(), rt.WatchTargets(cfg), mcp.WatchOptions{Logger: logger, Interval: cfg.MCP.WatchInterval})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	return func() { cancel(); <-done }, nil
}
