package temporal

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/telemetry"
)

// A turn started under a traced caller (its TRACEPARENT, as `morph run
// --temporal` passes it on) runs in that trace: the client's update, the
// workflow and its activities on the worker (made from the same client)
// are spans of the caller's trace.
func TestTraceJoinsTheCaller(t *testing.T) {
	dev(t)
	srv, _ := devServer()
	spans := tracetest.NewInMemoryExporter()
	ti, err := TracingInterceptor(engine.Telemetry{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))})
	if err != nil || ti == nil {
		t.Fatalf("interceptor %v, %v", ti, err)
	}
	c, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Logger: quiet, Interceptors: []interceptor.ClientInterceptor{ti}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	queue := calcQueue(t, c, calcTurns[:2])

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	t.Setenv(telemetry.EnvTraceParent, parent)
	ctx, cancel := context.WithTimeout(telemetry.FromEnvironment(context.Background()), time.Minute)
	defer cancel()
	want := trace.SpanContextFromContext(ctx).TraceID()
	h, err := StartTurn(ctx, c, queue, "trace-"+t.Name(), SessionLimits{}, SessionTurn{Task: "what is 6*7?"})
	if err != nil {
		t.Fatal(err)
	}
	var res TurnResult
	if err := WaitTurn(ctx, h, &res); err != nil {
		t.Fatal(err)
	}
	want42(t, res)
	// The activities' spans end with them, before the turn's result.
	var names []string
	activities := 0
	for _, s := range spans.GetSpans() {
		names = append(names, s.Name)
		if s.SpanContext.TraceID() != want {
			t.Errorf("span %q is of trace %s, not the caller's %s", s.Name, s.SpanContext.TraceID(), want)
		}
		if strings.HasPrefix(s.Name, "RunActivity:") {
			activities++
		}
	}
	if activities == 0 {
		t.Errorf("no RunActivity span among %q", names)
	}
}
