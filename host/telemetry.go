package host

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/morphhost/morph/engine"
)

// Attribute keys of a plugin call's span and metrics, beside the engine's
// (engine.AttrPlugin, engine.AttrFault).
const (
	attrExport = attribute.Key("morph.plugin.export")
	attrLoader = attribute.Key("morph.loader")
)

// kindNames are the short names of the failure kinds: a span's error.type
// and morph.fault, a metric's attribute.
var kindNames = []struct {
	kind error
	name string
}{
	{ErrTimeout, "timeout"}, {ErrCanceled, "canceled"}, {ErrTrap, "trap"}, {ErrInputTooLarge, "input_too_large"},
	{ErrOutputTooLarge, "output_too_large"}, {ErrBadOutput, "bad_output"}, {ErrABIMismatch, "abi_mismatch"},
	{ErrGuest, "guest"}, {ErrLoad, "load"}, {ErrClosed, "closed"}, {ErrNotGranted, "not_granted"},
	{ErrSessionLimit, "session_limit"},
}

// KindName is the short name of err's kind of plugin failure ("trap",
// "timeout", "bad_output", ...: ErrTrap's, ErrTimeout's, ...), "error"
// for an error of none of them, "" for nil.
func KindName(err error) string {
	if err == nil {
		return ""
	}
	for _, k := range kindNames {
		if errors.Is(err, k.kind) {
			return k.name
		}
	}
	return "error"
}

// ErrorType is the failure's kind (KindName): its error.type in a trace.
func (e *Error) ErrorType() string { return KindName(e) }

// tracing is a loader's engine.Telemetry with its tracer and instruments;
// nil records nothing.
type tracing struct {
	engine.Telemetry
	tracer    trace.Tracer
	meter     metric.Meter
	calls     metric.Int64Counter
	faults    metric.Int64Counter
	instances metric.Int64ObservableGauge
	memory    metric.Int64ObservableGauge
}

func newTracing(t engine.Telemetry) *tracing {
	if !t.Enabled() {
		return nil
	}
	m := t.Meter()
	tr := &tracing{Telemetry: t, tracer: t.Tracer(), meter: m}
	// Constant names the SDK accepts: an error would leave a usable no-op.
	tr.calls, _ = m.Int64Counter("morph.plugin.calls", metric.WithUnit("{call}"), metric.WithDescription("Calls into plugins, by plugin and export"))
	tr.faults, _ = m.Int64Counter("morph.plugin.faults", metric.WithUnit("{call}"), metric.WithDescription("Plugin calls that failed, by plugin and kind (morph.fault)"))
	tr.instances, _ = m.Int64ObservableGauge("morph.plugin.instances", metric.WithUnit("{instance}"), metric.WithDescription("A plugin's idle instances"))
	tr.memory, _ = m.Int64ObservableGauge("morph.plugin.memory", metric.WithUnit("By"), metric.WithDescription("The resident memory of a plugin's instances"))
	return tr
}

// pluginTracing is a loaded plugin's: its name, escaped and capped once,
// and the registration of its gauges' callback.
type pluginTracing struct {
	*tracing
	plugin attribute.KeyValue
	loader attribute.KeyValue
	gauges metric.Registration
}

// plugin readies the tracing of p, loaded, and registers its gauges
// (instances, memory), which the meter reads at each export; nil when the
// loader records nothing.
func (t *tracing) plugin(p *Plugin) *pluginTracing {
	if t == nil {
		return nil
	}
	pt := &pluginTracing{tracing: t, plugin: engine.AttrPlugin.String(t.Value(p.name)), loader: attrLoader.String(p.loader)}
	pt.gauges, _ = t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		m := p.Memory()
		attrs := metric.WithAttributes(pt.plugin)
		o.ObserveInt64(t.instances, int64(m.Instances), attrs)
		o.ObserveInt64(t.memory, int64(m.Resident), attrs) // the pages its instances wrote: what it costs
		return nil
	}, t.instances, t.memory)
	return pt
}

// close unregisters the plugin's gauges.
func (pt *pluginTracing) close() {
	if pt != nil && pt.gauges != nil {
		_ = pt.gauges.Unregister() // fails only when already unregistered
	}
}

// pluginCall is a plugin call's span in progress.
type pluginCall struct {
	pt     *pluginTracing
	span   trace.Span
	ctx    context.Context
	export string
}

// start starts the span of a call of export (morph.plugin.call <export>),
// the ABI boundary of every hook, tool, stage and lifecycle call.
func (pt *pluginTracing) start(ctx context.Context, export string) (context.Context, pluginCall) {
	if pt == nil {
		return ctx, pluginCall{}
	}
	c := pluginCall{pt: pt, export: export}
	c.ctx, c.span = pt.tracer.Start(ctx, "morph.plugin.call "+export, trace.WithAttributes(pt.plugin, pt.loader, attrExport.String(export)))
	return c.ctx, c
}

// end ends the call's span with its failure, its kind as morph.fault and
// error.type, and counts it.
func (c pluginCall) end(err error) {
	if c.pt == nil {
		return
	}
	attrs := metric.WithAttributes(c.pt.plugin, attrExport.String(c.export))
	c.pt.calls.Add(c.ctx, 1, attrs)
	if err != nil {
		kind := KindName(err)
		c.pt.faults.Add(c.ctx, 1, metric.WithAttributes(c.pt.plugin, engine.AttrFault.String(kind)))
		if c.span.IsRecording() {
			c.span.SetAttributes(engine.AttrFault.String(kind))
			c.pt.Error(c.span, err)
		}
	}
	c.span.End()
}
