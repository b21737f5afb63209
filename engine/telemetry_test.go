package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/morphhost/morph/abi"
)

// recorded is an in-memory Telemetry and what it recorded.
type recorded struct {
	spans   *tracetest.InMemoryExporter
	metrics *sdkmetric.ManualReader
	tel     Telemetry
}

func newRecorded(content bool, maxBytes int) *recorded {
	r := &recorded{spans: tracetest.NewInMemoryExporter(), metrics: sdkmetric.NewManualReader()}
	r.tel = Telemetry{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.metrics)), RecordContent: content, MaxAttributeBytes: maxBytes}
	return r
}

// byName is the ended spans by name, but for the model calls (every step
// has one); a name given twice fails t.
func (r *recorded) byName(t *testing.T) map[string]tracetest.SpanStub {
	t.Helper()
	out := map[string]tracetest.SpanStub{}
	for _, s := range r.spans.GetSpans() {
		if strings.HasPrefix(s.Name, "chat ") {
			continue
		}
		if _, dup := out[s.Name]; dup {
			t.Fatalf("two spans named %q", s.Name)
		}
		out[s.Name] = s
	}
	return out
}

// sum is the sum of the counter name's points whose attributes include
// every one of match.
func (r *recorded) sum(t *testing.T, name string, match ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != name || !ok {
				continue
			}
		points:
			for _, p := range sum.DataPoints {
				for _, kv := range match {
					if v, ok := p.Attributes.Value(kv.Key); !ok || v != kv.Value {
						continue points
					}
				}
				n += p.Value
			}
		}
	}
	return n
}

func attr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// A run's trace: the turn, a span per step under it, the model calls and
// the tool and hook calls under their step, with the GenAI attributes; a
// hostile middleware's error (1 MB, a terminal escape) arrives escaped and
// capped; the metrics count the calls, the fault and the quarantine.
func TestTelemetrySpanTree(t *testing.T) {
	rec := newRecorded(false, 300)
	hostile := strings.Repeat("\x1b[31mred", 1<<18) // 1 MB
	flaky := &Funcs{ID: "flaky\x1b]0;title\a", BeforeToolCall: func(context.Context, abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
		return abi.BeforeToolCallOutput{}, errors.New(hostile)
	}}
	m := script(toolCall("echo", `{"text":"secret-param"}`), finalReply("done"))
	e := New(m, registry(echoTool()), WithMiddleware(flaky, MiddlewareConfig{QuarantineAfter: 1}), WithTelemetry(rec.tel))
	final, rc, err := e.Run(context.Background(), "the secret task", RunOptions{Model: "m1", Parameters: map[string]any{"temperature": 0.5}})
	checkRun(t, final, rc, err, "done", StopFinal)

	spans := rec.byName(t)
	names := make([]string, 0, len(spans))
	for n := range spans {
		names = append(names, n)
	}
	turn, ok := spans["invoke_agent morph"]
	if !ok {
		t.Fatalf("no turn span among %q", names)
	}
	parent := func(child, want string) {
		t.Helper()
		c, ok := spans[child]
		if !ok {
			t.Fatalf("no span %q among %q", child, names)
		}
		if c.Parent.SpanID() != spans[want].SpanContext.SpanID() || c.SpanContext.TraceID() != turn.SpanContext.TraceID() {
			t.Errorf("span %q: parent %s, want %q's %s", child, c.Parent.SpanID(), want, spans[want].SpanContext.SpanID())
		}
	}
	if turn.Parent.IsValid() {
		t.Errorf("the turn's span has a parent: %v", turn.Parent)
	}
	parent("morph.step 1", "invoke_agent morph")
	parent("morph.step 2", "invoke_agent morph")
	parent("execute_tool echo", "morph.step 1")
	parent("morph.hook before_tool_call", "morph.step 1")
	// Both model calls are "chat m1": one span name, two spans.
	var chats int
	for _, s := range rec.spans.GetSpans() {
		if s.Name != "chat m1" {
			continue
		}
		chats++
		if v, _ := attr(s, "gen_ai.usage.input_tokens"); v.AsInt64() != 10 {
			t.Errorf("chat span input tokens %v, want the scripted 10", v.String())
		}
		if v, _ := attr(s, "gen_ai.request.temperature"); v.AsFloat64() != 0.5 {
			t.Errorf("chat span temperature %v, want 0.5", v.String())
		}
		if s.Parent.SpanID() != spans["morph.step 1"].SpanContext.SpanID() && s.Parent.SpanID() != spans["morph.step 2"].SpanContext.SpanID() {
			t.Errorf("a chat span is not under a step")
		}
	}
	if chats != 2 {
		t.Errorf("%d chat spans, want 2", chats)
	}
	tool := spans["execute_tool echo"]
	for key, want := range map[string]string{"gen_ai.tool.name": "echo", "gen_ai.tool.type": "function", "morph.tool.source": "host",
		"gen_ai.operation.name": "execute_tool", "morph.outcome": "ok"} {
		if v, _ := attr(tool, key); v.AsString() != want {
			t.Errorf("tool span %s = %q, want %q", key, v.AsString(), want)
		}
	}
	if v, _ := attr(tool, "gen_ai.tool.call.id"); v.AsString() == "" {
		t.Error("tool span has no gen_ai.tool.call.id")
	}
	if v, _ := attr(turn, "morph.stop_reason"); v.AsString() != StopFinal {
		t.Errorf("turn stop reason %q", v.AsString())
	}
	if v, _ := attr(turn, "gen_ai.usage.output_tokens"); v.AsInt64() != 10 {
		t.Errorf("turn output tokens %v, want 2 calls x 5", v.String())
	}

	hook := spans["morph.hook before_tool_call"]
	if hook.Status.Code != codes.Error {
		t.Errorf("the failed hook's span status %v, want Error", hook.Status)
	}
	plugin, _ := attr(hook, "morph.plugin")
	for what, s := range map[string]string{"status": hook.Status.Description, "plugin": plugin.AsString()} {
		if strings.ContainsAny(s, "\x1b\a") || len(s) > 300+MaxNoteBytes {
			t.Errorf("hook span %s not escaped and capped at 300 bytes: %d bytes %q...", what, len(s), s[:min(len(s), 60)])
		}
	}
	if !strings.Contains(hook.Status.Description, `\x1b[31mred`) {
		t.Errorf("hook span status does not show the escaped message: %q", hook.Status.Description)
	}
	// Content is off: neither the task nor the tool's parameters are anywhere.
	for _, s := range rec.spans.GetSpans() {
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); strings.Contains(v, "secret") {
				t.Errorf("span %q attribute %s holds content with record_content off: %q", s.Name, kv.Key, v)
			}
		}
	}

	if n := rec.sum(t, "morph.tool.calls", attribute.String("gen_ai.tool.name", "echo"), attribute.String("morph.outcome", "ok")); n != 1 {
		t.Errorf("morph.tool.calls = %d, want 1", n)
	}
	if n := rec.sum(t, "morph.hook.faults", attribute.String("morph.hook", abi.HookBeforeToolCall)); n != 1 {
		t.Errorf("morph.hook.faults = %d, want 1", n)
	}
	if n := rec.sum(t, "morph.plugin.quarantines"); n != 1 {
		t.Errorf("morph.plugin.quarantines = %d, want 1", n)
	}
}

// With record_content the task, the replies and the tool's parameters are
// recorded, escaped and capped.
func TestTelemetryRecordContent(t *testing.T) {
	rec := newRecorded(true, 0)
	m := script(toolCall("echo", `{"text":"param\u001b"}`), finalReply("done"))
	e := New(m, registry(echoTool()), WithTelemetry(rec.tel))
	final, rc, err := e.Run(context.Background(), "the task"+strings.Repeat("x", 5000), RunOptions{})
	checkRun(t, final, rc, err, "done", StopFinal)
	spans := rec.byName(t)
	in, _ := attr(spans["invoke_agent morph"], "gen_ai.input.messages")
	if !strings.HasPrefix(in.AsString(), "the task") || len(in.AsString()) > DefaultMaxAttributeBytes+MaxNoteBytes {
		t.Errorf("turn input %d bytes %q..., want the task capped at %d", len(in.AsString()), in.AsString()[:min(20, len(in.AsString()))], DefaultMaxAttributeBytes)
	}
	args, _ := attr(spans["execute_tool echo"], "gen_ai.tool.call.arguments")
	if !strings.Contains(args.AsString(), "param") || strings.Contains(args.AsString(), "\x1b") {
		t.Errorf("tool arguments %q, want the parameters escaped", args.AsString())
	}
	res, _ := attr(spans["execute_tool echo"], "gen_ai.tool.call.result")
	if !strings.HasPrefix(res.AsString(), "echo: param") {
		t.Errorf("tool result %q", res.AsString())
	}
}

// An engine without WithTelemetry records nothing, even when the process
// has a global tracer provider: morph does not trace behind the embedding
// host's back.
func TestTelemetryOffIgnoresGlobal(t *testing.T) {
	rec := newRecorded(false, 0)
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(rec.tel.TracerProvider)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	e := New(script(toolCall("echo", `{"text":"a"}`), finalReply("done")), registry(echoTool()))
	final, rc, err := e.Run(context.Background(), "t", RunOptions{})
	checkRun(t, final, rc, err, "done", StopFinal)
	if spans := rec.spans.GetSpans(); len(spans) != 0 {
		t.Errorf("%d spans recorded without WithTelemetry, want none", len(spans))
	}
}

// A failed model call ends the step and the turn with an error status.
func TestTelemetryModelFailure(t *testing.T) {
	rec := newRecorded(false, 0)
	m := &model{replies: []reply{{err: errors.New("server gone")}}}
	_, _, err := New(m, nil, WithTelemetry(rec.tel)).Run(context.Background(), "t", RunOptions{Model: "m"})
	if err == nil {
		t.Fatal("the run succeeded")
	}
	spans := rec.byName(t)
	if s, ok := spans["invoke_agent morph"]; !ok || s.Status.Code != codes.Error {
		t.Errorf("turn span: status %v (present %v), want Error", s.Status, ok)
	}
	if all := rec.spans.GetSpans(); len(all) != 3 || all[0].Name != "chat m" || all[0].Status.Code != codes.Error {
		t.Errorf("spans %v, want the failed chat m first, of 3", all)
	}
	if _, ok := spans["morph.step 1"]; !ok {
		t.Error("the failed step's span did not end")
	}
}
