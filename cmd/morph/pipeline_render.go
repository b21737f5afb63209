package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/morphhost/morph/internal/renderproc"
	"github.com/morphhost/morph/pipeline"
)

// runSVGFile is where render draws a run by default: in its directory,
// beside the source it ran (pipeline.SourceFile).
const runSVGFile = "pipeline.svg"

// defaultRenderTimeout is --timeout's default: dot needs seconds for a
// few hundred densely connected nodes (see internal/render), the first
// render on a machine half a second more to compile Graphviz.
const defaultRenderTimeout = 30 * time.Second

func newPipelineRenderCmd(stdout, stderr io.Writer) *cobra.Command {
	var out string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "render FILE.dot|RUN_DIR",
		Short: "Draw a pipeline as SVG, each node coloured by its status in a run",
		Long: `Draw a pipeline with Graphviz's dot layout as SVG.

Given a run directory, the graph is the source the run used (its pipeline.dot)
and every node is filled by its last status in the run's checkpoint: success
green, partial_success amber, retry orange, fail red, skipped grey, white when
it did not run; the node the run goes to next (the one running, if it is) has
a blue outline. A legend lists the statuses shown. A node visited or attempted
more than once shows the counts ("x2, 3 attempts"), and the statuses of its
visits when they differ ("fail > success"; all of them in its tooltip). The
edges the run took are drawn thick and dark, with their count when over one;
the others thin and grey. Given a DOT file, the graph is drawn as written.
Nodes without a shape are boxes.

The SVG goes to -o, by default FILE.svg beside FILE.dot, or RUN_DIR/pipeline.svg;
"-o -" writes it to standard output. The path written is printed on standard
error. Links in the graph (URL, href) are left out of the SVG, which a browser
may open.

The drawing is done by the program morph-render, which make build puts beside
morph: $MORPH_RENDER if set, else the one beside morph, else the one on PATH.
It is killed at --timeout. Graphviz's compilation cache is kept in
morph/graphviz under the user cache directory.

Exit codes: 0 drawn, 1 the render failed (a graph over the renderer's limits,
--timeout, the SVG cannot be written), 2 a usage error (no such file or run
directory, a file that cannot be read or parsed, no morph-render).`,
		Example: `  morph pipeline render runs/plan-implement-verify-20261124T101500Z-1a2b3c   # writes .../pipeline.svg
  morph pipeline render plan-implement-verify.dot -o - | display          # the graph alone`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usageErrorf("--timeout must be positive, not %s", timeout)
			}
			in, err := readRenderInput(args[0], stderr)
			if err != nil {
				return err
			}
			if out == "" {
				out = in.defaultOut
				if out == in.dotPath {
					return usageErrorf("%s: give -o: the default output, FILE.svg, is the input", in.dotPath)
				}
			}
			prog, err := renderproc.Find()
			if err != nil {
				return &exitError{exitUsage, err}
			}
			svg, err := renderproc.Run(cmd.Context(), prog, in.request(timeout))
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					err = fmt.Errorf("%w (--timeout %s)", err, timeout)
				}
				return &exitError{exitRunFailed, fmt.Errorf("%s: %w", in.dotPath, err)}
			}
			if out == "-" {
				if _, err := stdout.Write(svg); err != nil {
					return &exitError{exitRunFailed, fmt.Errorf("writing the SVG: %w", err)}
				}
				return nil
			}
			if err := os.WriteFile(out, svg, 0o644); err != nil {
				return &exitError{exitRunFailed, fmt.Errorf("writing the SVG: %w", err)}
			}
			fmt.Fprintf(stderr, "morph: wrote %s\n", oneLine(out, 0))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&out, "output", "o", "", `the SVG file ("-": standard output; default FILE.svg, or RUN_DIR/pipeline.svg)`)
	fl.DurationVar(&timeout, "timeout", defaultRenderTimeout, "the bound of the render, morph-render's start included")
	return cmd
}

// renderInput is what render draws: the graph as standard DOT and, from a
// run directory, the run's statuses and next node.
type renderInput struct {
	dotPath    string             // the source's path, naming it in errors
	src        []byte             // the source, in morph's DOT dialect
	req        renderproc.Request // the graph as standard DOT and the run's view (renderproc.GraphRequest)
	defaultOut string
}

// request is what morph-render is given to draw in.
func (in *renderInput) request(timeout time.Duration) renderproc.Request {
	req := in.req
	req.Timeout = timeout
	return req
}

// readRenderInput reads arg, a DOT file or a run directory. A run
// directory without a checkpoint (a run that stopped before its first
// node) is drawn without statuses, with a note on stderr.
func readRenderInput(arg string, stderr io.Writer) (*renderInput, error) {
	fi, err := os.Stat(arg)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, usageErrorf("%s: no such file or run directory", arg)
	}
	if err != nil {
		return nil, usageErrorf("%w", err)
	}
	in := &renderInput{dotPath: arg, defaultOut: strings.TrimSuffix(arg, filepath.Ext(arg)) + ".svg"}
	if fi.IsDir() {
		in.dotPath, in.defaultOut = filepath.Join(arg, pipeline.SourceFile), filepath.Join(arg, runSVGFile)
	}
	if in.src, err = pipeline.ReadDOTSource(in.dotPath); errors.Is(err, fs.ErrNotExist) && fi.IsDir() {
		return nil, usageErrorf("%s is not a run directory: it has no %s", arg, pipeline.SourceFile)
	} else if err != nil {
		return nil, usageErrorf("%w", err)
	}
	// A source the pipeline parser refuses is refused here as "validate"
	// and "run" refuse it, naming the line, before Graphviz sees it.
	// Graphviz is given the parsed graph written as standard DOT, not the
	// source: morph's dialect has bare words Graphviz refuses (dotted keys,
	// durations, values with '-').
	g, err := pipeline.ParseDOTNamed(in.dotPath, in.src)
	if err != nil {
		return nil, &exitError{exitUsage, err}
	}
	var cp *pipeline.Checkpoint
	if fi.IsDir() {
		cp, err = pipeline.LoadCheckpoint(arg)
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stderr, "morph: %s has no %s yet: drawing the graph without statuses\n", oneLine(arg, 0), pipeline.CheckpointFile)
			cp = nil
		} else if err != nil {
			return nil, usageErrorf("%w", err)
		}
	}
	if in.req, err = renderproc.GraphRequest(g, cp); err != nil {
		return nil, fmt.Errorf("%s: %w", in.dotPath, err)
	}
	return in, nil
}
