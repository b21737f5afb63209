package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/internal/httpguard"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/pipeline"
	"github.com/morphhost/morph/pipeline/serve"
)

// pipelineServeFlags are the flags of "morph pipeline serve".
type pipelineServeFlags struct {
	config, http, tokenEnv, runs string
	allowOrigins, pipelines      []string
	allowDOT, verbose            bool
	maxRequestKB, maxRuns        int
	ringKB, keepEvents           int
	maxKeptRuns, maxStreams      int
	shutdownTimeout              time.Duration
	writeTimeout                 time.Duration
}

func newPipelineServeCmd(stderr io.Writer) *cobra.Command {
	var f pipelineServeFlags
	cmd := &cobra.Command{
		Use:   "serve --pipeline NAME=FILE.dot ...",
		Short: "Serve pipeline runs over HTTP: start, follow (SSE), answer gates, cancel, resume",
		Long: `Serve the pipelines named with --pipeline over HTTP, with the model, tools
and plugins of the config. A client starts a run (POST /v1/runs
{"name": NAME}), follows its events (GET /v1/runs/ID/events, Server-Sent
Events; Last-Event-ID resumes), answers its human gates (GET .../questions,
POST .../questions/QID/answer {"choice": "..."}), reads its status,
checkpoint, context and files, cancels and resumes it. The attractor
spec's paths (/pipelines/...) are the same handlers; GET /healthz answers
without a token.

Runs go to --runs (default [pipeline] runs_dir), one directory each; the
runs found there at start are listed, and the stopped ones can be resumed.
On SIGINT/SIGTERM the running runs are canceled with a checkpoint.

The address is loopback by default. Beyond loopback, clients must send the
bearer token in $MORPH_PIPELINE_TOKEN (--token-env): serve refuses to start
without one. Inline DOT (POST {"dot": ...}) is refused unless --allow-dot:
a token holder then runs only the pipelines named here.

Exit codes: 0 stopped by a signal, 1 serving failed, 2 a usage error or a
bad config.`,
		Example: `  morph pipeline serve --config morph.toml --pipeline review=examples/pipelines/release-review.dot
  curl -s -X POST localhost:7140/v1/runs -d '{"name":"review"}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return pipelineServe(cmd.Context(), f, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", defaultConfigFile, "the config file")
	fl.StringVar(&f.http, "http", "127.0.0.1:7140", "the address to listen on (host:port)")
	fl.StringVar(&f.tokenEnv, "token-env", "MORPH_PIPELINE_TOKEN", "the environment variable holding the bearer token clients must send (required beyond loopback)")
	fl.StringArrayVar(&f.allowOrigins, "allow-origin", nil, "an origin (scheme://host[:port]) browsers may call from besides loopback ones; repeatable")
	fl.StringVar(&f.runs, "runs", "", "the directory of the run directories (default [pipeline] runs_dir)")
	fl.StringArrayVar(&f.pipelines, "pipeline", nil, "a pipeline clients may start, NAME=FILE.dot; repeatable")
	fl.BoolVar(&f.allowDOT, "allow-dot", false, "let clients start runs of DOT they send")
	fl.IntVar(&f.maxRequestKB, "max-request-kb", serve.DefaultMaxBodyBytes>>10, "the largest request body, in KiB")
	fl.IntVar(&f.maxRuns, "max-runs", serve.DefaultMaxRuns, "the runs running at once; more are refused (429)")
	fl.IntVar(&f.maxKeptRuns, "max-kept-runs", serve.DefaultMaxKeptRuns, "the runs kept (run directories under --runs, those found at start included); a start past it is refused (429)")
	fl.IntVar(&f.ringKB, "ring-kb", serve.DefaultRingBytes>>10, "the events a run keeps in memory for streams to resume from, in KiB")
	fl.IntVar(&f.keepEvents, "keep-events", serve.DefaultKeepEvents, "how many ended runs keep their events in memory")
	fl.IntVar(&f.maxStreams, "max-streams", serve.DefaultMaxSubscribers, "the event streams of one run open at once; more are refused (429)")
	fl.DurationVar(&f.writeTimeout, "write-timeout", serve.DefaultWriteTimeout, "the time a request's body has to arrive and a response (or each stream write) to be taken")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log debug details on standard error")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "the bound of stopping the runs and closing the plugins")
	return cmd
}

// servedPipelines reads --pipeline NAME=FILE flags.
func servedPipelines(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range flags {
		name, file, ok := strings.Cut(p, "=")
		if !ok || name == "" || file == "" {
			return nil, usageErrorf("--pipeline %s: give NAME=FILE.dot", safetext.Line(p, 200))
		}
		if _, dup := out[name]; dup {
			return nil, usageErrorf("--pipeline %s: the name %s is given twice", safetext.Line(p, 200), safetext.Line(name, 100))
		}
		if _, _, err := pipeline.ReadDOTFile(file); err != nil {
			return nil, &exitError{exitUsage, fmt.Errorf("--pipeline %s: %w", safetext.Line(name, 100), err)}
		}
		out[name] = file
	}
	return out, nil
}

func pipelineServe(ctx context.Context, f pipelineServeFlags, stderr io.Writer) error {
	if f.maxRequestKB <= 0 || f.maxRequestKB > config.MaxKB {
		return usageErrorf("--max-request-kb must be from 1 to %d, not %d", config.MaxKB, f.maxRequestKB)
	}
	if f.maxRuns <= 0 {
		return usageErrorf("--max-runs must be positive, not %d", f.maxRuns)
	}
	for _, l := range []struct {
		name string
		v    int
	}{{"--max-kept-runs", f.maxKeptRuns}, {"--keep-events", f.keepEvents}, {"--max-streams", f.maxStreams}} {
		if l.v <= 0 {
			return usageErrorf("%s must be positive, not %d", l.name, l.v)
		}
	}
	if f.ringKB <= 0 || f.ringKB > config.MaxKB {
		return usageErrorf("--ring-kb must be from 1 to %d, not %d", config.MaxKB, f.ringKB)
	}
	if f.writeTimeout <= 0 {
		return usageErrorf("--write-timeout must be positive, not %s", f.writeTimeout)
	}
	if f.shutdownTimeout <= 0 {
		return usageErrorf("--shutdown-timeout must be positive, not %s", f.shutdownTimeout)
	}
	loopback, err := httpguard.LoopbackAddr(f.http)
	if err != nil {
		return usageErrorf("--http %s: %v", f.http, err)
	}
	token := os.Getenv(f.tokenEnv)
	if !loopback && token == "" {
		return usageErrorf("--http %s is not a loopback address: set the bearer token clients must send in $%s (--token-env names another variable): %w", f.http, f.tokenEnv, serve.ErrNoToken)
	}
	pipelines, err := servedPipelines(f.pipelines)
	if err != nil {
		return err
	}
	if len(pipelines) == 0 && !f.allowDOT {
		return usageErrorf("nothing to serve: name pipelines with --pipeline NAME=FILE.dot (or allow inline DOT with --allow-dot)")
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg, rt, err := openRunner(ctx, f.config, logger, nil)
	if err != nil {
		return err
	}
	defer func() { closeRuntime(ctx, rt, f.shutdownTimeout, ctx.Err() != nil, stderr) }()
	runs := f.runs
	if runs == "" {
		if runs = cfg.Pipeline.RunsDir; runs == "" {
			runs = config.DefaultRunsDir
		}
	}
	srv, err := serve.New(serve.Options{
		RunsRoot: runs, Pipelines: pipelines, AllowDOT: f.allowDOT, Logger: logger,
		// A copy per run: each gets its own interviewer and event stream;
		// the engine behind them is shared.
		NewRunner:    func() (*pipeline.Runner, error) { r := *rt.Runner; return &r, nil },
		MaxBodyBytes: int64(f.maxRequestKB) << 10, MaxRuns: f.maxRuns, MaxKeptRuns: f.maxKeptRuns,
		RingBytes: f.ringKB << 10, KeepEvents: f.keepEvents, MaxSubscribers: f.maxStreams, WriteTimeout: f.writeTimeout,
		Loopback: loopback, Token: token, AllowedOrigins: f.allowOrigins,
	})
	if err != nil {
		return &exitError{exitUsage, err}
	}
	err = httpguard.Server{
		Handler: srv.Handler(), ShutdownTimeout: f.shutdownTimeout,
		Ready: func(addr net.Addr) {
			fmt.Fprintf(stderr, "morph: serving %s at http://%s/ (runs in %s)\n", plural(len(pipelines), "pipeline"), addr, filepath.Clean(runs))
		},
		// The runs checkpoint as canceled and the streams end; then the
		// listener, within --shutdown-timeout.
		Drain: func(ctx context.Context) {
			if err := srv.Shutdown(ctx); err != nil {
				fmt.Fprintln(stderr, "morph: "+err.Error())
			}
		},
	}.Serve(ctx, f.http)
	if err != nil {
		return &exitError{exitRunFailed, fmt.Errorf("--http %s: %w", f.http, err)}
	}
	return nil
}
