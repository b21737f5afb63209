package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/llm"
)

// TelemetryScope is the instrumentation scope of morph's spans and metrics:
// the name of the tracer and the meter of every package of morph's.
const TelemetryScope = "github.com/morphhost/morph"

// TelemetrySchemaURL is the semantic conventions' version morph's spans
// and metrics follow (v1.41.0, the newest whose Go package has the GenAI
// attributes).
const TelemetrySchemaURL = semconv.SchemaURL

// DefaultMaxAttributeBytes caps an attribute value that a guest, the model
// or a remote server wrote (Telemetry.Value).
const DefaultMaxAttributeBytes = 1024

// Telemetry is where spans and metrics go: OpenTelemetry providers, as
// package telemetry sets them up from OTEL_* variables and [telemetry] in
// morph.toml. The zero value records nothing, at no cost: morph never
// falls back on the global providers (otel.GetTracerProvider), so an
// embedding host's own tracing does not pick up morph's spans unless it
// passes its providers here.
type Telemetry struct {
	TracerProvider trace.TracerProvider // nil: no spans
	MeterProvider  metric.MeterProvider // nil: no metrics
	// Provider is the model's gen_ai.provider.name ("openai"); empty: not
	// recorded (the scripted model is no registered provider).
	Provider string
	// RecordContent records prompts, replies, tool parameters and
	// results (gen_ai.input.messages, gen_ai.tool.call.arguments, ...),
	// escaped and capped like every other written value. Off, they are
	// never recorded.
	RecordContent bool
	// MaxAttributeBytes caps each attribute value written by a guest, the
	// model or a server; DefaultMaxAttributeBytes when zero.
	MaxAttributeBytes int
}

// Enabled reports whether t records anything.
func (t Telemetry) Enabled() bool { return t.TracerProvider != nil || t.MeterProvider != nil }

// Value is s, written by a guest, the model or a remote server, as an
// attribute value: escaped to one line (no control characters reach a
// trace viewer) and cut to MaxAttributeBytes, plus a note of what was
// cut ("... (N more bytes)": at most MaxNoteBytes).
func (t Telemetry) Value(s string) string {
	max := t.MaxAttributeBytes
	if max <= 0 {
		max = DefaultMaxAttributeBytes
	}
	if len(s) <= max {
		return safetext.Line(s, max)
	}
	// Escaping never shortens: the rest is cut off first, so that a
	// hostile megabyte is not escaped whole for a kilobyte of it.
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return safetext.Line(s[:cut], max) + fmt.Sprintf("... (%d more bytes)", len(s)-cut)
}

// MaxNoteBytes bounds what Value adds to MaxAttributeBytes: the notes of
// what it cut.
const MaxNoteBytes = 64

// Tracer is morph's tracer of t's provider; a no-op tracer without one.
func (t Telemetry) Tracer() trace.Tracer {
	if t.TracerProvider == nil {
		return tracenoop.NewTracerProvider().Tracer(TelemetryScope)
	}
	return t.TracerProvider.Tracer(TelemetryScope, trace.WithSchemaURL(TelemetrySchemaURL))
}

// Meter is morph's meter of t's provider; a no-op meter without one.
func (t Telemetry) Meter() metric.Meter {
	if t.MeterProvider == nil {
		return metricnoop.NewMeterProvider().Meter(TelemetryScope)
	}
	return t.MeterProvider.Meter(TelemetryScope, metric.WithSchemaURL(TelemetrySchemaURL))
}

// Error marks span failed with err, its message escaped and capped, and
// its error.type: what an ErrorType method in err's chain says (a
// plugin's fault kind: host.Error has one), else err's Go type.
func (t Telemetry) Error(span trace.Span, err error) {
	if err == nil || !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.ErrorType(err))
	span.SetStatus(codes.Error, t.Value(err.Error()))
}

// Attribute keys of morph's own (namespace morph.), beside the GenAI
// semantic conventions'.
const (
	AttrCost        = attribute.Key("morph.cost_usd")
	AttrEstimated   = attribute.Key("morph.usage.estimated")
	AttrTurn        = attribute.Key("morph.session.turn")
	AttrStep        = attribute.Key("morph.step")
	AttrSteps       = attribute.Key("morph.steps")
	AttrAction      = attribute.Key("morph.action")
	AttrStopReason  = attribute.Key("morph.stop_reason")
	AttrToolSource  = attribute.Key("morph.tool.source")
	AttrPlugin      = attribute.Key("morph.plugin")
	AttrHook        = attribute.Key("morph.hook")
	AttrOutcome     = attribute.Key("morph.outcome")
	AttrFault       = attribute.Key("morph.fault")
	AttrLLMProvider = attribute.Key("morph.llm.provider")
)

// WithTelemetry makes the engine record a span for every turn (invoke_agent),
// step, model call (chat), tool call (execute_tool) and hook call, with the
// GenAI semantic conventions' attributes, and their metrics. Without it,
// or with a zero Telemetry, nothing is recorded and nothing is spent.
func WithTelemetry(t Telemetry) Option {
	return func(e *Engine) { e.tel = newTracing(t) }
}

// tracing is an engine's Telemetry with its tracer and instruments; a nil
// *tracing records nothing, and its methods then cost a nil check.
type tracing struct {
	Telemetry
	tracer      trace.Tracer
	tokens      genaiconv.ClientTokenUsage
	opDuration  genaiconv.ClientOperationDuration
	cost        metric.Float64Counter
	toolCalls   metric.Int64Counter
	toolTime    metric.Float64Histogram
	hookCalls   metric.Int64Counter
	hookFaults  metric.Int64Counter
	hookTime    metric.Float64Histogram
	quarantines metric.Int64Counter
}

func newTracing(t Telemetry) *tracing {
	if !t.Enabled() {
		return nil
	}
	m := t.Meter()
	tr := &tracing{Telemetry: t, tracer: t.Tracer()}
	// The names are constants the SDK accepts; an instrument it refused
	// would still be a usable no-op, so the errors tell nothing to act on.
	tr.tokens, _ = genaiconv.NewClientTokenUsage(m)
	tr.opDuration, _ = genaiconv.NewClientOperationDuration(m)
	tr.cost, _ = m.Float64Counter("morph.llm.cost", metric.WithUnit("USD"), metric.WithDescription("The model calls' cost"))
	tr.toolCalls, _ = m.Int64Counter("morph.tool.calls", metric.WithUnit("{call}"), metric.WithDescription("Tool calls, by tool, source and outcome"))
	tr.toolTime, _ = m.Float64Histogram("morph.tool.duration", metric.WithUnit("s"), metric.WithDescription("Tool call durations"))
	tr.hookCalls, _ = m.Int64Counter("morph.hook.calls", metric.WithUnit("{call}"), metric.WithDescription("Middleware and engine hook calls, by plugin, hook and outcome"))
	tr.hookFaults, _ = m.Int64Counter("morph.hook.faults", metric.WithUnit("{call}"), metric.WithDescription("Hook calls that failed, panicked or timed out"))
	tr.hookTime, _ = m.Float64Histogram("morph.hook.duration", metric.WithUnit("s"), metric.WithDescription("Hook call durations"))
	tr.quarantines, _ = m.Int64Counter("morph.plugin.quarantines", metric.WithUnit("{quarantine}"), metric.WithDescription("Middleware put in quarantine after repeated faults"))
	return tr
}

// runTrace is a run's open spans: its turn's context, under which each
// step's span starts, and the step in progress.
type runTrace struct {
	turn context.Context
	step trace.Span
}

// startTurn starts the span of a turn (invoke_agent morph), returning the
// context its steps run in.
func (t *tracing) startTurn(ctx context.Context, rc *Context, opts RunOptions) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	ctx, span := t.tracer.Start(ctx, "invoke_agent morph", trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentName("morph"),
			semconv.GenAIConversationID(rc.SessionID), AttrTurn.Int(rc.Turn))
		if opts.Model != "" {
			span.SetAttributes(semconv.GenAIRequestModel(t.Value(opts.Model)))
		}
		if t.RecordContent {
			span.SetAttributes(semconv.GenAIInputMessagesKey.String(t.Value(rc.Task)))
		}
	}
	return ctx, span
}

// endTurn ends a turn's span with its totals and how it ended.
func (t *tracing) endTurn(span trace.Span, rc *Context, err error) {
	if t == nil {
		return
	}
	if span.IsRecording() {
		m := rc.Metrics
		span.SetAttributes(AttrStopReason.String(rc.StopReason), AttrSteps.Int(len(rc.Steps)),
			semconv.GenAIUsageInputTokens(m.InputTokens), semconv.GenAIUsageOutputTokens(m.OutputTokens),
			AttrCost.Float64(m.TotalCost), AttrEstimated.Bool(m.UsageEstimated))
		if t.RecordContent && len(rc.RawFinalAnswer) > 0 {
			span.SetAttributes(semconv.GenAIOutputMessagesKey.String(t.Value(string(rc.RawFinalAnswer))))
		}
		t.Error(span, err)
	}
	span.End()
}

// startStep starts step's span under the turn's and makes it the run's
// context until endStep.
func (t *tracing) startStep(r *run, step int) {
	if t == nil {
		return
	}
	if r.trace == nil {
		r.trace = &runTrace{turn: r.ctx}
	}
	t.endStep(r, nil) // a step that ended without a record
	r.ctx, r.trace.step = t.tracer.Start(r.trace.turn, "morph.step "+strconv.Itoa(step), trace.WithAttributes(AttrStep.Int(step)))
}

// endStep ends the step in progress, if any, with its record (nil when
// the step ended without one: the run failed or finished in it).
func (t *tracing) endStep(r *run, st *Step) {
	if t == nil || r.trace == nil || r.trace.step == nil {
		return
	}
	span := r.trace.step
	if st != nil && span.IsRecording() {
		span.SetAttributes(AttrAction.String(t.Value(st.Action)),
			semconv.GenAIUsageInputTokens(st.Usage.InputTokens), semconv.GenAIUsageOutputTokens(st.Usage.OutputTokens))
		if st.Error != "" {
			span.SetStatus(codes.Error, t.Value(st.Error))
		}
	}
	span.End()
	r.ctx, r.trace.step = r.trace.turn, nil
}

// chat is client.Chat(ctx, req) in a span of its own (chat <model>), with
// the request's parameters, the usage, the cost and the finish reason,
// and the GenAI client metrics.
func (t *tracing) chat(ctx context.Context, client llm.Client, req llm.Request) (llm.Result, error) {
	if t == nil {
		return client.Chat(ctx, req)
	}
	ctx, span := t.tracer.Start(ctx, "chat "+t.Value(req.Model), trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	started := time.Now()
	res, err := client.Chat(ctx, req)
	d := time.Since(started)
	base := []attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(t.Value(req.Model))}
	if t.Provider != "" {
		base = append(base, semconv.GenAIProviderNameKey.String(t.Provider))
	}
	if err != nil {
		base = append(base, semconv.ErrorType(err))
	}
	set := attribute.NewSet(base...)
	t.opDuration.Inst().Record(ctx, d.Seconds(), metric.WithAttributeSet(set))
	if err == nil {
		in := attribute.NewSet(append(base, semconv.GenAITokenTypeInput)...)
		out := attribute.NewSet(append(base, semconv.GenAITokenTypeOutput)...)
		t.tokens.Inst().Record(ctx, int64(res.Usage.InputTokens), metric.WithAttributeSet(in))
		t.tokens.Inst().Record(ctx, int64(res.Usage.OutputTokens), metric.WithAttributeSet(out))
		t.cost.Add(ctx, res.Usage.Cost, metric.WithAttributeSet(set))
	}
	if !span.IsRecording() {
		return res, err
	}
	span.SetAttributes(base...)
	span.SetAttributes(semconv.GenAIOutputTypeJSON, semconv.GenAIRequestStream(req.Stream != nil))
	for k, v := range req.Parameters {
		if kv, ok := parameterAttribute(k, v); ok {
			span.SetAttributes(kv)
		}
	}
	if t.RecordContent {
		if b, jerr := json.Marshal(req.Messages); jerr == nil {
			span.SetAttributes(semconv.GenAIInputMessagesKey.String(t.Value(string(b))))
		}
	}
	if err != nil {
		t.Error(span, err)
		return res, err
	}
	span.SetAttributes(semconv.GenAIUsageInputTokens(res.Usage.InputTokens), semconv.GenAIUsageOutputTokens(res.Usage.OutputTokens),
		AttrCost.Float64(res.Usage.Cost), AttrEstimated.Bool(res.UsageEstimated))
	if res.FinishReason != "" {
		span.SetAttributes(semconv.GenAIResponseFinishReasons(t.Value(res.FinishReason)))
	}
	if t.RecordContent {
		span.SetAttributes(semconv.GenAIOutputMessagesKey.String(t.Value(res.Text)))
	}
	return res, nil
}

// parameterAttribute is the GenAI request attribute of a model parameter
// the conventions name; false for the others.
func parameterAttribute(k string, v any) (attribute.KeyValue, bool) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return attribute.KeyValue{}, false
		}
	default:
		return attribute.KeyValue{}, false
	}
	switch k {
	case "temperature":
		return semconv.GenAIRequestTemperature(f), true
	case "top_p":
		return semconv.GenAIRequestTopP(f), true
	case "max_tokens", "max_completion_tokens":
		return semconv.GenAIRequestMaxTokens(int(f)), true
	case "seed":
		return semconv.GenAIRequestSeed(int(f)), true
	}
	return attribute.KeyValue{}, false
}

// toolSpan is a tool call's span in progress (execute_tool).
type toolSpan struct {
	t       *tracing
	span    trace.Span
	ctx     context.Context
	attrs   attribute.Set // of the metrics: tool and source
	started time.Time
}

// startTool starts the span of tool's call (execute_tool <tool>), of
// source (Registry.Source), returning the context the tool runs in.
func (t *tracing) startTool(ctx context.Context, reg *Registry, tool string, input map[string]any) (context.Context, toolSpan) {
	if t == nil {
		return ctx, toolSpan{}
	}
	source, _ := reg.Source(tool)
	kind := "extension" // a plugin's or an MCP server's
	if source == SourceBuiltin || source == SourceHost {
		kind = "function"
	}
	name := t.Value(tool)
	c := toolSpan{t: t, started: time.Now(), attrs: attribute.NewSet(semconv.GenAIToolName(name), AttrToolSource.String(t.Value(source)))}
	c.ctx, c.span = t.tracer.Start(ctx, "execute_tool "+name, trace.WithAttributes(semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(name), semconv.GenAIToolType(kind), AttrToolSource.String(t.Value(source))))
	if c.span.IsRecording() {
		if id := CallID(ctx); id != "" {
			c.span.SetAttributes(semconv.GenAIToolCallID(id))
		}
		if t.RecordContent {
			if b, err := json.Marshal(input); err == nil {
				c.span.SetAttributes(semconv.GenAIToolCallArgumentsKey.String(t.Value(string(b))))
			}
		}
	}
	return c.ctx, c
}

// end ends the tool call's span with its outcome and counts the call.
func (c toolSpan) end(res abi.ToolCallOutput, err error) {
	if c.t == nil {
		return
	}
	outcome := OutcomeOK
	if err != nil {
		outcome = OutcomeError
	}
	c.t.toolCalls.Add(c.ctx, 1, metric.WithAttributeSet(c.attrs), metric.WithAttributes(AttrOutcome.String(outcome)))
	c.t.toolTime.Record(c.ctx, time.Since(c.started).Seconds(), metric.WithAttributeSet(c.attrs))
	if c.span.IsRecording() {
		c.span.SetAttributes(AttrOutcome.String(outcome))
		if c.t.RecordContent && err == nil {
			c.span.SetAttributes(semconv.GenAIToolCallResultKey.String(c.t.Value(res.Output)))
		}
		c.t.Error(c.span, err)
	}
	c.span.End()
}

// hookSpan is a hook call's span in progress.
type hookSpan struct {
	t       *tracing
	span    trace.Span
	ctx     context.Context
	plugin  string
	hook    string
	started time.Time
}

// startHook starts the span of plugin's hook call (morph.hook <hook>),
// returning the context the hook runs in: ctx itself when nothing is
// recorded, so that a Bounded call's reused context stays reused.
func (t *tracing) startHook(ctx context.Context, plugin, hook string) (context.Context, hookSpan) {
	if t == nil {
		return ctx, hookSpan{}
	}
	c := hookSpan{t: t, plugin: t.Value(plugin), hook: hook, started: time.Now()}
	c.ctx, c.span = t.tracer.Start(ctx, "morph.hook "+hook, trace.WithAttributes(AttrHook.String(hook), AttrPlugin.String(c.plugin)))
	return c.ctx, c
}

// end ends the hook call's span with its outcome (Outcome*) and counts it.
func (c hookSpan) end(outcome string, err error) {
	if c.t == nil {
		return
	}
	attrs := metric.WithAttributes(AttrPlugin.String(c.plugin), AttrHook.String(c.hook), AttrOutcome.String(outcome))
	c.t.hookCalls.Add(c.ctx, 1, attrs)
	if err != nil {
		c.t.hookFaults.Add(c.ctx, 1, attrs)
	}
	c.t.hookTime.Record(c.ctx, time.Since(c.started).Seconds(), metric.WithAttributes(AttrPlugin.String(c.plugin), AttrHook.String(c.hook)))
	if c.span.IsRecording() {
		c.span.SetAttributes(AttrOutcome.String(outcome))
		c.t.Error(c.span, err)
	}
	c.span.End()
}

// quarantined counts a middleware's quarantine.
func (t *tracing) quarantined(ctx context.Context, plugin, hook string) {
	if t == nil {
		return
	}
	t.quarantines.Add(ctx, 1, metric.WithAttributes(AttrPlugin.String(t.Value(plugin)), AttrHook.String(hook)))
}
