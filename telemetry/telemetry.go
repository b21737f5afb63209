// Package telemetry sets up OpenTelemetry for morph: the trace and metric
// providers, with OTLP exporters over HTTP or gRPC, from the standard
// OTEL_* environment variables and [telemetry] in morph.toml (Config).
// It is the one package of morph's that links the OpenTelemetry SDK; the
// packages it instruments (engine, host, pipeline) take its providers as
// an engine.Telemetry and use only the API.
//
// Telemetry is off unless asked for: by Config.Enabled, by
// OTEL_TRACES_EXPORTER=otlp or OTEL_METRICS_EXPORTER=otlp, or by an OTLP
// endpoint variable (OTEL_EXPORTER_OTLP_ENDPOINT and its per-signal
// variants). Off, Setup returns a zero engine.Telemetry: nothing is
// recorded and nothing is spent.
//
// # Precedence: the environment wins
//
// An OTEL_* variable that is set overrides the matching Config field, as
// the OpenTelemetry specification has environment variables override a
// program's defaults: the operator of a deployment redirects or silences
// its telemetry without editing its morph.toml. OTEL_SDK_DISABLED=true
// turns everything off; OTEL_TRACES_EXPORTER=none or
// OTEL_METRICS_EXPORTER=none turn one signal off. The exporters read the
// endpoint, headers, timeout, TLS and compression variables themselves;
// Config.Endpoint is used only where no endpoint variable applies.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/safetext"
)

// Protocols of the OTLP exporters (OTEL_EXPORTER_OTLP_PROTOCOL's values).
const (
	ProtocolHTTP = "http/protobuf" // the specification's default
	ProtocolGRPC = "grpc"
)

// Defaults of Config.
const (
	DefaultMetricsInterval = 60 * time.Second
	DefaultShutdownTimeout = 5 * time.Second
	DefaultServiceName     = "morph"
)

// ErrSetting is matched (errors.Is) by Setup's error for a bad OTEL_*
// variable or Config field; the error names it and the values it takes.
var ErrSetting = errors.New("telemetry: bad setting")

// Config is [telemetry] in morph.toml. The zero Config is off.
type Config struct {
	Enabled  bool   // export traces and metrics over OTLP
	Protocol string // ProtocolHTTP (default) or ProtocolGRPC
	// Endpoint is the OTLP receiver's URL (http://host:4318 over HTTP,
	// where /v1/traces and /v1/metrics are appended; http://host:4317
	// over gRPC); empty: the exporters' default, localhost.
	Endpoint string
	// SampleRatio is the share of traces recorded (parent-based: a
	// traced caller's decision is kept); 0 means 1, every trace.
	SampleRatio float64
	// RecordContent records prompts, replies, tool parameters and results
	// (engine.Telemetry.RecordContent).
	RecordContent     bool
	MaxAttributeBytes int           // engine.Telemetry.MaxAttributeBytes; 0: engine.DefaultMaxAttributeBytes
	MetricsInterval   time.Duration // between metric exports; 0: DefaultMetricsInterval
	ServiceVersion    string        // service.version of the resource; empty: not set
	// Provider is the model's gen_ai.provider.name (engine.Telemetry.Provider).
	Provider string
	// ShutdownTimeout bounds Shutdown's flush, whatever its caller's
	// deadline: an unreachable collector delays the exit by at most this
	// (0: DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
}

// Providers are what Setup built: Telemetry, to pass to the engine, the
// loader and the pipeline runner, and the exporters Shutdown flushes.
type Providers struct {
	Telemetry engine.Telemetry
	// Propagator carries the trace context across process boundaries
	// (W3C tracecontext and baggage): the TRACEPARENT variable of a child
	// process, an MCP request's _meta.
	Propagator propagation.TextMapPropagator
	shutdown   []flusher
	timeout    time.Duration // Config.ShutdownTimeout, defaulted
}

// flusher is a signal's provider to shut down, and where it exports to:
// a failed flush names the collector, not only "context deadline exceeded".
type flusher struct {
	signal, target string // "traces", "http://collector:4317 (grpc)"
	shutdown       func(context.Context) error
}

// Shutdown flushes the spans and metrics not yet exported and stops the
// exporters, within ctx and Config.ShutdownTimeout (its own bound, so that
// an unreachable collector does not use up the caller's whole shutdown).
// A failure names the signals and the collector; the signals that failed
// alike at one collector make one error. A nil *Providers does nothing.
func (p *Providers) Shutdown(ctx context.Context) error {
	if p == nil || len(p.shutdown) == 0 {
		return nil
	}
	timeout := p.timeout
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type failure struct {
		signals []string
		target  string
		err     error
	}
	var failed []*failure
next:
	for _, f := range p.shutdown {
		err := f.shutdown(ctx)
		if err == nil {
			continue
		}
		for _, o := range failed {
			if o.target == f.target && o.err.Error() == err.Error() {
				o.signals = append(o.signals, f.signal)
				continue next
			}
		}
		failed = append(failed, &failure{[]string{f.signal}, f.target, err})
	}
	p.shutdown = nil
	var errs []error
	for _, o := range failed {
		errs = append(errs, fmt.Errorf("telemetry: flushing %s to %s (at most %s, [telemetry] shutdown_timeout): %w",
			strings.Join(o.signals, " and "), o.target, timeout, o.err))
	}
	return errors.Join(errs...)
}

// settings are Config with the environment applied (resolve).
type settings struct {
	traces, metrics bool
	// tracesProtocol and metricsProtocol are ProtocolHTTP or ProtocolGRPC.
	tracesProtocol, metricsProtocol string
	// tracesEndpoint and metricsEndpoint are Config.Endpoint where no
	// endpoint variable applies to the signal; empty otherwise.
	tracesEndpoint, metricsEndpoint string
	sampleRatio                     float64 // 0: the SDK's (OTEL_TRACES_SAMPLER, else parent-based always-on)
	maxBytes                        int
	sdkLimit                        bool          // set the SDK's attribute length limit (no variable does)
	content                         bool          // record content
	interval                        time.Duration // 0: the SDK's (OTEL_METRIC_EXPORT_INTERVAL)
}

// Environment variables read here; the exporters and the SDK read the rest.
const (
	envDisabled        = "OTEL_SDK_DISABLED"
	envTracesExporter  = "OTEL_TRACES_EXPORTER"
	envMetricsExporter = "OTEL_METRICS_EXPORTER"
	envEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envMetricsEndpoint = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
	envProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envMetricsProtocol = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
	envSampler         = "OTEL_TRACES_SAMPLER"
	envAttrLimit       = "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"
	envSpanAttrLimit   = "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"
	envMetricInterval  = "OTEL_METRIC_EXPORT_INTERVAL"
	envCaptureContent  = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
	exporterOTLP       = "otlp"
	exporterNone       = "none"
)

// resolve applies the environment (getenv) to c: see the package doc.
func resolve(c Config, getenv func(string) string) (settings, error) {
	var s settings
	if v := getenv(envDisabled); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("%w: %s=%q: want true or false", ErrSetting, envDisabled, v)
		}
		if off {
			return s, nil
		}
	}
	exporter := func(name string) (string, error) {
		switch v := strings.ToLower(strings.TrimSpace(getenv(name))); v {
		case "", exporterOTLP, exporterNone:
			return v, nil
		default:
			return "", fmt.Errorf("%w: %s=%q: morph exports over OTLP: want otlp or none", ErrSetting, name, v)
		}
	}
	tracesExp, err := exporter(envTracesExporter)
	if err != nil {
		return s, err
	}
	metricsExp, err := exporter(envMetricsExporter)
	if err != nil {
		return s, err
	}
	generic := getenv(envEndpoint) != ""
	s.traces = tracesExp != exporterNone && (c.Enabled || tracesExp == exporterOTLP || generic || getenv(envTracesEndpoint) != "")
	s.metrics = metricsExp != exporterNone && (c.Enabled || metricsExp == exporterOTLP || generic || getenv(envMetricsEndpoint) != "")
	if !s.traces && !s.metrics {
		return s, nil
	}
	if c.Endpoint != "" && !generic {
		if getenv(envTracesEndpoint) == "" {
			s.tracesEndpoint = c.Endpoint
		}
		if getenv(envMetricsEndpoint) == "" {
			s.metricsEndpoint = c.Endpoint
		}
	}
	protocol := func(specific string) (string, error) {
		name, v := specific, getenv(specific)
		if v == "" {
			name, v = envProtocol, getenv(envProtocol)
		}
		if v == "" {
			name, v = "telemetry.protocol", c.Protocol
		}
		switch v {
		case "", ProtocolHTTP:
			return ProtocolHTTP, nil
		case ProtocolGRPC:
			return ProtocolGRPC, nil
		}
		return "", fmt.Errorf("%w: %s %q: want %q or %q", ErrSetting, name, v, ProtocolHTTP, ProtocolGRPC)
	}
	if s.tracesProtocol, err = protocol(envTracesProtocol); err != nil {
		return s, err
	}
	if s.metricsProtocol, err = protocol(envMetricsProtocol); err != nil {
		return s, err
	}
	if getenv(envSampler) == "" && c.SampleRatio > 0 && c.SampleRatio < 1 {
		s.sampleRatio = c.SampleRatio
	}
	if c.SampleRatio < 0 || c.SampleRatio > 1 {
		return s, fmt.Errorf("%w: telemetry.sample_ratio %v: want a share from 0 to 1", ErrSetting, c.SampleRatio)
	}
	s.maxBytes, s.sdkLimit = c.MaxAttributeBytes, true
	for _, name := range []string{envSpanAttrLimit, envAttrLimit} { // the SDK's order
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return s, fmt.Errorf("%w: %s=%q: want a positive number of bytes", ErrSetting, name, v)
			}
			s.maxBytes, s.sdkLimit = n, false
			break
		}
	}
	if s.maxBytes <= 0 {
		s.maxBytes = engine.DefaultMaxAttributeBytes
	}
	s.content = c.RecordContent
	if v := getenv(envCaptureContent); v != "" {
		switch strings.ToLower(v) {
		case "true", "1", "span_only", "span_and_event":
			s.content = true
		case "false", "0", "no_content", "event_only":
			s.content = false
		default:
			return s, fmt.Errorf("%w: %s=%q: want true or false", ErrSetting, envCaptureContent, v)
		}
	}
	if getenv(envMetricInterval) == "" {
		s.interval = c.MetricsInterval
		if s.interval <= 0 {
			s.interval = DefaultMetricsInterval
		}
	}
	return s, nil
}

// Setup builds the providers c and the environment ask for (see the
// package doc); with telemetry off, a Providers whose Telemetry is zero.
// The resource is service.name "morph" (OTEL_SERVICE_NAME overrides it),
// service.version, and OTEL_RESOURCE_ATTRIBUTES. Call Shutdown when done,
// or the last spans are lost.
func Setup(ctx context.Context, c Config) (*Providers, error) {
	return setup(ctx, c, os.Getenv)
}

func setup(ctx context.Context, c Config, getenv func(string) string) (*Providers, error) {
	s, err := resolve(c, getenv)
	if err != nil {
		return nil, err
	}
	p := &Providers{Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}), timeout: c.ShutdownTimeout}
	if !s.traces && !s.metrics {
		return p, nil
	}
	attrs := []resource.Option{resource.WithAttributes(semconv.ServiceName(DefaultServiceName))}
	if c.ServiceVersion != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(c.ServiceVersion)))
	}
	res, err := resource.New(ctx, append(attrs, resource.WithFromEnv())...)
	if err != nil {
		return nil, fmt.Errorf("%w: the resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", ErrSetting, err)
	}
	p.Telemetry = engine.Telemetry{Provider: c.Provider, RecordContent: s.content, MaxAttributeBytes: s.maxBytes}
	if s.traces {
		exp, err := traceExporter(ctx, s)
		if err != nil {
			return nil, err
		}
		opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
		if s.sampleRatio > 0 {
			opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.sampleRatio))))
		}
		if s.sdkLimit {
			// The second cap, behind engine.Telemetry.Value's: whatever a
			// value's origin, none is longer than this.
			limits := sdktrace.NewSpanLimits()
			limits.AttributeValueLengthLimit = s.maxBytes + engine.MaxNoteBytes
			opts = append(opts, sdktrace.WithRawSpanLimits(limits))
		}
		tp := sdktrace.NewTracerProvider(opts...)
		p.Telemetry.TracerProvider = tp
		p.shutdown = append(p.shutdown, flusher{"traces", target(s.tracesEndpoint, envTracesEndpoint, s.tracesProtocol, getenv), tp.Shutdown})
	}
	if s.metrics {
		exp, err := metricExporter(ctx, s)
		if err != nil {
			_ = p.Shutdown(ctx)
			return nil, err
		}
		var ropts []metric.PeriodicReaderOption
		if s.interval > 0 {
			ropts = append(ropts, metric.WithInterval(s.interval))
		}
		mp := metric.NewMeterProvider(metric.WithReader(metric.NewPeriodicReader(exp, ropts...)), metric.WithResource(res))
		p.Telemetry.MeterProvider = mp
		p.shutdown = append(p.shutdown, flusher{"metrics", target(s.metricsEndpoint, envMetricsEndpoint, s.metricsProtocol, getenv), mp.Shutdown})
	}
	return p, nil
}

// target names where a signal exports to, for an error: its endpoint
// (Config.Endpoint, else the variable that applies, escaped, else the
// exporter's default) and protocol.
func target(endpoint, specific, protocol string, getenv func(string) string) string {
	for _, name := range []string{specific, envEndpoint} {
		if endpoint == "" {
			endpoint = getenv(name)
		}
	}
	if endpoint == "" {
		return fmt.Sprintf("the default localhost endpoint (%s)", protocol)
	}
	return fmt.Sprintf("%s (%s)", safetext.Line(endpoint, 200), protocol)
}

// signalURL is endpoint, a base URL, with the OTLP/HTTP path of a signal
// ("traces", "metrics") appended, as OTEL_EXPORTER_OTLP_ENDPOINT's is.
func signalURL(endpoint, signal string) string {
	return strings.TrimSuffix(endpoint, "/") + "/v1/" + signal
}

func traceExporter(ctx context.Context, s settings) (sdktrace.SpanExporter, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch s.tracesProtocol {
	case ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if s.tracesEndpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(s.tracesEndpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		var opts []otlptracehttp.Option
		if s.tracesEndpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(signalURL(s.tracesEndpoint, "traces")))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: the OTLP trace exporter (%s): %w", s.tracesProtocol, err)
	}
	return exp, nil
}

func metricExporter(ctx context.Context, s settings) (metric.Exporter, error) {
	var (
		exp metric.Exporter
		err error
	)
	switch s.metricsProtocol {
	case ProtocolGRPC:
		var opts []otlpmetricgrpc.Option
		if s.metricsEndpoint != "" {
			opts = append(opts, otlpmetricgrpc.WithEndpointURL(s.metricsEndpoint))
		}
		exp, err = otlpmetricgrpc.New(ctx, opts...)
	default:
		var opts []otlpmetrichttp.Option
		if s.metricsEndpoint != "" {
			opts = append(opts, otlpmetrichttp.WithEndpointURL(signalURL(s.metricsEndpoint, "metrics")))
		}
		exp, err = otlpmetrichttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: the OTLP metric exporter (%s): %w", s.metricsProtocol, err)
	}
	return exp, nil
}
