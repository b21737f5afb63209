package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"

	"github.com/morphhost/morph/internal/durable"
	"github.com/morphhost/morph/pipeline"
)

// runPipelineTemporal runs the pipeline on Temporal through
// morph-temporal: `pipeline run FILE.dot`, or `pipeline resume ID` when
// f.resume is a workflow id. It prints as a local run does (the progress
// lines on stderr, the summary on stdout) and asks the gates on the
// console (or approves them, --yes), morph-temporal sending the answers
// (temporal.AnswerGate).
func runPipelineTemporal(ctx context.Context, f pipelineRunFlags, file string, stdin io.Reader, stdout, stderr io.Writer) error {
	if f.record != "" {
		return recordOnTemporal()
	}
	bin, err := findTemporal()
	if err != nil {
		return err
	}
	g := &pipeline.Graph{File: file}
	args := []string{"pipeline", "resume", "--config", f.config}
	if f.resume == "" {
		if _, g, err = readPipelineFile(file); err != nil {
			return err
		}
		args = []string{"pipeline", "run", "--config", f.config}
		if f.goal != "" {
			args = append(args, "--goal", f.goal)
		}
	}
	if f.maxTokens > 0 {
		args = append(args, "--max-tokens", strconv.Itoa(f.maxTokens))
	}
	if f.maxCost > 0 {
		args = append(args, "--max-cost", strconv.FormatFloat(f.maxCost, 'f', -1, 64))
	}
	if f.maxWallTime > 0 {
		args = append(args, "--max-wall-time", f.maxWallTime.String())
	}
	if f.resume != "" {
		args = append(args, f.resume)
	} else {
		args = append(args, file)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = stderr
	answers, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return &exitError{exitRunFailed, err}
	}
	var iv pipeline.Interviewer = &pipeline.ConsoleInterviewer{In: stdin, Out: stderr}
	if f.yes {
		iv = pipeline.AutoApprove{}
	}
	var mu sync.Mutex // the answers, written by the gates' askers
	ask := func(q pipeline.Question) {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if q.Timeout > 0 { // the workflow takes the default then
			actx, cancel = context.WithTimeout(ctx, q.Timeout)
		}
		defer cancel()
		a, err := iv.Ask(actx, q)
		if err != nil {
			return
		}
		b, _ := json.Marshal(durable.Answer{Node: q.NodeID, Value: a.Value, Choice: a.Choice, Text: a.Text})
		mu.Lock()
		defer mu.Unlock()
		answers.Write(append(b, '\n'))
	}
	show := stageProgress(stderr, f.verbose)
	var last durable.PipelineLine
	workflow := ""
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 64<<20) // a result carries the run's nodes
	for lines.Scan() {
		var l durable.PipelineLine
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			return &exitError{exitRunFailed, fmt.Errorf("%s wrote what is not its protocol: %w", temporalProgram, err)}
		}
		switch {
		case l.Workflow != "":
			workflow = l.Workflow
			fmt.Fprintf(stderr, "morph: workflow %s\n", workflow)
		case l.Event != nil:
			show(*l.Event)
		case l.Question != nil:
			go ask(*l.Question)
		default:
			last = l
		}
	}
	answers.Close()
	if ctx.Err() != nil && workflow != "" {
		cmd.Wait()
		return &exitError{exitStopped, fmt.Errorf("interrupted; the pipeline goes on in Temporal as workflow %s: follow it with morph pipeline resume --temporal --config %s %s", workflow, f.config, workflow)}
	}
	if err := cmd.Wait(); err != nil || (last.Result == nil && last.Error == "") {
		// Its error is on stderr already; its exit status, raw, says
		// nothing more (and "failed" would be wrong of a refused resume).
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() > 0 {
			err = fmt.Errorf("%s exited with code %d (its error is above)", temporalProgram, ee.ExitCode())
		}
		return &exitError{exitRunFailed, errors.Join(errors.New("no result from Temporal"), err, lines.Err())}
	}
	if last.Result == nil {
		printErrors(stderr, g, last.Diagnostics)
		if len(last.Diagnostics) > 0 {
			return &exitError{exitUsage, fmt.Errorf("%s does not validate on Temporal: fix the errors above", file)}
		}
		return &exitError{exitRunFailed, errors.New(last.Error)}
	}
	return finishPipeline(stdout, last.Result, fmt.Sprintf("morph pipeline resume --temporal --config %s %s", f.config, workflow))
}
