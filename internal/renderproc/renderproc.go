// Package renderproc is how morph draws a pipeline: in morph-render
// (cmd/morph-render), a program of its own that morph finds, starts with a
// private temporary directory, feeds a Request and kills at its deadline.
//
// The drawing is not done in morph's own process because Graphviz, as
// github.com/goccy/go-graphviz ships it, is compiled and started in a
// package init: linked into morph, every morph command would pay for it
// (30 ms and 16 MB more for "morph version", 0.6 s on a cold cache), and
// its compilation cache, fixed at $TMPDIR/go-graphviz, is shared by every
// user of /tmp: the second user's morph would panic at start-up on the
// first one's directory, and anyone could plant machine code there for
// the next morph to run. A layout in progress cannot be interrupted
// either; a process can be killed. This package does not import Graphviz:
// only morph-render links it.
package renderproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/morphhost/morph/internal/helperbin"
)

// Request is what morph-render reads, as JSON, on its standard input.
type Request struct {
	// DOT is the graph's source.
	DOT string `json:"dot"`
	// Statuses maps node ids to their pipeline status in a run, Next is
	// the node the run goes to next; both as render.SVG takes them.
	Statuses map[string]string `json:"statuses,omitempty"`
	Next     string            `json:"next,omitempty"`
	// Nodes and Edges are what the run did past each node's last status:
	// render.Options' fields of those names.
	Nodes map[string]NodeRun `json:"nodes,omitempty"`
	Edges []EdgeTaken        `json:"edges,omitempty"`
	// Timeout bounds the render; Run kills morph-render when it has
	// passed. Zero: render's default (a bound for morph-render run by hand;
	// Run needs one).
	Timeout time.Duration `json:"timeout_ns,omitempty"`
}

// NodeRun is what a run did at one node, past its last status. (The
// types render.Options takes live here, not in render, so that morph can
// build a Request without linking Graphviz.)
type NodeRun struct {
	// Visits and Attempts count the node's visits and the attempts of
	// all of them.
	Visits   int `json:"visits,omitempty"`
	Attempts int `json:"attempts,omitempty"`
	// History is the status of each of the node's last visits, oldest
	// first; HistoryDropped counts the earlier visits it leaves out.
	History        []string `json:"history,omitempty"`
	HistoryDropped int      `json:"history_dropped,omitempty"`
}

// EdgeTaken is an edge a run took, and how often. An edge is named by its
// ends and, among the edges with both (A -> B written twice), its place
// in the source, 0 the first.
type EdgeTaken struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Nth   int    `json:"nth,omitempty"`
	Count int    `json:"count"`
}

const (
	// Program is morph-render's name, as Find looks for it.
	Program = "morph-render"
	// EnvVar names morph-render's path, overriding where Find looks.
	EnvVar = "MORPH_RENDER"
	// MaxSVGBytes bounds the SVG Run reads: a graph within render's limits
	// draws a few megabytes at most.
	MaxSVGBytes = 64 << 20
	// maxStderrBytes bounds the error text Run keeps: morph-render writes
	// one line, a Go panic a stack trace.
	maxStderrBytes = 64 << 10
	// waitDelay is how long Run waits for morph-render's output once it
	// has been killed (a wrapper script's children may hold the pipes).
	waitDelay = time.Second
)

// ErrNotFound is Find's error when there is no morph-render to run.
var ErrNotFound = helperbin.ErrNotFound

// Find is the morph-render to run (helperbin.Find).
func Find() (string, error) {
	return helperbin.Find(Program, EnvVar, "`go install ./cmd/"+Program+"` in morph's source puts it in $(go env GOPATH)/bin")
}

// Run runs prog, a morph-render, on req and returns the SVG it wrote. It
// kills prog when req.Timeout has passed (or ctx is done), and fails when
// prog writes more than MaxSVGBytes. prog's environment is PATH, HOME and
// TMPDIR, the latter TempDir: prog sees no secret of morph's, and
// Graphviz's compilation cache is the user's own.
func Run(ctx context.Context, prog string, req Request) ([]byte, error) {
	if req.Timeout <= 0 {
		return nil, errors.New("render: no timeout")
	}
	tmp, err := TempDir()
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("render: encoding the request: %w", err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	c := exec.CommandContext(ctx, prog)
	c.Env = []string{"TMPDIR=" + tmp, "TMP=" + tmp, "TEMP=" + tmp} // TMP and TEMP: where Windows looks
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			c.Env = append(c.Env, k+"="+v)
		}
	}
	c.Stdin = bytes.NewReader(body)
	stdout, stderr := &capBuffer{max: MaxSVGBytes}, &capBuffer{max: maxStderrBytes}
	c.Stdout, c.Stderr = stdout, stderr
	c.WaitDelay = waitDelay
	err = c.Run()
	switch {
	case err != nil && ctx.Err() != nil: // killed (an exit just in time is a success)
		return nil, fmt.Errorf("render: graphviz did not finish in %s: %w", time.Since(start).Round(time.Millisecond), ctx.Err())
	case stdout.over:
		return nil, fmt.Errorf("render: %s wrote more than %d bytes of SVG", prog, MaxSVGBytes)
	case err != nil:
		// morph-render's error is one line; a panic's is its first.
		if msg, _, _ := strings.Cut(strings.TrimSpace(stderr.buf.String()), "\n"); msg != "" {
			return nil, errors.New(msg)
		}
		return nil, fmt.Errorf("render: %s: %w", prog, err)
	}
	svg := stdout.buf.Bytes()
	if !bytes.HasPrefix(svg, []byte("<?xml")) {
		return nil, fmt.Errorf("render: %s wrote no SVG (%d bytes): is it morph-render?", prog, len(svg))
	}
	return svg, nil
}

// capBuffer keeps what is written to it up to max bytes; past that, it
// fails the write, which closes the pipe and so stops the writer. (Not an
// embedded bytes.Buffer: io.Copy would use its ReadFrom, past the cap.)
type capBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *capBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.buf.Write(p[:room])
		b.over = true
		return room, fmt.Errorf("more than %d bytes", b.max)
	}
	return b.buf.Write(p)
}

// TempDir is morph-render's TMPDIR, where Graphviz keeps its compilation
// cache: morph/graphviz under the user cache directory ($XDG_CACHE_HOME or
// ~/.cache on Linux), made private (0700) when it is created, and kept
// between renders so that only the first one compiles Graphviz. It must be
// a directory, not a link, and on Unix the user's own, that no other user
// can write: whoever can write there can put code in the cache that
// morph-render runs.
func TempDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("render: Graphviz's cache directory: %w", err)
	}
	dir := filepath.Join(base, "morph", "graphviz")
	if err := makePrivate(dir); err != nil {
		return "", fmt.Errorf("render: Graphviz's cache directory %s: %w", dir, err)
	}
	return dir, nil
}

// makePrivate creates dir, 0700, unless it exists, and checks it.
func makePrivate(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("not a directory (%s)", fi.Mode().Type())
	}
	return checkPrivate(fi)
}
