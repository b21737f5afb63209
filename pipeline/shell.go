package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// shellEnvKeys are the only variables of morph's environment a shell
// command sees: enough to find programs and write temporary files, never
// the model's API key or other secrets morph holds.
var shellEnvKeys = []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TERM"}

// shellEnv is a command's environment: shellEnvKeys from morph's, and
// MORPH_GOAL, MORPH_RUN_DIR and MORPH_NODE. The command text is never
// expanded with context values (a value could inject shell syntax); a
// command reads these variables instead.
func shellEnv(x *Execution, pctx *Context) []string {
	runDir := ""
	if x != nil {
		runDir = x.RunDir
	}
	return baseShellEnv(runDir, pctx.GetString(KeyGoal), pctx.GetString(KeyCurrentNode))
}

// baseShellEnv is shellEnv's environment from its parts, for a command run
// where the context is not at hand (a tool hook, around an agent's call).
func baseShellEnv(runDir, goal, node string) []string {
	var env []string
	for _, k := range shellEnvKeys {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, "MORPH_GOAL="+envValue(goal), "MORPH_NODE="+envValue(node))
	if runDir != "" {
		env = append(env, "MORPH_RUN_DIR="+envValue(runDir))
	}
	return env
}

// envValue is s without NUL bytes, which no environment variable can hold
// (exec refuses the whole command for one).
func envValue(s string) string { return strings.ReplaceAll(s, "\x00", "") }

// runShell runs cmd with sh -c until ctx ends (runShellIO), keeping at
// most max bytes of its output (standard output and error, interleaved);
// the rest is read and dropped so the command never blocks on a full pipe.
func runShell(ctx context.Context, cmd string, max int, env []string) (string, error) {
	out := &capWriter{max: max}
	err := runShellIO(ctx, cmd, env, nil, out, out)
	text := out.String()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ctx.Err() == nil {
			return text, fmt.Errorf("the command exited with status %d: %s", ee.ExitCode(), tail(text, 2000))
		}
		if ctx.Err() != nil {
			return text, ctx.Err()
		}
		return text, err
	}
	return text, nil
}

// runShellIO runs cmd with sh -c until ctx ends, in its own process group,
// which is killed when the command ends or times out (children it left in
// the background included), with stdin (nil: none) and its output to
// stdout and stderr. The error is exec's: an *exec.ExitError for a status
// other than 0.
func runShellIO(ctx context.Context, cmd string, env []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd)
	c.Env = env
	c.Stdin = stdin
	c.Stdout, c.Stderr = stdout, stderr
	setProcessGroup(c)
	// A child that keeps the pipes open past the kill must not hold the
	// stage: Wait gives up on them after this.
	c.WaitDelay = time.Second
	err := c.Run()
	killGroup(c) // the command is over: so is whatever it started
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // a background child held the output open: the command itself ended well
	}
	return err
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// capWriter keeps the first max bytes written to it and counts the rest.
type capWriter struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := w.max - len(w.buf)
	if room > len(p) {
		room = len(p)
	}
	if room > 0 {
		w.buf = append(w.buf, p[:room]...)
	}
	w.dropped += len(p) - max(room, 0)
	return len(p), nil
}

func (w *capWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dropped > 0 {
		return string(w.buf) + fmt.Sprintf("\n... (%d more bytes of output dropped)", w.dropped)
	}
	return string(w.buf)
}
