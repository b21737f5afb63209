package temporal

import (
	"go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/morphhost/morph/engine"
)

// TracingInterceptor is the Temporal SDK's OpenTelemetry interceptor
// recording into tel, for client.Options.Interceptors: the client's calls
// (StartWorkflow, UpdateWorkflow, ...) carry their trace context in the
// workflow's headers, and the workers made from that client (NewWorker)
// run the workflows and activities in spans of that trace (RunWorkflow,
// StartActivity, RunActivity), under which the engine's and the plugins'
// spans nest: one trace from the caller of `morph run --temporal` to the
// plugin calls on any worker. Nil when tel records no spans.
func TracingInterceptor(tel engine.Telemetry) (interceptor.ClientInterceptor, error) {
	if tel.TracerProvider == nil {
		return nil, nil
	}
	return opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{Tracer: tel.Tracer()})
}
