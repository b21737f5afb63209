// Command morph runs morph agents and pipelines from a config file
// (morph.toml), and inspects, checks and scaffolds their WebAssembly plugins.
// Its commands, each described by `morph COMMAND --help`:
//
//	morph run [--config morph.toml] [--model M] [--max-steps N] [--offline] [-v] [task | --task T]
//	morph worker                         serve the [temporal] task queue (durable turns)
//	morph mcp serve [--config morph.toml] the config's tools to an MCP client, on stdin/stdout
//	morph mcp login NAME                 authorize morph with an OAuth MCP server ([[mcp_servers]] NAME)
//	morph tools [--config morph.toml] [--json]  every tool: its source, description, grants (-v: schema)
//	morph version
//	morph plugin inspect FILE.wasm|oci://REF  the manifest, exports, imports, hooks and tools
//	morph plugin check FILE.wasm         conformance to ABI v1 (exit 1 when not)
//	morph plugin test FILE.wasm          every hook and tool called with sample inputs
//	morph plugin replay FILE --plugin NAME=new.wasm  a run's recorded calls (run --record) against a new build
//	morph plugin new go|tinygo|rust NAME a plugin scaffold
//	morph plugin status                  the config's plugins as the engine loaded them
//	morph plugin pull oci://REF          a plugin from an OCI registry into the cache, with its signatures
//	morph plugin lock [--update NAME] [--check]  morph.lock: the digests of the config's oci:// plugins
//	morph pipeline validate FILE.dot     a pipeline's diagnostics
//	morph pipeline run FILE.dot          a pipeline run (--temporal: a durable one)
//	morph pipeline resume RUN_DIR | --temporal WORKFLOW_ID
//	morph pipeline render FILE.dot|RUN_DIR  an SVG drawing (by morph-render)
//	morph pipeline serve --pipeline NAME=FILE.dot  pipeline runs over HTTP (SSE events, gates)
//	morph completion SHELL               a shell completion script
//
// "morph run" takes the task from its arguments, from --task, or else from
// standard input. It prints the final answer as JSON on standard output
// and one progress line per step on standard error. The command is thin:
// config builds the engine (Config.Open) and the pipeline runner
// (Config.OpenPipeline), package temporal the durable runs.
//
// SIGINT or SIGTERM cancels what morph is doing: the run, or the shutdown
// after it (the plugins' morph_destroy hooks). A second signal ends the
// process at once.
//
// Exit codes: 0 success, 1 the run failed (a model call failed, the context
// was canceled; a plugin does not conform), 2 a usage or configuration
// error (bad flags, a bad config file, no task), 3 the run ended on the
// fallback final (morph run) or stopped and can be resumed (morph pipeline
// run and resume).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"go.opentelemetry.io/otel"

	"github.com/morphhost/morph/telemetry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, the next one gets Go's default handling: the
	// process ends at once, whatever is still running.
	context.AfterFunc(ctx, stop)
	// The OpenTelemetry SDK's own errors (an export to an unreachable
	// collector) print as morph's warnings, once each, not through Go's log.
	otel.SetErrorHandler(telemetry.ErrorHandler(os.Stderr))
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
