package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/morphhost/morph/engine"
)

// tracedLoader is a loader and an engine option recording into memory.
func tracedLoader(t *testing.T, maxBytes int) (*Loader, engine.Telemetry, *tracetest.InMemoryExporter, *sdkmetric.ManualReader) {
	t.Helper()
	spans, metrics := tracetest.NewInMemoryExporter(), sdkmetric.NewManualReader()
	tel := engine.Telemetry{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics)), MaxAttributeBytes: maxBytes}
	l, err := NewLoader(LoaderOptions{CacheDir: t.TempDir(), Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, tel, spans, metrics
}

func spanAttr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// A WebAssembly tool's call is a morph.plugin.call span under its
// execute_tool span, naming the plugin, the export and the loader, and a
// hook's under its hook's span; a trapping middleware's calls carry their
// fault kind; a hostile plugin's
// name and error text arrive escaped; the metrics count calls, faults and
// the plugins' instances.
func TestPluginCallSpans(t *testing.T) {
	l, tel, spans, metrics := tracedLoader(t, 200)
	tool := l.Extender(Config{Path: fixture(t, "echo_tool")}, engine.MiddlewareConfig{})
	trapper := l.Extender(Config{Path: fixture(t, "mw_trap")}, engine.MiddlewareConfig{})
	hostile := l.Extender(Config{Path: fixture(t, "hostile_run")}, engine.MiddlewareConfig{})
	m := &scriptModel{replies: []string{
		`{"type":"tool_call","tool_call":{"tool_name":"echo_input","tool_params":{"text":"hi"}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"fetch","tool_params":{"q\u009b\u202e":"x"}}}`,
		`{"type":"final","final":{"output":"done"}}`,
	}}
	e := engine.New(m, nil, engine.WithExtenders(tool, trapper, hostile), engine.WithTelemetry(tel))
	defer e.Close(context.Background())
	final, rc, err := e.Run(context.Background(), "t", engine.RunOptions{})
	checkFinal(t, "run", final, err, "done")
	if obs := rc.Steps[1].Observation; !strings.Contains(obs, "store") {
		t.Fatalf("the hostile tool's observation %q, want its error", obs)
	}

	all := spans.GetSpans()
	byID := map[string]tracetest.SpanStub{}
	for _, s := range all {
		byID[s.SpanContext.SpanID().String()] = s
	}
	parentName := func(s tracetest.SpanStub) string { return byID[s.Parent.SpanID().String()].Name }
	var echoCall, fetchCall, trapCall *tracetest.SpanStub
	for i, s := range all {
		if s.Name != "morph.plugin.call morph_call_tool" && s.Name != "morph.plugin.call morph_on_action" {
			continue
		}
		switch {
		case spanAttr(s, "morph.plugin") == "echo_tool":
			echoCall = &all[i]
		case s.Name == "morph.plugin.call morph_call_tool":
			fetchCall = &all[i]
		case spanAttr(s, "morph.plugin") == "mw_trap" && trapCall == nil:
			trapCall = &all[i]
		}
	}
	if echoCall == nil || fetchCall == nil || trapCall == nil {
		names := []string{}
		for _, s := range all {
			names = append(names, s.Name+"("+spanAttr(s, "morph.plugin")+")")
		}
		t.Fatalf("missing plugin call spans (echo %v, fetch %v, trap %v) among %q", echoCall != nil, fetchCall != nil, trapCall != nil, names)
	}
	if got := parentName(*echoCall); got != "execute_tool echo_input" {
		t.Errorf("echo_tool's call is under %q, want execute_tool echo_input", got)
	}
	// echo_tool answers its input as a guest-reported error.
	if spanAttr(*echoCall, "morph.loader") != "morph-abi-v1" || spanAttr(*echoCall, "morph.plugin.export") != "morph_call_tool" ||
		spanAttr(*echoCall, "morph.fault") != "guest" || echoCall.Status.Code != codes.Error {
		t.Errorf("echo_tool's call span: %v %v", echoCall.Attributes, echoCall.Status)
	}
	if got := parentName(*trapCall); got != "morph.hook on_action" {
		t.Errorf("mw_trap's call is under %q, want its hook's span", got)
	}
	if spanAttr(*trapCall, "morph.fault") != "trap" || spanAttr(*trapCall, "error.type") != "trap" || trapCall.Status.Code != codes.Error {
		t.Errorf("mw_trap's call span: %v %v", trapCall.Attributes, trapCall.Status)
	}
	// The hostile plugin's name and error text: escaped, and capped.
	for what, s := range map[string]string{"plugin": spanAttr(*fetchCall, "morph.plugin"), "status": fetchCall.Status.Description} {
		if strings.ContainsAny(s, "\x1b\u009b\u202e\n") || len(s) > 200+engine.MaxNoteBytes {
			t.Errorf("hostile %s in the span not escaped or capped: %q", what, s)
		}
	}
	if spanAttr(*fetchCall, "morph.fault") != "guest" || !strings.Contains(fetchCall.Status.Description, `store \x1b[31mdown`) {
		t.Errorf("hostile tool's call span: fault %q, status %q", spanAttr(*fetchCall, "morph.fault"), fetchCall.Status.Description)
	}

	var rm metricdata.ResourceMetrics
	if err := metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					plugin, _ := p.Attributes.Value(engine.AttrPlugin)
					fault, _ := p.Attributes.Value(engine.AttrFault)
					sums[mt.Name+" "+plugin.AsString()+" "+fault.AsString()] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if plugin, _ := p.Attributes.Value(engine.AttrPlugin); plugin.AsString() == "echo_tool" && mt.Name == "morph.plugin.instances" {
						sums["instances echo_tool"] = p.Value
					}
				}
			}
		}
	}
	for key, want := range map[string]int64{"morph.plugin.faults mw_trap trap": 2, "morph.plugin.calls echo_tool ": 1, "instances echo_tool": 1} {
		if sums[key] < want {
			t.Errorf("metric %q = %d, want at least %d (all: %v)", key, sums[key], want, sums)
		}
	}
}

// A loader without telemetry records nothing and spends nothing on it.
func TestPluginCallUntraced(t *testing.T) {
	l := newLoader(t)
	p := load(t, l, Config{Path: fixture(t, "echo_tool")})
	if p.tel != nil || l.tel != nil {
		t.Fatal("a loader without Telemetry traces")
	}
}

// BenchmarkTracedTurn is BenchmarkMiddlewareTurn's turn through 16
// plugins' hooks, without telemetry ("off") and with every span recorded
// ("on": an SDK provider sampling everything, exporting nowhere, and a
// metrics reader): what tracing costs a turn. Compare cpu-ns/op.
func BenchmarkTracedTurn(b *testing.B) {
	ctx := context.Background()
	for _, on := range []bool{false, true} {
		var tel engine.Telemetry
		name := "off"
		if on {
			tel = engine.Telemetry{TracerProvider: sdktrace.NewTracerProvider(), MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))}
			name = "on"
		}
		l, err := NewLoader(LoaderOptions{CacheDir: b.TempDir(), Telemetry: tel})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close(ctx) })
		opts := []engine.Option{engine.WithTelemetry(tel)}
		for i := range 16 {
			opts = append(opts, engine.WithExtenders(l.Extender(Config{Path: fixture(b, "mw_observe"), Name: fmt.Sprintf("mw%d", i)}, engine.MiddlewareConfig{})))
		}
		e := engine.New(finalOnly{}, nil, opts...)
		if err := e.Initialize(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close(ctx) })
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				if _, _, err := e.ResumeSession("bench", nil).RunTurn(ctx, "q", engine.RunOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// A guest's fault message of terminal escapes, tens of kilobytes of them
// (echo_tool answers its input as its error, and holds no more; the
// engine's test sends a megabyte), reaches the span escaped and capped.
func TestPluginCallHostileFault(t *testing.T) {
	l, _, spans, _ := tracedLoader(t, 300)
	p := load(t, l, Config{Path: fixture(t, "echo_tool")})
	// Raw, as a guest's own text would be: not JSON's escapes.
	in := []byte(`{"tool":"echo_input","params":{"text":"` + strings.Repeat("\x1b[2J\u202e\n", 1<<11) + `"}}`)
	if _, err := p.Call(context.Background(), "morph_call_tool", in); !errors.Is(err, ErrGuest) {
		t.Fatalf("call: %v, want the guest's error", err)
	}
	got := spans.GetSpans()
	if len(got) != 1 || got[0].Status.Code != codes.Error {
		t.Fatalf("spans %v, want one failed call", got)
	}
	desc := got[0].Status.Description
	if strings.ContainsAny(desc, "\x1b\u202e\n") || len(desc) > 300+engine.MaxNoteBytes || !strings.Contains(desc, `\x1b[2J`) {
		t.Errorf("the fault's %d bytes in the span, want at most %d, escaped: %.120q", len(desc), 300+engine.MaxNoteBytes, desc)
	}
}
