package main

import (
	"context"

	"go.temporal.io/sdk/interceptor"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/telemetry"
	"github.com/morphhost/morph/temporal"
)

// clientTracing sets up cfg's telemetry ([telemetry], OTEL_*) for the
// process's Temporal client: the interceptors to dial with (none when it
// is off), and the flush of their spans, to call before exiting.
func clientTracing(ctx context.Context, cfg *config.Config) ([]interceptor.ClientInterceptor, func(context.Context) error, error) {
	p, err := telemetry.Setup(ctx, cfg.TelemetryConfig())
	if err != nil {
		return nil, nil, err
	}
	i, err := temporal.TracingInterceptor(p.Telemetry)
	if err != nil || i == nil {
		return nil, p.Shutdown, err
	}
	return []interceptor.ClientInterceptor{i}, p.Shutdown, nil
}
