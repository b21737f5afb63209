// Command morph-temporal runs morph's sessions on Temporal: `worker` serves
// a task queue, `run` starts a turn there and reports it as it goes. The
// morph command runs it for `morph worker` and `morph run --temporal`: it
// is a program of its own so that morph itself does not link the Temporal
// SDK.
//
// `run` writes one JSON object a line on standard output (internal/durable's
// Line): {"Progress": ...} for each step as the workflow takes it, then
// {"Result": ...}.
//
// `pipeline run FILE.dot` and `pipeline resume WORKFLOW_ID` run a DOT
// pipeline's workflow (temporal.PipelineWorkflow) and write
// internal/durable's PipelineLine: {"Workflow": id}, then {"Event": ...} and
// {"Question": ...} as they come, then {"Result": ...}; they read answers to
// the questions on standard input, one durable.Answer a line, and send
// them to the workflow (temporal.AnswerGate), writing its refusals on
// standard error.
//
// Each waits for a Temporal service that does not answer yet, or does not
// have its namespace yet, up to [temporal] dial_timeout (dial).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/internal/durable"
	"github.com/morphhost/morph/telemetry"
	"github.com/morphhost/morph/temporal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{Use: "morph-temporal", Short: "Run morph sessions on Temporal", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(workerCmd(), runCmd(), pipelineCmd())
	if err := root.ExecuteContext(telemetry.FromEnvironment(ctx)); err != nil { // a traced caller's TRACEPARENT
		fmt.Fprintln(os.Stderr, "morph-temporal:", err)
		os.Exit(2)
	}
}

// dial connects to cfg's [temporal] service, with its payload store
// (payload_dir) when it has one. Temporal's own client settings come first
// (envconfig: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
// TEMPORAL_TLS*, a profile of TEMPORAL_CONFIG_FILE), so that a worker
// reaches a cluster with TLS or an API key as the temporal CLI does, and
// the key stays out of morph.toml; [temporal] host_port and namespace, when
// set, win over them.
//
// A service that does not answer (down, starting, restarting: unreachable)
// is tried again, backing off (dialBackoff), until [temporal] dial_timeout
// has passed since the first attempt, so that a worker or a run started
// with its server, or while it restarts, waits for it; a notice on
// standard error says so once. So is a service without the namespace
// (namespaceFound): a server just started has not registered it yet. A
// refusal (a bad API key) is not tried again. Each error names the
// address and the keys to change, and the last attempt's error.
// interceptors are the client's (clientTracing's); its workers inherit them.
func dial(ctx context.Context, t config.Temporal, logger *slog.Logger, interceptors ...interceptor.ClientInterceptor) (client.Client, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		//lint:ignore ST1005 Temporal is a name
		return nil, fmt.Errorf("Temporal client settings (the TEMPORAL_* environment, TEMPORAL_CONFIG_FILE): %w", err)
	}
	def := config.Temporal{HostPort: opts.HostPort, Namespace: opts.Namespace}.WithDefaults()
	opts.HostPort, opts.Namespace = cmp.Or(t.HostPort, def.HostPort), cmp.Or(t.Namespace, def.Namespace)
	opts.Logger = log.NewStructuredLogger(logger)
	opts.Interceptors = append(opts.Interceptors, interceptors...)
	if dc := temporal.DataConverter(t); dc != nil {
		opts.DataConverter = dc
	}
	timeout := t.WithDefaults().DialTimeout
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last, refused, missing error
	var toldDown, toldMissing sync.Once
	c, err := backoff.Retry(dctx, func() (client.Client, error) {
		c, err := client.DialContext(dctx, opts)
		if err == nil {
			if err = namespaceFound(dctx, c, opts.Namespace, t.WithDefaults().TaskQueue); err != nil {
				c.Close()
			}
		}
		var notFound *serviceerror.NamespaceNotFound
		switch {
		case err == nil:
		case dctx.Err() != nil: // dial_timeout's end (or ctx's) cut the attempt short: it says nothing new
			last = cmp.Or(last, err)
		case errors.As(err, &notFound):
			missing = err
		case !temporal.Transient(dctx, err):
			refused = err
			return nil, backoff.Permanent(err)
		default:
			last, missing = err, nil
		}
		return c, err
	}, backoff.WithBackOff(dialBackoff()), backoff.WithMaxElapsedTime(0), // dctx bounds the attempts
		backoff.WithNotify(func(err error, _ time.Duration) {
			var notFound *serviceerror.NamespaceNotFound
			if errors.As(err, &notFound) {
				toldMissing.Do(func() {
					fmt.Fprintf(os.Stderr, "morph-temporal: Temporal at %s has no namespace %s yet; trying again for up to %s ([temporal] dial_timeout)\n", opts.HostPort, opts.Namespace, timeout)
				})
				return
			}
			toldDown.Do(func() {
				fmt.Fprintf(os.Stderr, "morph-temporal: Temporal at %s does not answer (%v); trying again for up to %s ([temporal] dial_timeout)\n", opts.HostPort, err, timeout)
			})
		}))
	switch {
	case err == nil:
		return c, nil
	case refused != nil:
		return nil, fmt.Errorf("connecting to Temporal at %s (namespace %s; [temporal] host_port, namespace, or TEMPORAL_ADDRESS): %w", opts.HostPort, opts.Namespace, refused)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("connecting to Temporal at %s: %w", opts.HostPort, context.Cause(ctx))
	case missing != nil:
		//lint:ignore ST1005 Temporal is a name
		return nil, fmt.Errorf("Temporal at %s has no namespace %s after %s ([temporal] dial_timeout; set [temporal] namespace or TEMPORAL_NAMESPACE to one it has, or create it: temporal operator namespace create): %w",
			opts.HostPort, opts.Namespace, timeout, missing)
	}
	//lint:ignore ST1005 Temporal is a name
	return nil, fmt.Errorf("Temporal at %s did not answer within %s ([temporal] dial_timeout; is it running there? else set [temporal] host_port or TEMPORAL_ADDRESS): %w",
		opts.HostPort, timeout, last)
}

// namespaceFound checks that c's service has namespace ns: a server just
// started registers its namespaces a little after it answers, and a
// client's first request would fail with NamespaceNotFound. It asks as
// those requests do, through the frontend's cache of namespaces, by
// describing taskQueue (read-only, and of the namespace's workflows'
// permissions): DescribeNamespace reads the store and finds a namespace
// the cache does not know yet. Only NamespaceNotFound counts (or the
// service not answering): another refusal leaves the namespace to the
// client's requests to check.
func namespaceFound(ctx context.Context, c client.Client, ns, taskQueue string) error {
	_, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{Namespace: ns,
		TaskQueue: &taskqueuepb.TaskQueue{Name: taskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW})
	var notFound *serviceerror.NamespaceNotFound
	if err != nil && (errors.As(err, &notFound) || temporal.Transient(ctx, err)) {
		return err
	}
	return nil
}

// dialBackoff is the waits between attempts to reach Temporal: a tenth of
// a second, doubling to at most two seconds (each give or take half), so
// that a server that comes up is found within about two seconds.
func dialBackoff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: 2 * time.Second}
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
			tracing, flush, err := clientTracing(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer flush(context.WithoutCancel(cmd.Context()))
			c, err := dial(cmd.Context(), cfg.Temporal, logger, tracing...)
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
	cmd.Flags().DurationVar(&timeout, "activity-timeout", 0, "the most an activity may run before another worker gets it, each bounded by its call's own limits, and the timeout of a call without any; every worker must agree (default 10m)")
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
			tracing, flush, err := clientTracing(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer flush(context.WithoutCancel(cmd.Context()))
			c, err := dial(cmd.Context(), cfg.Temporal, logger, tracing...)
			if err != nil {
				return err
			}
			defer c.Close()
			opts := cfg.RunOptions()
			ropts := temporal.RunOptionsOf(opts)
			ctx, queue := cmd.Context(), cfg.Temporal.WithDefaults().TaskQueue
			if session != "" {
				h, err := temporal.StartTurn(ctx, c, queue, session, temporal.LimitsOf(cfg.Temporal), temporal.SessionTurn{Task: args[0], Options: ropts})
				if err != nil {
					return err
				}
				wait := func(ctx context.Context, res any) error { return temporal.WaitTurn(ctx, h, res.(*temporal.TurnResult)) }
				return report(ctx, h.WorkflowID(), wait, func() (converter.EncodedValue, error) {
					return c.QueryWorkflow(ctx, h.WorkflowID(), h.RunID(), temporal.QueryTurnProgress, h.UpdateID())
				})
			}
			if err := temporal.LimitsOf(cfg.Temporal).CheckTask(args[0]); err != nil {
				return err
			}
			wr, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, temporal.TurnWorkflow, temporal.TurnInput{Task: args[0], Options: ropts})
			if err != nil {
				return err
			}
			wait := func(ctx context.Context, res any) error { return temporal.WaitRun(ctx, wr, res) }
			return report(ctx, wr.GetID(), wait, func() (converter.EncodedValue, error) {
				return c.QueryWorkflow(ctx, wr.GetID(), wr.GetRunID(), temporal.QueryProgress)
			})
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "morph.toml", "the config file")
	cmd.Flags().StringVar(&session, "session", "", "run the turn in this session's workflow, which keeps its history (default: a turn of a new session)")
	cmd.Flags().StringVar(&model, "model", "", "the model, overriding llm.model")
	cmd.Flags().IntVar(&maxSteps, "max-steps", 0, "the step limit, overriding agent.max_steps")
	return cmd
}

// report writes the steps of the turn of workflow id as the query
// progress answers them, then its result, which get waits for.
func report(ctx context.Context, id string, get func(context.Context, any) error, progress func() (converter.EncodedValue, error)) error {
	out := json.NewEncoder(os.Stdout)
	var res temporal.TurnResult
	seen := 0
	return follow(ctx, func(ctx context.Context) error { return get(ctx, &res) }, func() {
		var steps []temporal.Progress
		q, err := progress()
		if err != nil || q.Get(&steps) != nil {
			return // not yet started, or done: the result has every step
		}
		for ; seen < len(steps); seen++ {
			out.Encode(durable.Line{Progress: &steps[seen]})
		}
	}, func(err error) error {
		if err != nil {
			return fmt.Errorf("workflow %s: %w", id, err)
		}
		for ; seen < len(res.Steps); seen++ {
			st := res.Steps[seen]
			out.Encode(durable.Line{Progress: &temporal.Progress{Step: st.StepNumber, Action: st.Action, Usage: st.Usage}})
		}
		return out.Encode(durable.Line{Result: &res})
	}, "the turn goes on in Temporal as workflow "+id)
}

// follow waits for get (a workflow's result), calling poll four times a
// second meanwhile and done with get's error at the end; interrupted, it
// says where the workflow goes on (interrupted).
func follow(ctx context.Context, get func(context.Context) error, poll func(), done func(error) error, interrupted string) error {
	ended := make(chan error, 1)
	go func() { ended <- get(ctx) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-ended:
			return done(err)
		case <-tick.C:
			poll()
		case <-ctx.Done():
			return errors.New("interrupted; " + interrupted)
		}
	}
}
