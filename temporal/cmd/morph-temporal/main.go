// Command morph-temporal runs morph's sessions on Temporal: `worker` serves
// a task queue, `run` starts a turn there and reports it as it goes. The
// morph command runs it for `morph worker` and `morph run --temporal`: it
// is a program of its own so that morph itself does not link the Temporal
// SDK.
//
// `run` writes one JSON object a line on standard output (internal/durable's
// Line): {"Progress": ...} for each step as the workflow takes it, then
// {"Result": ...}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/internal/durable"
	"github.com/morphhost/morph/temporal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{Use: "morph-temporal", Short: "Run morph sessions on Temporal", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(workerCmd(), runCmd())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "morph-temporal:", err)
		os.Exit(2)
	}
}

// dial connects to cfg's [temporal] service, with its payload store
// (payload_dir) when it has one.
func dial(t config.Temporal, logger *slog.Logger) (client.Client, error) {
	t = t.WithDefaults()
	c, err := client.Dial(client.Options{HostPort: t.HostPort, Namespace: t.Namespace, Logger: log.NewStructuredLogger(logger),
		DataConverter: temporal.DataConverter(t)})
	if err != nil {
		return nil, fmt.Errorf("connecting to Temporal at %s (namespace %s; [temporal] host_port, namespace): %w", t.HostPort, t.Namespace, err)
	}
	return c, nil
}

func workerCmd() *cobra.Command {
	var cfgPath string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Serve the [temporal] task queue: run turns' model calls, tools and hooks with the config's model and plugins",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			if timeout > 0 {
				temporal.ActivityTimeout = timeout
			}
			a, err := temporal.NewActivities(cmd.Context(), cfg, logger)
			if err != nil {
				return err
			}
			defer a.Close(context.WithoutCancel(cmd.Context()))
			c, err := dial(cfg.Temporal, logger)
			if err != nil {
				return err
			}
			defer c.Close()
			w := temporal.NewWorker(c, cfg.Temporal.WithDefaults().TaskQueue, a)
			if err := w.Start(); err != nil {
				return err
			}
			logger.Info("morph worker started", "task_queue", cfg.Temporal.WithDefaults().TaskQueue, "pid", os.Getpid())
			<-cmd.Context().Done()
			w.Stop()
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "morph.toml", "the config file")
	cmd.Flags().DurationVar(&timeout, "activity-timeout", 0, "how long an activity may take before another worker gets it (all workers must agree; default 10m)")
	return cmd
}

func runCmd() *cobra.Command {
	var cfgPath, session, model string
	var maxSteps int
	cmd := &cobra.Command{
		Use:   "run TASK",
		Short: "Start a turn on the [temporal] task queue and report its steps and result as JSON lines",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			logger := slog.New(slog.NewTextHandler(io.Discard, nil))
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			if model != "" {
				cfg.LLM.Model = model
			}
			if maxSteps > 0 {
				cfg.Agent.MaxSteps = maxSteps
			}
			c, err := dial(cfg.Temporal, logger)
			if err != nil {
				return err
			}
			defer c.Close()
			opts := cfg.RunOptions()
			in := temporal.TurnInput{SessionID: session, Task: args[0], Options: temporal.RunOptions{Model: opts.Model,
				MaxSteps: opts.MaxSteps, ParseRetries: opts.ParseRetries, TokenBudget: opts.TokenBudget, Tools: opts.Tools}}
			ctx := cmd.Context()
			wr, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: cfg.Temporal.WithDefaults().TaskQueue}, temporal.TurnWorkflow, in)
			if err != nil {
				return err
			}
			out := json.NewEncoder(os.Stdout)
			done := make(chan error, 1)
			var res temporal.TurnResult
			go func() { done <- wr.Get(ctx, &res) }()
			seen := 0
			report := func() {
				var progress []temporal.Progress
				q, err := c.QueryWorkflow(ctx, wr.GetID(), wr.GetRunID(), temporal.QueryProgress)
				if err != nil || q.Get(&progress) != nil {
					return // not yet started, or done: the result has every step
				}
				for ; seen < len(progress); seen++ {
					out.Encode(durable.Line{Progress: &progress[seen]})
				}
			}
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case err := <-done:
					if err != nil {
						return fmt.Errorf("workflow %s: %w", wr.GetID(), err)
					}
					for ; seen < len(res.Steps); seen++ {
						st := res.Steps[seen]
						out.Encode(durable.Line{Progress: &temporal.Progress{Step: st.StepNumber, Action: st.Action, Usage: st.Usage}})
					}
					return out.Encode(durable.Line{Result: &res})
				case <-tick.C:
					report()
				case <-ctx.Done():
					return errors.New("interrupted; the turn goes on in Temporal as workflow " + wr.GetID())
				}
			}
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "morph.toml", "the config file")
	cmd.Flags().StringVar(&session, "session", "", "the session id (default: a new one)")
	cmd.Flags().StringVar(&model, "model", "", "the model, overriding llm.model")
	cmd.Flags().IntVar(&maxSteps, "max-steps", 0, "the step limit, overriding agent.max_steps")
	return cmd
}
