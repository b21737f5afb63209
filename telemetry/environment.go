package telemetry

import (
	"context"
	"os"

	"go.opentelemetry.io/otel/propagation"
)

// Environment variables that carry a trace context into a process, as the
// OpenTelemetry specification names them (its environment carrier): a
// process started by a traced one (a CI job's step, morph-temporal started
// by `morph run --temporal`) joins its trace.
const (
	EnvTraceParent = "TRACEPARENT"
	EnvTraceState  = "TRACESTATE"
)

// FromEnvironment is ctx carrying the trace context of TRACEPARENT and
// TRACESTATE (W3C trace context), so that the spans started under it join
// that trace; ctx itself when TRACEPARENT is unset or malformed.
func FromEnvironment(ctx context.Context) context.Context {
	return fromEnvironment(ctx, os.Getenv)
}

func fromEnvironment(ctx context.Context, getenv func(string) string) context.Context {
	carrier := propagation.MapCarrier{}
	if v := getenv(EnvTraceParent); v != "" {
		carrier["traceparent"] = v
		if s := getenv(EnvTraceState); s != "" {
			carrier["tracestate"] = s
		}
	}
	return propagation.TraceContext{}.Extract(ctx, carrier)
}

// Environment is the TRACEPARENT and TRACESTATE entries ("NAME=value")
// that carry ctx's span into a child process (see FromEnvironment); none
// when ctx has no span.
func Environment(ctx context.Context) []string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	var env []string
	if v := carrier["traceparent"]; v != "" {
		env = append(env, EnvTraceParent+"="+v)
		if s := carrier["tracestate"]; s != "" {
			env = append(env, EnvTraceState+"="+s)
		}
	}
	return env
}
