package config_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/telemetry"
)

// Each bad [telemetry] value is an error naming its key.
func TestTelemetryKeys(t *testing.T) {
	for key, content := range map[string]string{
		"telemetry.protocol":            `protocol = "grpcs"`,
		"telemetry.endpoint":            `endpoint = "collector:4318"`,
		"telemetry.sample_ratio":        `sample_ratio = 0.0`,
		"telemetry.max_attribute_bytes": `max_attribute_bytes = 0`,
		"telemetry.metrics_interval":    `metrics_interval = "10ms"`,
		"telemetry.shutdown_timeout":    `shutdown_timeout = "0s"`,
		"telemetry.headers":             `headers = "x"`,
	} {
		ce, _ := loadErr(t, "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[telemetry]\n"+content+"\n")
		if ce.Key != key {
			t.Errorf("%s: the error names %q: %v", content, ce.Key, ce)
		}
	}
}

// With [telemetry] on, a run's spans reach the configured OTLP endpoint
// when the runtime closes; a bad OTEL_* variable is a config error at
// [telemetry].
func TestTelemetryOpen(t *testing.T) {
	var traces atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/traces" {
			traces.Add(1)
		}
	}))
	defer srv.Close()
	dir := write(t, map[string]string{"morph.toml": `
[llm]
provider = "scripted"
scripted_replies = "replies.json"

[telemetry]
enabled = true
endpoint = "` + srv.URL + `"
`, "replies.json": replies})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	rt, err := cfg.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rt.Telemetry().Enabled() {
		t.Fatal("the runtime's telemetry is off")
	}
	if _, _, err := rt.Engine.Run(context.Background(), "test", cfg.RunOptions()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if traces.Load() == 0 {
		t.Error("no spans reached the endpoint by the runtime's Close")
	}

	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	_, err = cfg.Open(context.Background(), nil)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "telemetry" || !errors.Is(err, telemetry.ErrSetting) || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
		t.Errorf("a bad OTEL_TRACES_EXPORTER: %v", err)
	}
}
