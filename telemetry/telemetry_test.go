package telemetry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/morphhost/morph/engine"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// The environment wins over the config, and turns telemetry on or off by
// the specification's variables; bad values name the variable or key.
func TestResolve(t *testing.T) {
	on := Config{Enabled: true, Protocol: ProtocolGRPC, Endpoint: "http://collector:4317", SampleRatio: 0.25, MaxAttributeBytes: 500, RecordContent: true}
	cases := []struct {
		name    string
		c       Config
		env     map[string]string
		want    settings
		wantErr string
	}{
		{name: "off by default", want: settings{}},
		{name: "config on", c: on, want: settings{traces: true, metrics: true, tracesProtocol: ProtocolGRPC, metricsProtocol: ProtocolGRPC,
			tracesEndpoint: "http://collector:4317", metricsEndpoint: "http://collector:4317", sampleRatio: 0.25, maxBytes: 500, sdkLimit: true,
			content: true, interval: DefaultMetricsInterval}},
		{name: "sdk disabled wins", c: on, env: map[string]string{envDisabled: "true", envEndpoint: "http://x:4318"}, want: settings{}},
		{name: "endpoint variable turns it on", env: map[string]string{envEndpoint: "http://x:4318"},
			want: settings{traces: true, metrics: true, tracesProtocol: ProtocolHTTP, metricsProtocol: ProtocolHTTP, maxBytes: engine.DefaultMaxAttributeBytes,
				sdkLimit: true, interval: DefaultMetricsInterval}},
		{name: "traces exporter alone", env: map[string]string{envTracesExporter: "otlp"},
			want: settings{traces: true, tracesProtocol: ProtocolHTTP, metricsProtocol: ProtocolHTTP, maxBytes: engine.DefaultMaxAttributeBytes,
				sdkLimit: true, interval: DefaultMetricsInterval}},
		{name: "none turns a signal off", c: on, env: map[string]string{envTracesExporter: "none", envMetricsExporter: "NONE"}, want: settings{}},
		{name: "environment overrides the config", c: on, env: map[string]string{envTracesProtocol: "http/protobuf", envEndpoint: "http://y:4318",
			envSampler: "always_on", envAttrLimit: "64", envCaptureContent: "false", envMetricInterval: "1000"},
			want: settings{traces: true, metrics: true, tracesProtocol: ProtocolHTTP, metricsProtocol: ProtocolGRPC, maxBytes: 64}},
		{name: "per-signal endpoint keeps the config's for the other", c: on, env: map[string]string{envTracesEndpoint: "http://t:4317"},
			want: settings{traces: true, metrics: true, tracesProtocol: ProtocolGRPC, metricsProtocol: ProtocolGRPC, metricsEndpoint: "http://collector:4317",
				sampleRatio: 0.25, maxBytes: 500, sdkLimit: true, content: true, interval: DefaultMetricsInterval}},
		{name: "content from the GenAI variable", c: Config{Enabled: true}, env: map[string]string{envCaptureContent: "SPAN_ONLY"},
			want: settings{traces: true, metrics: true, tracesProtocol: ProtocolHTTP, metricsProtocol: ProtocolHTTP, maxBytes: engine.DefaultMaxAttributeBytes,
				sdkLimit: true, content: true, interval: DefaultMetricsInterval}},
		{name: "bad protocol in the config", c: Config{Enabled: true, Protocol: "grpcs"}, wantErr: `telemetry.protocol "grpcs"`},
		{name: "bad protocol variable", c: on, env: map[string]string{envProtocol: "http/json"}, wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL "http/json"`},
		{name: "unsupported exporter", env: map[string]string{envTracesExporter: "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER="zipkin"`},
		{name: "bad disabled", env: map[string]string{envDisabled: "yes please"}, wantErr: "OTEL_SDK_DISABLED"},
		{name: "bad ratio", c: Config{Enabled: true, SampleRatio: 2}, wantErr: "telemetry.sample_ratio"},
		{name: "bad limit", c: on, env: map[string]string{envSpanAttrLimit: "-3"}, wantErr: envSpanAttrLimit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := resolve(c.c, env(c.env))
			if c.wantErr != "" {
				if !errors.Is(err, ErrSetting) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want ErrSetting naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// collector is an OTLP/HTTP receiver on 127.0.0.1 that counts what it got.
type collector struct {
	mu    sync.Mutex
	paths map[string]int
}

func newCollector(t *testing.T) (*collector, string) {
	c := &collector{paths: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		c.mu.Lock()
		if r.Header.Get("Content-Type") == "application/x-protobuf" {
			c.paths[r.URL.Path]++
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func (c *collector) got(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[path]
}

// Setup's providers export over OTLP/HTTP to the configured endpoint, and
// Shutdown flushes what was not exported yet.
func TestSetupExportsOnShutdown(t *testing.T) {
	col, url := newCollector(t)
	p, err := setup(context.Background(), Config{Enabled: true, Endpoint: url, ServiceVersion: "v9"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Telemetry.Enabled() {
		t.Fatal("telemetry is off")
	}
	_, span := p.Telemetry.Tracer().Start(context.Background(), "x")
	span.End()
	ctr, _ := p.Telemetry.Meter().Int64Counter("c")
	ctr.Add(context.Background(), 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if col.got("/v1/traces") != 1 || col.got("/v1/metrics") != 1 {
		t.Errorf("the collector got %v, want one trace and one metrics export", col.paths)
	}
}

// Off, Setup builds nothing, and Shutdown has nothing to do.
func TestSetupOff(t *testing.T) {
	p, err := setup(context.Background(), Config{}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p.Telemetry.Enabled() || len(p.shutdown) != 0 {
		t.Fatalf("telemetry is on: %+v", p.Telemetry)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A receiver that does not answer cannot hold Shutdown past its deadline.
func TestShutdownDeadline(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	p, err := setup(context.Background(), Config{Enabled: true, Endpoint: srv.URL}, env(map[string]string{envMetricsExporter: "none"}))
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Telemetry.Tracer().Start(context.Background(), "x")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Shutdown reported no error though nothing was exported")
		}
	case <-time.After(time.Minute): // generous: only a hang fails
		t.Fatal("Shutdown did not return after its deadline")
	}
}

// An unreachable gRPC collector holds Shutdown no longer than
// Config.ShutdownTimeout, even when the caller set no deadline, and the
// error names the signal, the endpoint and the protocol.
func TestShutdownUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close() // nothing listens there now: every export is refused
	p, err := setup(context.Background(), Config{Enabled: true, Protocol: ProtocolGRPC, Endpoint: endpoint, ShutdownTimeout: 200 * time.Millisecond},
		env(map[string]string{envMetricsExporter: "none"}))
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Telemetry.Tracer().Start(context.Background(), "x")
	span.End()
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "flushing traces to "+endpoint+" (grpc)") || !strings.Contains(err.Error(), "shutdown_timeout") {
			t.Errorf("Shutdown: %v, want an error naming the traces, %s and grpc", err, endpoint)
		}
	case <-time.After(time.Minute): // generous: only a hang fails
		t.Fatal("Shutdown did not return within its own bound")
	}
}
