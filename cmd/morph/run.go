package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/llm"
	"github.com/morphhost/morph/llm/openai"
	"github.com/morphhost/morph/telemetry"
)

// version is morph's version, set at build time with
// -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Exit codes.
const (
	exitOK        = 0
	exitRunFailed = 1 // the engine returned an error
	exitUsage     = 2 // bad flags or arguments, a bad config, no task
	// exitFallback: the run ended on the fallback final (engine.StopFallback),
	// not on an answer from the model; the result is still printed.
	exitFallback = 3
)

// maxTaskBytes bounds a task read from standard input.
const maxTaskBytes = 10 << 20

// defaultShutdownTimeout bounds the shutdown after a run (--shutdown-timeout):
// closing the plugins, whose morph_destroy hooks each have their own
// timeout, which may be minutes.
const defaultShutdownTimeout = 10 * time.Second

// shutdownGrace is how long the shutdown may take to return once its
// context is done, before morph stops waiting for it.
const shutdownGrace = time.Second

// exitError carries the exit code an error maps to.
type exitError struct {
	code int
	err  error
}

// Error returns the wrapped error's text.
func (e *exitError) Error() string { return e.err.Error() }

// Unwrap returns the wrapped error.
func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &exitError{exitUsage, fmt.Errorf(format, args...)}
}

// openFailed is the failure to open a config's runtime: a usage error when
// the config is at fault (config.ErrConfig), a failed run otherwise (a
// plugin that does not load, ...).
func openFailed(err error) error {
	if errors.Is(err, config.ErrConfig) {
		return &exitError{exitUsage, err}
	}
	return &exitError{exitRunFailed, err}
}

// defaultConfigFile is the --config of the commands that need a config.
const defaultConfigFile = "morph.toml"

// loadConfig is config.Load of path, its error a usage error; a missing
// default file says how to name another, since a new user who runs morph
// outside the directory of their config meets it first.
func loadConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		// Not a file the config names (a plugin's module): the config itself.
		if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) && path == defaultConfigFile {
			err = fmt.Errorf("%w: pass --config FILE, or run morph where your morph.toml is (morph plugin new writes one)", err)
		}
		return nil, &exitError{exitUsage, err}
	}
	return cfg, nil
}

// run is the whole CLI: it executes args and returns the exit code. Errors
// are printed on stderr as "morph: <error>", one line each (see errorLines).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitUsage // errors from cobra itself: unknown commands, bad arguments
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	for _, line := range errorLines(err) {
		fmt.Fprintf(stderr, "morph: %s\n", line)
	}
	return code
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "morph",
		Short:         "morph runs tool-using agents against an OpenAI-compatible model",
		SilenceErrors: true, // run prints them, once
		SilenceUsage:  true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErrorf("%v (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(newRunCmd(stdin, stdout, stderr), newVersionCmd(stdout), newPluginCmd(stdout, stderr), newPipelineCmd(stdin, stdout, stderr),
		newWorkerCmd(stderr), newMCPCmd(stdin, stdout, stderr), newToolsCmd(stdout, stderr))
	return root
}

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print morph's version and the Go version it was built with",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(stdout, "morph %s %s %s/%s\n", moduleVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}

// moduleVersion is version, or the module version when morph was built
// with "go install module@version" and no -ldflags.
func moduleVersion() string {
	if version == "dev" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
	}
	return version
}

// runFlags are the flags of "morph run".
type runFlags struct {
	config          string
	task            string
	model           string
	maxSteps        int
	verbose         bool
	showPrompt      bool
	shutdownTimeout time.Duration
	temporal        bool
	session         string
	offline         bool
	record          string // --record FILE (see record.go)
}

func newRunCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [task]",
		Short: "Run the agent on a task and print its final answer as JSON",
		Long: `Run the agent described by the config file on a task.

The task is the command's arguments (joined with spaces), or --task, or,
when neither is given, standard input. The final answer is printed as JSON
on standard output; one progress line per step goes to standard error.

After the run, the plugins are closed (their morph_destroy hooks run) within
--shutdown-timeout. SIGINT or SIGTERM cancels the run, or the shutdown when
the run is over; a second signal ends morph at once.

Exit codes: 0 a final answer, 1 the run failed, 2 a usage or configuration
error, 3 the run ended on the fallback final (stop_reason "fallback": the
model gave no usable answer, even when asked to conclude); the result JSON
is printed as for 0.`,
		Example: `  morph run --config morph.toml "What is 17.5% of 2,340 plus the square root of 1,764?"
  echo "What is 2 + 2?" | morph run`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("max-steps") && f.maxSteps < 1 {
				return usageErrorf("--max-steps must be at least 1, got %d", f.maxSteps)
			}
			if f.shutdownTimeout <= 0 {
				return usageErrorf("--shutdown-timeout must be positive, not %s", f.shutdownTimeout)
			}
			if f.offline && f.temporal {
				return usageErrorf("--offline is for a local run: on Temporal the workers load the plugins; set [oci] offline in their config")
			}
			if f.record != "" && f.temporal {
				return recordOnTemporal()
			}
			if f.session != "" && !f.temporal {
				return usageErrorf("--session needs --temporal: a local run is a session of one turn")
			}
			if f.session != "" && !sessionID.MatchString(f.session) {
				return usageErrorf("--session %q: want letters, digits, '.', '_', ':' or '-' (at most 200)", f.session)
			}
			task, err := readTask(args, f.task, cmd.Flags().Changed("task"), stdin)
			if err != nil {
				return err
			}
			if f.temporal {
				return runTemporal(cmd.Context(), f, task, stdout, stderr)
			}
			return runAgent(cmd.Context(), f, task, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", defaultConfigFile, "the config file")
	fl.StringVar(&f.task, "task", "", "the task (instead of arguments or standard input)")
	fl.StringVar(&f.model, "model", "", "the model, overriding llm.model")
	fl.IntVar(&f.maxSteps, "max-steps", 0, "the step limit, overriding agent.max_steps")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log debug details on standard error")
	fl.BoolVar(&f.showPrompt, "show-prompt", false, "include the run's system prompt in the JSON result")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "the bound of closing the plugins after the run")
	fl.BoolVar(&f.temporal, "temporal", false, "run the turn on Temporal ([temporal] in the config): durable, on the workers of its task queue (morph worker)")
	fl.BoolVar(&f.offline, "offline", false, "reach no OCI registry: oci:// plugins run from the cache, at morph.lock's digests ([oci] offline)")
	fl.StringVar(&f.session, "session", "", "with --temporal: run the turn in this session, which keeps its history and middleware quarantines between runs")
	fl.StringVar(&f.record, "record", "", recordFlagUsage)
	return cmd
}

// readTask picks the task from the arguments, the --task flag or stdin.
func readTask(args []string, flagTask string, flagSet bool, stdin io.Reader) (string, error) {
	var task string
	switch {
	case len(args) > 0 && flagSet:
		return "", usageErrorf("give the task as arguments or with --task, not both")
	case len(args) > 0:
		task = strings.Join(args, " ")
	case flagSet:
		task = flagTask
	case stdin != nil && !isTerminal(stdin):
		b, err := io.ReadAll(io.LimitReader(stdin, maxTaskBytes+1))
		if err != nil {
			return "", usageErrorf("reading the task from standard input: %v", err)
		}
		if len(b) > maxTaskBytes {
			return "", usageErrorf("the task on standard input is longer than %d bytes", maxTaskBytes)
		}
		task = string(b)
	}
	task = strings.TrimSpace(task)
	if task == "" {
		return "", usageErrorf("no task: give it as an argument, with --task, or on standard input (see 'morph run --help')")
	}
	return task, nil
}

// isTerminal reports whether r is an interactive terminal, which is not
// read for a task: the user forgot it, and waiting would look like a hang.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func runAgent(ctx context.Context, f runFlags, task string, stdout, stderr io.Writer) error {
	ctx = telemetry.FromEnvironment(ctx) // a run started by a traced process (TRACEPARENT) joins its trace
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	cfg, err := loadConfig(f.config)
	if err != nil {
		return err
	}
	if f.model != "" {
		cfg.LLM.Model = f.model
	}
	if f.maxSteps > 0 {
		cfg.Agent.MaxSteps = f.maxSteps
	}
	if f.offline {
		cfg.OCI.Offline = true
	}
	// On a terminal an [[mcp_servers]] entry's OAuth authorization URL is
	// printed (escaped) for the user to open, rather than the start failing.
	if w, ok := stderr.(*os.File); ok && isTerminal(w) {
		cfg.AuthPrompt = stderr
	}

	// The engine logs its warnings, which the progress lines already show;
	// without -v it only gets to log errors.
	// The model client's retry waits are not events: their warnings
	// (openai.RetryMessage) are logged at the default level too.
	engineLogger := logger
	if !f.verbose {
		engineLogger = slog.New(&errorsAndRetries{slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})})
	}
	stopRecording, err := startRecording(cfg, f.record, stderr)
	if err != nil {
		return err
	}
	defer stopRecording() // after closeRuntime: the plugins' last calls are recorded
	rt, err := cfg.Open(ctx, engineLogger, engine.WithEventHandler(progress(stderr, f.verbose)))
	if err != nil {
		return openFailed(err)
	}
	// A signal that ended the run does not end the shutdown; one that comes
	// once the run is over, the result printed or not, does.
	interrupted := false
	defer func() { closeRuntime(ctx, rt, f.shutdownTimeout, interrupted, stderr) }()
	eng := rt.Engine
	st := eng.Status()
	fmt.Fprintln(stderr, "morph: "+oneLine(st.Summary(), 0))
	for _, w := range st.Warnings { // a plugin tool taking a built-in's name, a hook replaced, ...
		fmt.Fprintln(stderr, "morph: warning: "+oneLine(w, 500))
	}

	opts := cfg.RunOptions()
	logger.DebugContext(ctx, "starting run", "config", cfg.File, "provider", cfg.LLM.Provider,
		"model", opts.Model, "max_steps", opts.WithDefaults().MaxSteps, "tools", strings.Join(eng.Registry().Names(), ","), "task", task)
	final, rc, err := eng.Run(ctx, task, opts)
	interrupted = ctx.Err() != nil
	if err != nil {
		return &exitError{exitRunFailed, fmt.Errorf("run failed at step %d (%s): %w", len(rc.Steps)+1, rc.StopReason, err)}
	}
	if err := writeResult(stdout, final, rc, f.showPrompt); err != nil {
		return err
	}
	if rc.StopReason == engine.StopFallback {
		return &exitError{exitFallback, errors.New("the run ended on the fallback final, not on an answer from the model (see the warning above)")}
	}
	return nil
}

// errorsAndRetries passes on errors, and the model client's warning before
// each retry wait (openai.RetryMessage), which says how long the run will
// wait and why, and the once-per-model warning of a model without a price
// (llm.UnpricedMessage); it drops the other warnings, which the progress
// lines show.
type errorsAndRetries struct{ slog.Handler }

// Handle drops records below slog.LevelError except retry warnings,
// unpriced-model warnings and those of an oci:// plugin run at its locked
// digest unchecked.
func (h *errorsAndRetries) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelError && r.Message != openai.RetryMessage && r.Message != llm.UnpricedMessage && r.Message != config.OCILockedDigest {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the filter on the derived handler.
func (h *errorsAndRetries) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &errorsAndRetries{h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the filter on the derived handler.
func (h *errorsAndRetries) WithGroup(name string) slog.Handler {
	return &errorsAndRetries{h.Handler.WithGroup(name)}
}

// closeRuntime closes rt, which runs the plugins' morph_destroy hooks,
// within limit. A signal (ctx is canceled) cuts it short, unless the
// signal interrupted what came before: then the plugins still get the
// limit to clean up, and a second signal ends the process (see main).
// The close is waited for shutdownGrace at most past the limit or the
// signal, in case something in it does not heed its context; what it cut
// short is one warning, not a failure of the run; it blames the plugins'
// morph_destroy hooks only where rt has plugins (a runtime that tells,
// config.Runtime, with none: what was cut is the MCP servers or the
// telemetry flush, whose own errors follow it).
func closeRuntime(ctx context.Context, rt interface{ Close(context.Context) error }, limit time.Duration, interrupted bool, stderr io.Writer) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	defer cancel()
	if interrupted {
		fmt.Fprintf(stderr, "morph: interrupted: closing the plugins (at most %s; interrupt again to exit now)\n", limit)
	} else {
		defer context.AfterFunc(ctx, cancel)() // at once when the signal came already
	}
	closed := make(chan error, 1)
	go func() { closed <- rt.Close(cctx) }()
	// cut is why the close was cut short, read when that happened: a
	// deadline passing after the close returned cut nothing.
	var err, cut error
	abandoned := false
	select {
	case err = <-closed:
	case <-cctx.Done():
		cut = cctx.Err()
		select {
		case err = <-closed:
		case <-time.After(shutdownGrace):
			abandoned = true
		}
	}
	what := "the plugins' morph_destroy hooks were"
	if p, ok := rt.(interface{ Plugins() []engine.PluginStatus }); ok && len(p.Plugins()) == 0 {
		what = "closing (no plugins: the MCP servers, the telemetry flush) was"
	}
	var warning string
	switch {
	case errors.Is(cut, context.DeadlineExceeded):
		warning = fmt.Sprintf("shutdown took longer than %s (--shutdown-timeout): %s cut short", limit, what)
	case cut != nil: // canceled: a signal came during the shutdown
		warning = fmt.Sprintf("shutdown interrupted: %s cut short", what)
	}
	if abandoned {
		warning += fmt.Sprintf(", and did not return %s later; exiting anyway", shutdownGrace)
	}
	if warning != "" {
		fmt.Fprintf(stderr, "morph: warning: %s\n", warning)
	}
	if err != nil {
		for _, line := range errorLines(err) {
			fmt.Fprintf(stderr, "morph: warning: closing: %s\n", line)
		}
	}
}

// maxReplyLine caps the reply -v prints under a step whose reply did not
// parse; the result JSON's steps have it to the engine's observation limit.
const maxReplyLine = 1 << 10

// progress returns the event handler that prints one line per step and
// every warning on w; verbose (-v) adds, under a step whose reply did not
// parse, the reply (escaped by the engine, and again here: it is the
// model's text).
func progress(w io.Writer, verbose bool) func(engine.Event) {
	return func(ev engine.Event) {
		switch ev.Kind {
		case engine.EventStep:
			action := ev.Action
			switch action {
			case "plan", "final":
			case "parse_error":
				action = "parse error"
			default:
				action = "tool " + label(action) // the model's choice: any string
			}
			line := fmt.Sprintf("step %d  %s  tokens %d (+%d)  cost %s  %.2fs",
				ev.Step, action, ev.Total.Total(), ev.Usage.Total(), costText(ev.Total.Cost, ev.Total.CostUnknown), ev.Elapsed.Seconds())
			if ev.Err != nil {
				line += "  error: " + oneLine(ev.Err.Error(), 200)
			}
			if verbose && ev.Reply != "" {
				line += "\n  reply: " + safetext.Line(ev.Reply, maxReplyLine)
			}
			fmt.Fprintln(w, line)
		case engine.EventWarning:
			msg := ev.Message
			if ev.Err != nil {
				msg += ": " + ev.Err.Error()
			}
			fmt.Fprintln(w, "morph: warning: "+oneLine(msg, 500))
		}
	}
}

// costText is a cost for a progress line: "$X", or, when some call was of
// a model without a price (llm.Usage.CostUnknown), "unknown" or
// "$X + unknown", so that an unpriced run never reads as a free one.
func costText(usd float64, unknown bool) string {
	switch {
	case !unknown:
		return fmt.Sprintf("$%.6f", usd)
	case usd == 0:
		return "unknown"
	default:
		return fmt.Sprintf("$%.6f + unknown", usd)
	}
}

// result is what "morph run" prints.
type result struct {
	Output     any             `json:"output"`
	Thought    string          `json:"thought"`
	Final      json.RawMessage `json:"final"` // the final payload as the model sent it, domain fields included
	Plan       *engine.Plan    `json:"plan"`
	StopReason string          `json:"stop_reason"`
	// Parameters are the model parameters sent with every request of the run.
	Parameters   map[string]any `json:"parameters,omitempty"`
	SystemPrompt string         `json:"system_prompt,omitempty"` // with --show-prompt
	Metrics      engine.Metrics `json:"metrics"`                 // its JSON: engine.Metrics.MarshalJSON
	// Steps are the run's steps: each reply's action, the tool's
	// observation or error (cut to the engine's observation limit), usage
	// and duration; a reply that did not parse is in its step, escaped
	// and capped.
	Steps []engine.Step `json:"steps"`
}

func writeResult(w io.Writer, final *engine.Final, rc *engine.Context, showPrompt bool) error {
	raw := rc.RawFinalAnswer
	if !json.Valid(raw) {
		raw, _ = json.Marshal(final)
	}
	res := result{
		Output:     final.Output,
		Thought:    final.Thought,
		Final:      raw,
		Plan:       final.Plan,
		StopReason: rc.StopReason,
		Parameters: rc.Parameters,
		Metrics:    rc.Metrics,
		Steps:      rc.Steps,
	}
	if res.Steps == nil {
		res.Steps = []engine.Step{}
	}
	if showPrompt {
		res.SystemPrompt = rc.SystemPrompt
	}
	if err := writeJSON(w, res); err != nil {
		return &exitError{exitRunFailed, fmt.Errorf("writing the result: %w", err)}
	}
	return nil
}
