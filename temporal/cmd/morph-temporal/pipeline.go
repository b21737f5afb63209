package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/internal/durable"
	"github.com/morphhost/morph/pipeline"
	"github.com/morphhost/morph/temporal"
)

// pipelineFlags are what `pipeline run` and `pipeline resume` take.
type pipelineFlags struct {
	config, goal string
	maxTokens    int
	maxCost      float64
	maxWallTime  time.Duration
}

func (f *pipelineFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "morph.toml", "the config file")
	fl.IntVar(&f.maxTokens, "max-tokens", 0, "stop the run once it has used this many tokens (overrides [pipeline] max_tokens)")
	fl.Float64Var(&f.maxCost, "max-cost", 0, "stop the run once it has cost this many USD (overrides [pipeline] max_cost_usd)")
	fl.DurationVar(&f.maxWallTime, "max-wall-time", 0, "stop the run after this long (overrides [pipeline] max_wall_time)")
}

// limits are lim with the flags' budgets.
func (f *pipelineFlags) limits(lim pipeline.Limits) pipeline.Limits {
	if f.maxTokens > 0 {
		lim.MaxTokens = f.maxTokens
	}
	if f.maxCost > 0 {
		lim.MaxCostUSD = f.maxCost
	}
	if f.maxWallTime > 0 {
		lim.MaxWallTime = f.maxWallTime
	}
	return lim
}

func pipelineCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "pipeline", Short: "Run DOT pipelines on Temporal"}
	cmd.AddCommand(pipelineRunCmd(), pipelineResumeCmd())
	return cmd
}

func pipelineRunCmd() *cobra.Command {
	var f pipelineFlags
	cmd := &cobra.Command{
		Use:   "run FILE.dot",
		Short: "Start a pipeline on the [temporal] task queue and report it as JSON lines; answer its gates on standard input",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, c, err := dialConfig(cmd.Context(), f.config)
			if err != nil {
				return err
			}
			defer c.Close()
			src, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			file, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			opts := cfg.RunOptions()
			in := temporal.PipelineInput{Source: src, DotFile: file, Goal: f.goal, Limits: f.limits(cfg.Pipeline.Limits()),
				Options: temporal.RunOptionsOf(opts)}
			return startPipeline(cmd.Context(), c, cfg, in)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&f.goal, "goal", "", "the pipeline's goal, replacing its goal attribute")
	return cmd
}

func pipelineResumeCmd() *cobra.Command {
	var f pipelineFlags
	cmd := &cobra.Command{
		Use:   "resume WORKFLOW_ID",
		Short: "Follow a pipeline's workflow to its end, or start a new one from the checkpoint of one that stopped (canceled, out of budget)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, c, err := dialConfig(cmd.Context(), f.config)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, id := cmd.Context(), args[0]
			desc, err := c.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				return fmt.Errorf("workflow %s: %w", id, err)
			}
			if desc.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return followPipeline(ctx, c, cfg, c.GetWorkflow(ctx, id, ""))
			}
			var ended temporal.PipelineResult
			if err := c.GetWorkflow(ctx, id, "").Get(ctx, &ended); err != nil {
				return fmt.Errorf("workflow %s: %w", id, err)
			}
			if ended.Result == nil || ended.State == nil {
				return fmt.Errorf("workflow %s ended without a result: only a run that stopped (canceled, budget_exceeded) resumes; start a new one with pipeline run", id)
			}
			if ended.Result.State != pipeline.RunCanceled && ended.Result.State != pipeline.RunBudget {
				// As a local resume of a run that is over: nothing runs,
				// the result is written, and morph exits with its code.
				fmt.Fprintf(os.Stderr, "morph-temporal: workflow %s ended %s: nothing to resume (only a run that stopped, canceled or budget_exceeded, does); its summary follows\n", id, ended.Result.State)
				out := json.NewEncoder(os.Stdout)
				out.Encode(durable.PipelineLine{Workflow: id})
				return out.Encode(durable.PipelineLine{Result: ended.Result, Diagnostics: ended.Diagnostics, Error: ended.Error})
			}
			in, err := pipelineInput(ctx, c, cfg.Temporal, id)
			if err != nil {
				return err
			}
			in.Resume, in.Continued, in.Limits = ended.State, 0, f.limits(in.Limits)
			return startPipeline(ctx, c, cfg, in)
		},
	}
	f.register(cmd)
	return cmd
}

// dialConfig loads the config and connects to its [temporal] service.
func dialConfig(ctx context.Context, path string) (*config.Config, client.Client, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, nil, err
	}
	c, err := dial(ctx, cfg.Temporal, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return cfg, c, err
}

// pipelineInput is the input the last run of workflow id started with,
// read with the data converter of t's clients.
func pipelineInput(ctx context.Context, c client.Client, t config.Temporal, id string) (temporal.PipelineInput, error) {
	var in temporal.PipelineInput
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("workflow %s has no history", id)
	}
	ev, err := it.Next()
	if err != nil {
		return in, fmt.Errorf("workflow %s: %w", id, err)
	}
	start := ev.GetWorkflowExecutionStartedEventAttributes()
	if start == nil {
		return in, fmt.Errorf("workflow %s: its history does not open with its start", id)
	}
	dc := temporal.DataConverter(t)
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	if err := dc.FromPayloads(start.GetInput(), &in); err != nil {
		return in, fmt.Errorf("workflow %s is not a pipeline's: %w", id, err)
	}
	return in, nil
}

// startPipeline starts in's workflow on cfg's task queue and follows it.
func startPipeline(ctx context.Context, c client.Client, cfg *config.Config, in temporal.PipelineInput) error {
	in.MaxAnswerBytes = temporal.AnswerMaxBytes(cfg.Temporal)
	wr, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: cfg.Temporal.WithDefaults().TaskQueue}, temporal.PipelineWorkflow, in)
	if err != nil {
		return err
	}
	return followPipeline(ctx, c, cfg, wr)
}

// followPipeline writes wr's events and questions as they come, sends the
// answers read on standard input (AnswerGate: one larger than cfg's
// answer_max_kb is refused before it is sent, as the workflow would; the
// workflow's refusals are written on standard error), and writes its
// result.
func followPipeline(ctx context.Context, c client.Client, cfg *config.Config, wr client.WorkflowRun) error {
	var mu sync.Mutex // the lines, written by the poll and the answers' errors
	out := json.NewEncoder(os.Stdout)
	write := func(l durable.PipelineLine) {
		mu.Lock()
		defer mu.Unlock()
		out.Encode(l)
	}
	id := wr.GetID()
	write(durable.PipelineLine{Workflow: id})
	go func() {
		lines := bufio.NewScanner(os.Stdin)
		for lines.Scan() {
			var a durable.Answer
			if err := json.Unmarshal(lines.Bytes(), &a); err != nil {
				fmt.Fprintf(os.Stderr, "morph-temporal: an answer is a JSON object {\"Node\":...,\"Choice\":...}: %v\n", err)
				continue
			}
			if err := temporal.AnswerGate(ctx, c, id, temporal.AnswerMaxBytes(cfg.Temporal), a); err != nil {
				fmt.Fprintf(os.Stderr, "morph-temporal: %v\n", err)
			}
		}
	}()
	var res temporal.PipelineResult
	run, seen, asked := -1, 0, 0
	report := func() {
		var p temporal.PipelineProgress
		q, err := c.QueryWorkflow(ctx, id, "", temporal.QueryPipelineProgress)
		if err != nil || q.Get(&p) != nil {
			return // not yet started, or between runs
		}
		if p.Run != run {
			run, seen, asked = p.Run, 0, 0
		}
		for ; seen < len(p.Events); seen++ {
			write(durable.PipelineLine{Event: &p.Events[seen]})
		}
		for _, question := range p.Questions {
			if question.Seq > asked {
				write(durable.PipelineLine{Question: &question.Question})
				asked = question.Seq
			}
		}
	}
	// wr.Get follows the runs the workflow continues as.
	return follow(ctx, func(ctx context.Context) error { return temporal.WaitRun(ctx, wr, &res) }, report, func(err error) error {
		if err != nil {
			return fmt.Errorf("workflow %s: %w", id, err)
		}
		report() // the events since the last poll
		write(durable.PipelineLine{Result: res.Result, Diagnostics: res.Diagnostics, Error: res.Error})
		return nil
	}, "the pipeline goes on in Temporal as workflow "+id+" (morph pipeline resume --temporal "+id+")")
}
