package pipeline

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of a pipeline's spans, beside the GenAI conventions'.
const (
	attrRunID    = attribute.Key("morph.pipeline.run_id")
	attrNode     = attribute.Key("morph.pipeline.node")
	attrNodeType = attribute.Key("morph.pipeline.node_type")
	attrStatus   = attribute.Key("morph.pipeline.status")
	attrState    = attribute.Key("morph.pipeline.state")
	attrAttempt  = attribute.Key("morph.pipeline.attempt")
	attrBranch   = attribute.Key("morph.pipeline.branch")
)

// tracedLoop is loop in a span of the run (invoke_workflow <graph>), under
// which each stage's span (morph.stage <node>) and what the stage does (an
// agent's invoke_agent, a plugin's call) nest; without Runner.Telemetry,
// loop itself.
func (x *run) tracedLoop(ctx context.Context, cur string, prev *Outcome, via *Edge) (*Result, error) {
	t := x.r.Telemetry
	if t.TracerProvider == nil {
		return x.loop(ctx, cur, prev, via)
	}
	ctx, span := t.Tracer().Start(ctx, "invoke_workflow "+t.Value(x.g.Name), trace.WithAttributes(semconv.GenAIOperationNameInvokeWorkflow,
		semconv.GenAIWorkflowName(t.Value(x.g.Name)), attrRunID.String(x.cp.RunID)))
	defer span.End()
	res, err := x.loop(ctx, cur, prev, via)
	switch {
	case err != nil:
		t.Error(span, err)
	case res != nil:
		span.SetAttributes(attrState.String(res.State))
		if res.State != RunSuccess {
			span.SetStatus(codes.Error, t.Value(res.FailureReason))
		}
	}
	return res, err
}

// stageSpan is a stage attempt's span in progress; the zero value records
// nothing.
type stageSpan struct {
	x       *run
	span    trace.Span
	ctx     context.Context
	attrs   attribute.Set
	started time.Time
}

// startStage starts the span of an attempt at node (morph.stage <node>),
// returning the context its handler runs in.
func (x *run) startStage(ctx context.Context, node *Node, ex *Execution) (context.Context, stageSpan) {
	t := x.r.Telemetry
	if !t.Enabled() {
		return ctx, stageSpan{}
	}
	s := stageSpan{x: x, started: time.Now(), attrs: attribute.NewSet(attrNode.String(t.Value(node.ID)), attrNodeType.String(t.Value(node.Type())))}
	s.ctx, s.span = t.Tracer().Start(ctx, "morph.stage "+t.Value(node.ID), trace.WithAttributes(s.attrs.ToSlice()...),
		trace.WithAttributes(attrAttempt.Int(ex.Attempt)))
	if ex.Branch != "" && s.span.IsRecording() {
		s.span.SetAttributes(attrBranch.String(t.Value(ex.Branch)))
	}
	return s.ctx, s
}

// end ends the attempt's span with its outcome, and records its duration.
func (s stageSpan) end(out *Outcome) {
	if s.x == nil {
		return
	}
	t := s.x.r.Telemetry
	status := ""
	if out != nil {
		status = string(out.Status)
	}
	s.x.stageTimeOnce.Do(func() {
		s.x.stageTime, _ = t.Meter().Float64Histogram("morph.pipeline.stage.duration", metric.WithUnit("s"),
			metric.WithDescription("Pipeline stage attempts' durations, by node and status"))
	})
	if s.x.stageTime != nil {
		s.x.stageTime.Record(s.ctx, time.Since(s.started).Seconds(), metric.WithAttributeSet(s.attrs), metric.WithAttributes(attrStatus.String(status)))
	}
	if s.span.IsRecording() {
		s.span.SetAttributes(attrStatus.String(status))
		if out != nil && out.Status == StatusFail {
			s.span.SetStatus(codes.Error, t.Value(out.FailureReason))
		}
		if out != nil && (out.Usage.InputTokens > 0 || out.Usage.OutputTokens > 0) {
			s.span.SetAttributes(semconv.GenAIUsageInputTokens(out.Usage.InputTokens), semconv.GenAIUsageOutputTokens(out.Usage.OutputTokens))
		}
	}
	s.span.End()
}
