// Command morph runs morph agents from a config file.
//
//	morph run [--config morph.toml] [--model M] [--max-steps N] [-v] [task | --task T]
//	morph version
//
// "morph run" takes the task from its arguments, from --task, or else from
// standard input. It prints the final answer as JSON on standard output
// and one progress line per step on standard error.
//
// SIGINT or SIGTERM cancels what morph is doing: the run, or the shutdown
// after it (the plugins' morph_destroy hooks). A second signal ends the
// process at once.
//
// Exit codes: 0 success, 1 the run failed (a model call failed, the context
// was canceled), 2 a usage or configuration error (bad flags, a bad config
// file, no task).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, the next one gets Go's default handling: the
	// process ends at once, whatever is still running.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
