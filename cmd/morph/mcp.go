package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
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
}

func newMCPCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the config's tools to Model Context Protocol clients",
	}
	var f mcpServeFlags
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve every tool of the config (plugins and built-ins) over MCP on standard input and output",
		Long: `Serve every tool of the config (its plugins' and the built-ins) to one MCP client over
standard input and output, until the client closes standard input or a signal comes.
Each call runs as a model's call of the tool runs in 'morph run': validated against
its schema, under the plugin's deadline, limits, grants and isolation; a failure is a
result with isError. The MCP session is a morph session: a plugin in session
isolation keeps one instance for it, released when it ends.

An MCP client's configuration starts it, for example:
  {"command": "morph", "args": ["mcp", "serve", "--config", "/path/to/morph.toml"]}

Standard output carries only the protocol; the summary, warnings and logs go to
standard error.`,
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
		Run: cfg.RunOptions(), MaxRequestBytes: f.maxRequestKB << 10})
	if err != nil {
		return &exitError{exitRunFailed, err}
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
