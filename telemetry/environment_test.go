package telemetry

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// A trace context goes into a child's environment and comes out of it as
// the same trace and parent span; a malformed TRACEPARENT is ignored.
func TestEnvironmentCarrier(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	env := Environment(ctx)
	if len(env) != 1 || !strings.HasPrefix(env[0], "TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") {
		t.Fatalf("environment %q", env)
	}
	vars := map[string]string{EnvTraceParent: strings.TrimPrefix(env[0], "TRACEPARENT=")}
	got := trace.SpanContextFromContext(fromEnvironment(context.Background(), func(k string) string { return vars[k] }))
	if got.TraceID() != tid || got.SpanID() != sid || !got.IsRemote() || !got.IsSampled() {
		t.Errorf("extracted %v, want trace %s span %s, remote and sampled", got, tid, sid)
	}
	if Environment(context.Background()) != nil {
		t.Error("a context without a span gives an environment")
	}
	bad := map[string]string{EnvTraceParent: "00-\x1b[31m-garbage"}
	if sc := trace.SpanContextFromContext(fromEnvironment(context.Background(), func(k string) string { return bad[k] })); sc.IsValid() {
		t.Errorf("a malformed TRACEPARENT gave %v", sc)
	}
}
