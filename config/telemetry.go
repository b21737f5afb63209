package config

import (
	"context"
	"net/url"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/telemetry"
)

// Telemetry is the [telemetry] table: OpenTelemetry traces and metrics,
// exported over OTLP (package telemetry). Off by default. The standard
// OTEL_* environment variables override it (OTEL_SDK_DISABLED=true turns
// it off, OTEL_EXPORTER_OTLP_ENDPOINT redirects it, ...): see package
// telemetry for which and why.
type Telemetry struct {
	Enabled bool `toml:"enabled"`
	// Protocol is "http/protobuf" (default) or "grpc".
	Protocol string `toml:"protocol"`
	// Endpoint is the OTLP receiver: "http://collector:4318" over HTTP,
	// "http://collector:4317" over gRPC; empty: localhost's.
	Endpoint string `toml:"endpoint"`
	// SampleRatio is the share of traces recorded, above 0 and at most 1
	// (default 1).
	SampleRatio float64 `toml:"sample_ratio"`
	// RecordContent records prompts, replies, tool parameters and results
	// in the spans (escaped and capped); off, they never are.
	RecordContent bool `toml:"record_content"`
	// MaxAttributeBytes caps each attribute value a guest, the model or a
	// server wrote (default 1024).
	MaxAttributeBytes int `toml:"max_attribute_bytes"`
	// MetricsInterval is the time between metric exports (default 60s).
	MetricsInterval time.Duration `toml:"metrics_interval"`
	// ShutdownTimeout bounds the flush at exit (default 5s): an
	// unreachable collector delays the exit by at most this.
	ShutdownTimeout time.Duration `toml:"shutdown_timeout"`
}

func (v *validator) telemetry() {
	t := v.c.Telemetry
	switch t.Protocol {
	case "", telemetry.ProtocolHTTP, telemetry.ProtocolGRPC:
	default:
		v.fail(toml.Key{"telemetry", "protocol"}, nil, "%q: want %q or %q", t.Protocol, telemetry.ProtocolHTTP, telemetry.ProtocolGRPC)
	}
	if t.Endpoint != "" {
		if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.fail(toml.Key{"telemetry", "endpoint"}, err, "%q: want an http:// or https:// URL, e.g. \"http://localhost:4318\"", t.Endpoint)
		}
	}
	if v.md.IsDefined("telemetry", "sample_ratio") && (t.SampleRatio <= 0 || t.SampleRatio > 1) {
		v.fail(toml.Key{"telemetry", "sample_ratio"}, nil, "%v: want a share above 0 and at most 1 (to record nothing, leave telemetry off)", t.SampleRatio)
	}
	v.limit(toml.Key{"telemetry", "max_attribute_bytes"}, t.MaxAttributeBytes)
	v.duration("telemetry", "metrics_interval", t.MetricsInterval, time.Second)
	v.duration("telemetry", "shutdown_timeout", t.ShutdownTimeout, 0)
}

// TelemetryConfig is [telemetry] as package telemetry takes it, with the
// model's provider.
func (c *Config) TelemetryConfig() telemetry.Config {
	t := c.Telemetry
	tc := telemetry.Config{Enabled: t.Enabled, Protocol: t.Protocol, Endpoint: t.Endpoint, SampleRatio: t.SampleRatio,
		RecordContent: t.RecordContent, MaxAttributeBytes: t.MaxAttributeBytes, MetricsInterval: t.MetricsInterval,
		ShutdownTimeout: t.ShutdownTimeout}
	if c.LLM.Provider == ProviderOpenAI {
		tc.Provider = "openai"
	}
	return tc
}

// setupTelemetry sets up the providers of [telemetry] and the
// environment; a bad OTEL_* variable is an *Error at [telemetry].
func (c *Config) setupTelemetry(ctx context.Context) (*telemetry.Providers, error) {
	p, err := telemetry.Setup(ctx, c.TelemetryConfig())
	if err != nil {
		return nil, c.errorAt(toml.Key{"telemetry"}, err, err.Error())
	}
	return p, nil
}

// Telemetry is what the runtime records its traces and metrics with
// ([telemetry] and OTEL_*): for what runs beside its engine (a pipeline
// runner). The zero value when telemetry is off.
func (r *Runtime) Telemetry() engine.Telemetry {
	if r.telemetry == nil {
		return engine.Telemetry{}
	}
	return r.telemetry.Telemetry
}
