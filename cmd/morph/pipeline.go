package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/pipeline"
)

// Exit codes of "morph pipeline run" beyond the common ones.
const (
	// exitStopped: the run stopped before its end, interrupted or out of
	// budget, with a checkpoint: resume it with --resume.
	exitStopped = 3
)

func newPipelineCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Validate, run and render DOT pipelines of agent stages",
		Long: `A pipeline is a Graphviz digraph whose nodes are stages (agents, human
gates, tools, fan-out and fan-in) and whose edges route on each stage's
outcome. See the README's "Pipelines" section for the attributes.`,
	}
	cmd.AddCommand(newPipelineValidateCmd(stdout, stderr), newPipelineRunCmd(stdin, stdout, stderr), newPipelineResumeCmd(stdin, stdout, stderr),
		newPipelineRenderCmd(stdout, stderr))
	cmd.AddCommand(newPipelineServeCmd(stderr))
	return cmd
}

// readPipelineFile reads and parses a DOT file; its errors are usage
// errors, naming the file and line.
func readPipelineFile(path string) ([]byte, *pipeline.Graph, error) {
	src, g, err := pipeline.ReadDOTFile(path)
	if err != nil {
		return nil, nil, &exitError{exitUsage, err}
	}
	return src, g, nil
}

func newPipelineValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		cfgPath string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "validate FILE.dot",
		Short: "Check a pipeline and print its diagnostics",
		Long: `Parse the pipeline, apply its transforms ($goal, the model stylesheet) and
check it. Each diagnostic names its rule, the node or edge, the line and a
fix. Without --config only the graph is checked; with it, what "morph
pipeline run" checks before it runs: the config's tools, its plugins' stage
handlers (type wasm:<plugin>) and [pipeline] allow_shell.

Exit codes: 0 no errors (warnings may be printed), 2 an ERROR or a file
that cannot be read or parsed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, g, err := readPipelineFile(args[0])
			if err != nil {
				return err
			}
			// Without a config, the graph alone; with one, what "run" checks:
			// the config's tools, plugins' stage handlers and allow_shell.
			var diags []pipeline.Diagnostic
			scope := " (graph only: pass --config to check tools, plugins and allow_shell)"
			if cfgPath != "" {
				logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
				_, p, oerr := openRunner(cmd.Context(), cfgPath, logger, nil)
				if oerr != nil {
					return oerr
				}
				defer closeRuntime(cmd.Context(), p, defaultShutdownTimeout, false, stderr)
				diags, err = p.Runner.Prepare(g)
				scope = ""
			} else {
				diags, err = pipeline.ValidateGraph(g)
			}
			var ve *pipeline.ValidationError
			if err != nil && !errors.As(err, &ve) {
				return &exitError{exitUsage, err}
			}
			if asJSON {
				if diags == nil {
					diags = []pipeline.Diagnostic{}
				}
				if err := writeJSON(stdout, diags); err != nil {
					return err
				}
			} else {
				for _, d := range diags {
					fmt.Fprintln(stdout, diagnosticLine(g, d))
				}
				errs, warns := countDiagnostics(diags)
				fmt.Fprintf(stderr, "%s: %d error(s), %d warning(s)%s\n", args[0], errs, warns, scope)
			}
			if pipeline.HasErrors(diags) {
				return &exitError{exitUsage, fmt.Errorf("%s does not validate", args[0])}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "a morph.toml whose [pipeline] and [[plugins]] apply")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the diagnostics as a JSON array")
	return cmd
}

func countDiagnostics(ds []pipeline.Diagnostic) (errs, warns int) {
	for _, d := range ds {
		switch d.Severity {
		case pipeline.SeverityError:
			errs++
		case pipeline.SeverityWarning:
			warns++
		}
	}
	return errs, warns
}

// diagnosticLine is "file:line: severity rule: message (node X) fix: ...",
// escaped: the DOT file wrote most of it.
func diagnosticLine(g *pipeline.Graph, d pipeline.Diagnostic) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %s: %s", g.Where(d.Line), d.Severity, d.Rule, d.Message)
	switch {
	case d.NodeID != "":
		fmt.Fprintf(&b, " [node %s]", d.NodeID)
	case d.Edge != "":
		fmt.Fprintf(&b, " [edge %s]", d.Edge)
	}
	if d.Fix != "" {
		b.WriteString(" fix: " + d.Fix)
	}
	return oneLine(b.String(), 2000)
}

type pipelineRunFlags struct {
	config, goal, runDir, resume  string
	yes, force, verbose, temporal bool
	maxTokens                     int
	maxCost                       float64
	maxWallTime                   time.Duration
	shutdownTimeout               time.Duration
	record                        string // --record FILE (see record.go)
}

func newPipelineRunCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f pipelineRunFlags
	cmd := &cobra.Command{
		Use:   "run FILE.dot",
		Short: "Run a pipeline: one progress line per stage, a JSON summary at the end",
		Long: `Run the pipeline in FILE.dot with the model, tools and plugins of the config.

The files of each stage that did work (prompt.md, response.md, a tool's
output, and its status.json), the artifacts, a journal line and a checkpoint
after every node go to the run directory (--run-dir, else a new
one under [pipeline] runs_dir). --resume RUN_DIR continues a run that was
interrupted (Ctrl-C saves a checkpoint) or ran out of budget, from the node
its checkpoint names; FILE.dot may then be left out (the run's copy,
pipeline.dot, is used). A stage that was running when the run stopped runs
again; the temporary files a killed run left are removed. A run that is
over runs nothing: its summary prints again, with the exit code it ended
with.

Human gates ask on the terminal; --yes approves each with its default
choice, else its first.

--temporal runs it on Temporal ([temporal] in the config; see "morph
worker"): durable, every model call, tool call and hook call an activity
of the workers, the gates answered from here (a workflow update, refused
with the reason when the workflow does not take it); the progress and
the summary print as here. Interrupted, the run goes on in Temporal:
"morph pipeline resume --temporal WORKFLOW_ID" follows it again.

Exit codes: 0 the pipeline succeeded, 1 it failed, 2 a usage error, a bad
config or a pipeline that does not validate, 3 it stopped (interrupted, or
a budget spent) and can be resumed.`,
		Example: `  morph pipeline run --config morph.toml examples/pipelines/plan-implement-verify.dot
  morph pipeline run --resume runs/plan_implement_verify-20261124T101500.123Z`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && f.resume == "" {
				return usageErrorf("give the pipeline's DOT file, or --resume RUN_DIR")
			}
			if f.runDir != "" && f.resume != "" {
				return usageErrorf("--run-dir and --resume exclude each other: a resumed run keeps its directory")
			}
			if f.maxTokens < 0 || f.maxCost < 0 || f.maxWallTime < 0 {
				return usageErrorf("budgets must not be negative")
			}
			file := ""
			if len(args) == 1 {
				file = args[0]
			}
			if f.temporal {
				if file == "" || f.resume != "" || f.runDir != "" {
					return usageErrorf("--temporal runs FILE.dot, in no run directory: resume a durable run with morph pipeline resume --temporal WORKFLOW_ID")
				}
				return runPipelineTemporal(cmd.Context(), f, file, stdin, stdout, stderr)
			}
			return runPipeline(cmd.Context(), f, file, stdin, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	pipelineFlags(fl, &f)
	fl.StringVar(&f.goal, "goal", "", "the pipeline's goal, replacing its goal attribute")
	fl.StringVar(&f.runDir, "run-dir", "", "the run directory (default: a new one under [pipeline] runs_dir)")
	fl.StringVar(&f.resume, "resume", "", "continue the run in this run directory")
	fl.BoolVar(&f.temporal, "temporal", false, "run the pipeline on Temporal ([temporal] in the config): durable, on the workers of its task queue (morph worker)")
	return cmd
}

func newPipelineResumeCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f pipelineRunFlags
	cmd := &cobra.Command{
		Use:   "resume RUN_DIR | --temporal WORKFLOW_ID",
		Short: "Continue a pipeline run that stopped (morph pipeline run --resume), or a durable one",
		Long: `Continue the run in RUN_DIR from the node its checkpoint names, as
"morph pipeline run --resume RUN_DIR" does.

With --temporal, WORKFLOW_ID is a durable run's workflow (morph pipeline run
--temporal prints it): a running one is followed to its end, its gates
asked here; one that stopped (interrupted, a budget spent) goes on in a new
workflow from its checkpoint, with the budgets given here.

Exit codes: as morph pipeline run.`,
		Example: `  morph pipeline resume runs/plan_implement_verify-20261124T101500.123Z
  morph pipeline resume --temporal --config morph.toml 4f1c2a9e-...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.resume = args[0]
			if f.temporal {
				return runPipelineTemporal(cmd.Context(), f, "", stdin, stdout, stderr)
			}
			return runPipeline(cmd.Context(), f, "", stdin, stdout, stderr)
		},
	}
	pipelineFlags(cmd.Flags(), &f)
	cmd.Flags().BoolVar(&f.temporal, "temporal", false, "WORKFLOW_ID is a durable run's workflow on Temporal ([temporal] in the config)")
	return cmd
}

// pipelineFlags registers the flags run and resume share.
func pipelineFlags(fl *pflag.FlagSet, f *pipelineRunFlags) {
	fl.StringVar(&f.config, "config", defaultConfigFile, "the config file")
	fl.BoolVarP(&f.yes, "yes", "y", false, "approve every human gate with its default (else first) choice")
	fl.BoolVar(&f.force, "force", false, "resume even though the DOT source differs from the run's")
	fl.IntVar(&f.maxTokens, "max-tokens", 0, "stop the run once it has used this many tokens (overrides [pipeline] max_tokens)")
	fl.Float64Var(&f.maxCost, "max-cost", 0, "stop the run once it has cost this many USD (overrides [pipeline] max_cost_usd)")
	fl.DurationVar(&f.maxWallTime, "max-wall-time", 0, "stop the run after this long (overrides [pipeline] max_wall_time)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log debug details and every agent step on standard error")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "the bound of closing the plugins after the run")
	fl.StringVar(&f.record, "record", "", recordFlagUsage)
}

// openRunner loads the config and opens its pipeline runtime
// (config.OpenPipeline), telling a bad config (exitUsage) from a failure to
// open it; prepare, if not nil, sees the config first.
func openRunner(ctx context.Context, path string, logger *slog.Logger, prepare func(*config.Config) error) (*config.Config, *config.PipelineRuntime, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	if prepare != nil {
		if err := prepare(cfg); err != nil {
			return nil, nil, err
		}
	}
	p, err := cfg.OpenPipeline(ctx, logger)
	if err != nil {
		return nil, nil, openFailed(err)
	}
	return cfg, p, nil
}

func runPipeline(ctx context.Context, f pipelineRunFlags, file string, stdin io.Reader, stdout, stderr io.Writer) error {
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if file == "" {
		file = filepath.Join(f.resume, pipeline.SourceFile)
	}
	src, g, err := readPipelineFile(file)
	if err != nil {
		return err
	}
	stopRecording := func() {}
	defer func() { stopRecording() }() // after closeRuntime: the plugins' last calls are recorded
	cfg, p, err := openRunner(ctx, f.config, logger, func(c *config.Config) (err error) {
		stopRecording, err = startRecording(c, f.record, stderr)
		return err
	})
	if err != nil {
		return err
	}
	interrupted := false
	defer func() { closeRuntime(ctx, p, f.shutdownTimeout, interrupted, stderr) }()
	r := p.Runner

	lim := r.Limits
	if f.maxTokens > 0 {
		lim.MaxTokens = f.maxTokens
	}
	if f.maxCost > 0 {
		lim.MaxCostUSD = f.maxCost
	}
	if f.maxWallTime > 0 {
		lim.MaxWallTime = f.maxWallTime
	}
	if w := cfg.UnpricedBudget(lim.MaxCostUSD); w != "" {
		logger.Warn(w)
	}
	var iv pipeline.Interviewer = &pipeline.ConsoleInterviewer{In: stdin, Out: stderr}
	if f.yes {
		iv = pipeline.AutoApprove{}
	}
	r.Interviewer, r.Limits, r.OnEvent = iv, lim, stageProgress(stderr, f.verbose)

	runCfg := pipeline.RunConfig{Goal: f.goal, Source: src, DotFile: file, Force: f.force}
	var res *pipeline.Result
	if f.resume != "" {
		runCfg.RunDir = f.resume
		res, err = r.Resume(ctx, g, runCfg)
		if err == nil && res.Over {
			fmt.Fprintf(stderr, "morph: the run in %s is over (%s): nothing ran; its summary as it ended follows\n", safetext.Escape(runCfg.RunDir), res.State)
		}
	} else {
		runCfg.RunDir = f.runDir
		if runCfg.RunDir == "" {
			runCfg.RunDir = newRunDir(cfg.Pipeline.RunsDir, g, file)
		}
		fmt.Fprintf(stderr, "morph: run directory %s\n", runCfg.RunDir)
		res, err = r.Run(ctx, g, runCfg)
	}
	interrupted = ctx.Err() != nil
	if err != nil {
		var ve *pipeline.ValidationError
		if errors.As(err, &ve) {
			printErrors(stderr, g, ve.Diagnostics)
			return &exitError{exitUsage, fmt.Errorf("%s does not validate: fix the errors above (morph pipeline validate %s)", file, file)}
		}
		if errors.Is(err, pipeline.ErrRunDir) {
			return &exitError{exitUsage, err}
		}
		return &exitError{exitRunFailed, err}
	}
	return finishPipeline(stdout, res, fmt.Sprintf("morph pipeline run --config %s --resume %s", f.config, res.RunDir))
}

// printErrors prints the ERROR diagnostics of g.
func printErrors(w io.Writer, g *pipeline.Graph, diags []pipeline.Diagnostic) {
	for _, d := range diags {
		if d.Severity == pipeline.SeverityError {
			fmt.Fprintln(w, diagnosticLine(g, d))
		}
	}
}

// finishPipeline prints res's summary and returns the exit its state
// calls for; resume is the command that resumes a stopped run.
func finishPipeline(stdout io.Writer, res *pipeline.Result, resume string) error {
	if err := writeJSON(stdout, summarize(res)); err != nil {
		return &exitError{exitRunFailed, fmt.Errorf("writing the summary: %w", err)}
	}
	switch res.State {
	case pipeline.RunSuccess:
		return nil
	case pipeline.RunCanceled:
		return &exitError{exitStopped, fmt.Errorf("%s; resume with: %s", res.FailureReason, resume)}
	case pipeline.RunBudget:
		return &exitError{exitStopped, fmt.Errorf("%s; raise that budget (its flag, or [pipeline] in morph.toml) and resume with: %s", res.FailureReason, resume)}
	}
	return &exitError{exitRunFailed, fmt.Errorf("pipeline failed at %s: %s", res.FailedNode, res.FailureReason)}
}

// newRunDir is a fresh run directory under dir: the pipeline's name and
// the time.
func newRunDir(dir string, g *pipeline.Graph, file string) string {
	if dir == "" {
		dir = config.DefaultRunsDir
	}
	return filepath.Join(dir, pipeline.RunDirName(g, file)+"-"+time.Now().UTC().Format("20060102T150405.000Z"))
}

// stageProgress prints one line per stage end, retry, human gate and
// failure on w; with verbose, every agent step too.
func stageProgress(w io.Writer, verbose bool) func(pipeline.Event) {
	var mu sync.Mutex // parallel branches report at once
	return func(ev pipeline.Event) {
		var line string
		who := label(ev.NodeID)
		if ev.Branch != "" {
			who += " (branch " + label(ev.Branch) + ")"
		}
		switch ev.Kind {
		case pipeline.EventStageCompleted, pipeline.EventStageFailed:
			line = fmt.Sprintf("stage %s  %s  %.2fs  tokens %d  cost %s", who, ev.Status, ev.Duration.Seconds(), ev.Usage.TotalTokens, costText(ev.Usage.CostUSD, ev.Usage.CostUnknown))
			if ev.Message != "" {
				line += "  " + ev.Message
			}
		case pipeline.EventStageRetrying:
			line = fmt.Sprintf("stage %s  retry (attempt %d)  %s", who, ev.Attempt, ev.Message)
		case pipeline.EventInterviewTimeout:
			line = fmt.Sprintf("stage %s  %s", who, ev.Message)
		case pipeline.EventPipelineCompleted:
			line = fmt.Sprintf("pipeline completed  %.2fs  tokens %d  cost %s", ev.Duration.Seconds(), ev.Usage.TotalTokens, costText(ev.Usage.CostUSD, ev.Usage.CostUnknown))
		case pipeline.EventWarning:
			line = "morph: warning: " + ev.Message
		case pipeline.EventAgent:
			if !verbose || ev.Agent == nil || ev.Agent.Kind != engine.EventStep {
				return
			}
			line = fmt.Sprintf("  %s step %d  %s", who, ev.Agent.Step, label(ev.Agent.Action))
		default:
			return
		}
		mu.Lock()
		fmt.Fprintln(w, oneLine(line, 1000))
		mu.Unlock()
	}
}

// pipelineSummary is what "morph pipeline run" prints.
type pipelineSummary struct {
	Status        string                 `json:"status"`
	RunID         string                 `json:"run_id"`
	RunDir        string                 `json:"run_dir"`
	FailedNode    string                 `json:"failed_node,omitempty"`
	FailureReason string                 `json:"failure_reason,omitempty"`
	NextNode      string                 `json:"next_node,omitempty"`
	Path          []string               `json:"path"`
	Nodes         map[string]nodeSummary `json:"nodes"`
	InputTokens   int                    `json:"input_tokens"`
	OutputTokens  int                    `json:"output_tokens"`
	TotalTokens   int                    `json:"total_tokens"`
	CostUSD       float64                `json:"cost_usd"`
	// CostUnknown: some call was of a model without a price, counted as $0.
	CostUnknown bool  `json:"cost_unknown,omitempty"`
	DurationMS  int64 `json:"duration_ms"`
}

type nodeSummary struct {
	Status        pipeline.StageStatus `json:"status"`
	Visits        int                  `json:"visits"`
	Attempts      int                  `json:"attempts"`
	FailureReason string               `json:"failure_reason,omitempty"`
	DurationMS    int64                `json:"duration_ms"`
	TotalTokens   int                  `json:"total_tokens"`
	CostUSD       float64              `json:"cost_usd"`
}

func summarize(res *pipeline.Result) pipelineSummary {
	s := pipelineSummary{Status: res.State, RunID: res.RunID, RunDir: res.RunDir, FailedNode: res.FailedNode, FailureReason: res.FailureReason,
		NextNode: res.NextNode, Path: res.Path, Nodes: map[string]nodeSummary{},
		InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens, TotalTokens: res.Usage.TotalTokens,
		CostUSD: roundCost(res.Usage.CostUSD), CostUnknown: res.Usage.CostUnknown, DurationMS: res.Duration.Milliseconds()}
	if s.Path == nil {
		s.Path = []string{}
	}
	ids := make([]string, 0, len(res.Nodes))
	for id := range res.Nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		n := res.Nodes[id]
		s.Nodes[id] = nodeSummary{Status: n.Status, Visits: n.Visits, Attempts: n.Attempts, FailureReason: n.FailureReason,
			DurationMS: n.Duration.Milliseconds(), TotalTokens: n.Usage.TotalTokens, CostUSD: roundCost(n.Usage.CostUSD)}
	}
	return s
}

// roundCost drops the noise summing float costs leaves below a nano-dollar.
func roundCost(c float64) float64 { return math.Round(c*1e9) / 1e9 }
