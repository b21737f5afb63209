// Command morph-render draws a pipeline as SVG for "morph pipeline render",
// which runs it: it reads a renderproc.Request as JSON on standard input,
// lays the graph out with render.SVG and writes the SVG on standard output.
// An error is one escaped line on standard error, exit code 1 (the render
// failed) or 2 (the request is not one morph-render reads). "--version"
// prints its version; it takes no other argument.
//
// It is a program of its own so that morph does not link Graphviz, which
// github.com/goccy/go-graphviz compiles and starts in a package init: every
// morph command would pay for it, and its compilation cache would be the
// shared $TMPDIR/go-graphviz rather than the private directory morph gives
// this process as TMPDIR; and so that a layout, which cannot be
// interrupted, can be killed. See package renderproc.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/morphhost/morph/internal/render"
	"github.com/morphhost/morph/internal/renderproc"
	"github.com/morphhost/morph/internal/safetext"
)

// version is set at build time, as morph's is.
var version = "dev"

// Exit codes.
const (
	exitFailed     = 1
	exitBadRequest = 2
)

// maxRequestBytes bounds the request: morph sends a DOT source of at most
// 4 MiB, which JSON escaping can make a few times larger, and a run's
// statuses.
const maxRequestBytes = 64 << 20

// maxErrorBytes bounds the error line.
const maxErrorBytes = 4 << 10

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fail := func(code int, err error) int {
		fmt.Fprintln(stderr, safetext.Line(strings.TrimSpace(err.Error()), maxErrorBytes)) // Graphviz's errors end in "\n"
		return code
	}
	switch {
	case len(args) == 1 && args[0] == "--version":
		fmt.Fprintln(stdout, "morph-render", version)
		return 0
	case len(args) > 0:
		return fail(exitBadRequest, errors.New("morph-render: it takes no arguments (but --version): morph pipeline render runs it"))
	}
	req, err := readRequest(stdin)
	if err != nil {
		return fail(exitBadRequest, err)
	}
	svg, err := render.SVG(context.Background(), []byte(req.DOT), req.Statuses, render.Options{Timeout: req.Timeout, Next: req.Next, Nodes: req.Nodes, Edges: req.Edges})
	if err != nil {
		return fail(exitFailed, err)
	}
	if _, err := stdout.Write(svg); err != nil {
		return fail(exitFailed, fmt.Errorf("morph-render: writing the SVG: %w", err))
	}
	return 0
}

// readRequest reads one request, refusing fields it does not know: a
// morph newer than this morph-render may ask for what it cannot do.
func readRequest(r io.Reader) (*renderproc.Request, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxRequestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("morph-render: reading the request: %w", err)
	}
	if len(b) > maxRequestBytes {
		return nil, fmt.Errorf("morph-render: the request is larger than %d bytes", maxRequestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var req renderproc.Request
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("morph-render: the request: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("morph-render: the request: more than one JSON value")
	}
	return &req, nil
}
