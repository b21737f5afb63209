package pipeline

import (
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/morphhost/morph/engine"
)

// A run's trace: invoke_workflow <graph> with a morph.stage span per stage
// attempt under it, each with its node, attempt and status; a retried
// stage has one span per attempt, a failed one an error status.
func TestStageSpans(t *testing.T) {
	src := `digraph plan_build { start [shape=Mdiamond]; a [max_retries=1]; b; done [shape=Msquare]; start -> a -> b -> done }`
	r, _, _ := scriptedRunner(map[string][]StageStatus{"a": {StatusRetry, StatusSuccess}, "b": {StatusFail}})
	spans := tracetest.NewInMemoryExporter()
	r.Telemetry = engine.Telemetry{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))}
	res := runGraph(t, r, src)
	if res.State != RunFail {
		t.Fatalf("state %s, want fail", res.State)
	}
	var root tracetest.SpanStub
	var stages []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		switch s.Name {
		case "invoke_workflow plan_build":
			root = s
		default:
			stages = append(stages, s)
		}
	}
	if !root.SpanContext.IsValid() || root.Status.Code != codes.Error {
		t.Fatalf("workflow span %+v, want one with an error status", root)
	}
	type stage struct{ name, status, attempt string }
	var got []stage
	for _, s := range stages {
		if s.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Errorf("stage span %q is not under the run's", s.Name)
		}
		st := stage{name: s.Name}
		for _, kv := range s.Attributes {
			switch kv.Key {
			case attrStatus:
				st.status = kv.Value.AsString()
			case attrAttempt:
				st.attempt = kv.Value.String()
			}
		}
		got = append(got, st)
		if (st.status == string(StatusFail)) != (s.Status.Code == codes.Error) {
			t.Errorf("stage span %q: status %q, span status %v", s.Name, st.status, s.Status)
		}
	}
	want := []stage{{"morph.stage start", "success", "1"}, {"morph.stage a", "retry", "1"}, {"morph.stage a", "success", "2"}, {"morph.stage b", "fail", "1"}}
	if len(got) != len(want) {
		t.Fatalf("stage spans %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("stage span %d: %v, want %v", i, got[i], want[i])
		}
	}
}
