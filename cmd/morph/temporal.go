package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/durable"
	"github.com/morphhost/morph/internal/helperbin"
	"github.com/morphhost/morph/llm"
)

// Durable runs go through morph-temporal (the temporal module's program),
// which links the Temporal SDK so that morph does not.
const (
	temporalProgram = "morph-temporal"
	temporalEnvVar  = "MORPH_TEMPORAL_BIN"
)

func findTemporal() (string, error) {
	path, err := helperbin.Find(temporalProgram, temporalEnvVar,
		"`cd temporal && go build -o ../bin/ ./cmd/morph-temporal` in morph's source builds it")
	if err != nil {
		return "", &exitError{exitUsage, err}
	}
	return path, nil
}

func newWorkerCmd(stderr io.Writer) *cobra.Command {
	var cfgPath string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Serve the [temporal] task queue: durable turns' model calls, tools and hooks, with this config's model and plugins",
		Long: `Serve the task queue of the config's [temporal] table (host_port, namespace,
task_queue): run the model calls, tool calls and hooks of durable turns (morph run
--temporal) with the config's model and plugins, as morph run would. Run several,
on one machine or many, with the same config and a shared [temporal] journal_dir:
a turn whose worker dies goes on in another, which answers each call whose result
is in the journal without making it again (only the call in flight at the death
runs again, with the same call ID). SIGINT or SIGTERM stops the worker.`,
		Example: `  morph worker --config morph.toml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := findTemporal()
			if err != nil {
				return err
			}
			args := []string{temporalProgram, "worker", "--config", cfgPath}
			if timeout > 0 {
				args = append(args, "--activity-timeout", timeout.String())
			}
			// In morph's place: signals and exit status are the worker's.
			return syscall.Exec(bin, args, os.Environ())
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "morph.toml", "the config file")
	cmd.Flags().DurationVar(&timeout, "activity-timeout", 0, "the most an activity may run before another worker gets it, each bounded by its call's own limits, and the timeout of a call without any; every worker must agree (default 10m)")
	return cmd
}

// sessionID is what `morph run --temporal --session` takes: what a person
// types and a workflow ID carries unambiguously.
var sessionID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$`)

// runTemporal runs the turn on Temporal through morph-temporal, printing
// its progress lines and result as a local run does.
func runTemporal(ctx context.Context, f runFlags, task string, stdout, stderr io.Writer) error {
	bin, err := findTemporal()
	if err != nil {
		return err
	}
	args := []string{"run", "--config", f.config}
	if f.model != "" {
		args = append(args, "--model", f.model)
	}
	if f.maxSteps > 0 {
		args = append(args, "--max-steps", strconv.Itoa(f.maxSteps))
	}
	if f.session != "" {
		args = append(args, "--session", f.session)
	}
	cmd := exec.CommandContext(ctx, bin, append(args, task)...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return &exitError{exitRunFailed, err}
	}
	show := progress(stderr, f.verbose)
	started, total := time.Now(), llm.Usage{}
	var res *durable.TurnResult
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 64<<20) // a result carries the run's steps
	for lines.Scan() {
		var msg durable.Line
		if err := json.Unmarshal(lines.Bytes(), &msg); err != nil {
			return &exitError{exitRunFailed, fmt.Errorf("%s wrote what is not its protocol: %w", temporalProgram, err)}
		}
		if p := msg.Progress; p != nil {
			total = total.Add(p.Usage)
			show(engine.Event{Kind: engine.EventStep, Step: p.Step, Action: p.Action, Usage: p.Usage, Total: total, Elapsed: time.Since(started)})
		}
		if msg.Result != nil {
			res = msg.Result
		}
	}
	if err := cmd.Wait(); err != nil || res == nil {
		return &exitError{exitRunFailed, errors.Join(errors.New("the durable run failed"), err, lines.Err())}
	}
	rc := &engine.Context{Steps: res.Steps, Metrics: res.Metrics, StopReason: res.StopReason, SystemPrompt: res.SystemPrompt, RawFinalAnswer: res.RawFinal}
	if res.Final == nil {
		return &exitError{exitRunFailed, fmt.Errorf("run failed at step %d (%s): %s", len(rc.Steps)+1, rc.StopReason, res.Error)}
	}
	if err := writeResult(stdout, res.Final, rc, f.showPrompt); err != nil {
		return err
	}
	if rc.StopReason == engine.StopFallback {
		return &exitError{exitFallback, errors.New("the run ended on the fallback final, not on an answer from the model (see the warning above)")}
	}
	return nil
}
