package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/pipeline"
)

// Pipeline stage handlers (abi/SPEC.md section 11): a plugin's
// morph_handle_stage run as a pipeline.Handler. Hostile guests fail their
// stage, within their deadline, and leave the host serving; the example
// plugin examples/pipelines/verify runs through the handler interface and
// through a real pipeline run.

// stageGuest is a module whose morph_handle_stage runs attack, then answers
// reply (see guestModule).
func stageGuest(name, reply string) guestModule {
	return guestModule{name: name, as: abi.HookHandleStage, reply: reply}
}

// stageOf loads g and returns its plugin and stage handler.
func stageOf(t *testing.T, l *Loader, g guestModule, limits Limits) (*Plugin, *StageHandler) {
	t.Helper()
	p := load(t, l, Config{Wasm: g.wasm(), Limits: limits})
	h, ok := p.StageHandler()
	if !ok {
		t.Fatalf("plugin %s: no stage handler (hooks %v)", p.Name(), p.Hooks())
	}
	return p, h
}

// stageNode is the node the tests run: a verify stage named check.
// checkOutcome checks a stage's outcome, named what: its Status and
// PreferredLabel, and the value of each key of updates in its
// ContextUpdates.
func checkOutcome(t *testing.T, what string, out *pipeline.Outcome, status pipeline.StageStatus, label string, updates map[string]any) {
	t.Helper()
	if out.Status != status {
		t.Errorf("%s: Status = %q, want %q (failure reason %q)", what, out.Status, status, out.FailureReason)
	}
	if out.PreferredLabel != label {
		t.Errorf("%s: PreferredLabel = %q, want %q", what, out.PreferredLabel, label)
	}
	for key, want := range updates {
		if got := out.ContextUpdates[key]; got != want {
			t.Errorf("%s: ContextUpdates[%q] = %#v, want %#v", what, key, got, want)
		}
	}
}

// checkFailed checks that a stage, named what, ran to an outcome that is a
// FAIL whose reason says reason.
func checkFailed(t *testing.T, what string, out *pipeline.Outcome, err error, reason string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if out == nil {
		t.Fatalf("%s: no outcome", what)
	}
	if out.Status != pipeline.StatusFail {
		t.Errorf("%s: Status = %q, want %q", what, out.Status, pipeline.StatusFail)
	}
	if !strings.Contains(out.FailureReason, reason) {
		t.Errorf("%s: FailureReason = %q, want it to say %q", what, out.FailureReason, reason)
	}
}

func stageNode() *pipeline.Node {
	return &pipeline.Node{ID: "check", Attrs: map[string]string{"type": "wasm:hostile", "marker": "tests pass"}}
}

// stageContext is a run's context after an implement stage.
func stageContext() *pipeline.Context {
	pctx := pipeline.NewContext()
	pctx.Set(pipeline.KeyGoal, "Make the tests pass")
	pctx.Set(pipeline.KeyLastResponse, "go test ./...: ok, tests pass")
	pctx.Set("implement.output", "go test ./...: ok, tests pass")
	return pctx
}

// guestErrorBody is a morph_handle_stage that answers reply as a
// guest-reported error (native loader).
func guestErrorBody(reply string) []byte {
	return append(append([]byte{0, 0x42}, sleb(int64(guestAnswerAt)<<32|int64(len(reply))|abi.ErrorFlag)...), 0x0B)
}

// Every way a guest can fail a stage is a FAIL outcome, never an error or
// a panic, within the call's deadline, whose reason names the node and the
// plugin and says what went wrong, escaped; Call tells the kind; and the
// host goes on: the plugin's next call runs on a fresh instance, and a good
// plugin of the same loader still succeeds.
func TestStageHostile(t *testing.T) {
	const timeout = 300 * time.Millisecond
	manyKeys := map[string]int{}
	for i := range abi.MaxStageContextUpdates + 1 {
		manyKeys[fmt.Sprint("k", i)] = i
	}
	many, _ := json.Marshal(map[string]any{"status": "success", "context_updates": manyKeys})
	// 300 KiB of context update, written by the guest: a reply of its data
	// segment longer than 2 KiB would lie under the input (guestModule).
	hugePrefix, hugeSuffix := `{"status":"success","context_updates":{"log":"`, `"}}`
	cases := []struct {
		name   string
		g      guestModule
		limits Limits
		kind   error
		want   string
		native bool // a hand-written hook body: the native loader only
	}{
		{name: "infinite loop", g: guestModule{attack: forever(nil)}, limits: Limits{Timeout: timeout},
			kind: ErrTimeout, want: "plugin call timed out"},
		{name: "trap", g: guestModule{attack: []byte{0x00}}, kind: ErrTrap, want: "plugin trapped"},
		{name: "bad JSON", g: guestModule{reply: "\x1b[2J\u202enot JSON"}, kind: ErrBadOutput,
			want: `plugin output invalid: \x1b[2J\u202enot JSON: invalid character`},
		{name: "bad status", g: guestModule{reply: `{"status":"done","notes":"\u001b[31m"}`}, kind: ErrBadOutput,
			want: `status "done": want one of success, fail, partial_success, retry, skipped`},
		{name: "huge output", g: guestModule{reply: `{"status":"success","notes":"` + strings.Repeat("n", 8<<10) + `"}`},
			limits: Limits{MaxOutputBytes: 4 << 10}, kind: ErrOutputTooLarge, want: "plugin output too large"},
		{name: "too many context updates", g: guestModule{reply: string(many)}, kind: ErrBadOutput,
			want: "context_updates: 65 keys, more than 64"},
		{name: "huge context updates", g: guestModule{reply: hugePrefix + hugeSuffix, hook: spliceBody(hugePrefix, hugeSuffix, 300<<10),
			memory: []byte{0, 8}}, kind: ErrBadOutput, want: `context_updates: more than 262144 bytes of keys and JSON values (at key "log")`,
			native: true},
		{name: "runner's key", g: guestModule{reply: `{"status":"success","context_updates":{"internal.retry_count.check":0}}`},
			kind: ErrBadOutput, want: `context_updates: key "internal.retry_count.check" is the pipeline runner's`},
		{name: "empty answer", g: guestModule{hook: []byte{0, 0x42, 0, 0x0B}}, kind: ErrBadOutput,
			want: `status "": want one of`, native: true},
		{name: "guest error", g: guestModule{reply: "no verdict \x1b]0;pwned\x07", hook: guestErrorBody("no verdict \x1b]0;pwned\x07")},
			kind: ErrGuest, want: `plugin reported an error: no verdict \x1b]0;pwned\a`, native: true},
	}
	for _, lc := range loaders {
		l := newLoader(t)
		_, good := stageOf(t, l, lc.as(stageGuest("good", `{"status":"success"}`)), Limits{})
		for _, c := range cases {
			if c.native && lc.name != LoaderNative {
				continue
			}
			t.Run(lc.name+"/"+c.name, func(t *testing.T) {
				g := c.g
				g.name, g.as = "hostile", abi.HookHandleStage
				p, h := stageOf(t, l, lc.as(g), c.limits)
				deadline := p.limits.Timeout + overrun
				start := time.Now()
				out, err := h.Execute(context.Background(), stageNode(), stageContext(), nil)
				took := time.Since(start)
				checkFailed(t, "Execute", out, err, "")
				if took > deadline {
					t.Errorf("the stage took %v, past its deadline and margin %v", took, deadline)
				}
				for _, s := range []string{`node "check": plugin "hostile" export morph_handle_stage: `, c.want} {
					if !strings.Contains(out.FailureReason, s) {
						t.Errorf("reason %.400q does not say %q", out.FailureReason, s)
					}
				}
				if strings.ContainsAny(out.FailureReason, "\x1b\x07\u202e") || len(out.FailureReason) > 2*DefaultMaxErrorBytes+200 {
					t.Errorf("reason of %d bytes, or with a raw control character: %.200q", len(out.FailureReason), out.FailureReason)
				}
				if len(out.ContextUpdates) > 0 || out.PreferredLabel != "" {
					t.Errorf("a failed call's outcome carries %v, label %q", out.ContextUpdates, out.PreferredLabel)
				}
				// The typed call tells the kind; the guest fails the same way
				// on the instance that replaced the one discarded.
				if _, err := h.Call(context.Background(), abi.StageInput{NodeID: "check", Attrs: map[string]string{}}); !errors.Is(err, c.kind) {
					t.Errorf("Call = %v, want %v", err, c.kind)
				}
				discarded := uint64(2) // a fresh instance for each call
				if c.kind == ErrGuest {
					discarded = 0 // a guest-reported error keeps its instance
				}
				if s := p.Stats(); s.Faults != 2 || s.Discarded != discarded {
					t.Errorf("stats %+v: want 2 faults, %d instances discarded", s, discarded)
				}
				if out, err := good.Execute(context.Background(), stageNode(), stageContext(), nil); err != nil || out.Status != pipeline.StatusSuccess {
					t.Fatalf("the good plugin after the hostile one: %+v, %v", out, err)
				}
			})
		}
	}
}

// spliceBody is a morph_handle_stage (native loader) that answers prefix,
// a middle, then suffix, written at 64 KiB with memory.copy: the middle is
// fill bytes of 'x' (memory.fill), or, when fill is 0, the call's whole
// input. The guest's reply must be prefix+suffix, which it copies from.
func spliceBody(prefix, suffix string, fill int) []byte {
	const out = 1 << 16
	lp, ls := int64(len(prefix)), int64(len(suffix))
	memcopy, memfill := []byte{0xFC, 10, 0, 0}, []byte{0xFC, 11, 0}
	code := []byte{1, 1, 0x7F} // one local: the middle's length (2)
	if fill > 0 {
		code = append(code, i32const(int64(fill))...)
	} else {
		code = append(code, 0x20, 1) // local.get 1: the input's length
	}
	code = append(code, 0x21, 2) // local.set 2
	code = append(append(append(append(code, i32const(out)...), i32const(guestAnswerAt)...), i32const(lp)...), memcopy...)
	if fill > 0 {
		code = append(append(append(append(code, i32const(out+lp)...), i32const('x')...), 0x20, 2), memfill...)
	} else {
		code = append(append(append(code, i32const(out+lp)...), 0x20, 0, 0x20, 2), memcopy...) // from the input
	}
	code = append(append(append(append(code, i32const(out+lp)...), 0x20, 2, 0x6A), i32const(guestAnswerAt+lp)...), i32const(ls)...)
	code = append(code, memcopy...)
	code = append(append(append(code, 0x42), sleb(out<<32)...), 0x20, 2)            // i64.const out<<32; local.get 2
	return append(append(append(code, i32const(lp+ls)...), 0x6A, 0xAD, 0x84), 0x0B) // + lp+ls; i64.extend_i32_u; i64.or
}

// echoGuest is a stage handler answering its input back as the context
// update "input" (see spliceBody).
func echoGuest() guestModule {
	const prefix, suffix = `{"status":"success","context_updates":{"input":`, `}}`
	g := stageGuest("echo", prefix+suffix)
	g.hook = spliceBody(prefix, suffix, 0)
	return g
}

// The input is SPEC section 11.1's: the node's id and attributes (an
// object even when the node has none), the context's graph.goal, a copy of
// the context, and no previous outcome outside a run.
func TestStageInput(t *testing.T) {
	_, h := stageOf(t, newLoader(t), echoGuest(), Limits{})
	if h.Type() != "wasm:echo" {
		t.Fatalf("Type() = %q", h.Type())
	}
	pctx := stageContext()
	pctx.Set("scores", []int{1, 2})
	out, err := h.Execute(context.Background(), stageNode(), pctx, nil)
	if err != nil || out.Status != pipeline.StatusSuccess {
		t.Fatalf("Execute = %+v, %v", out, err)
	}
	want := map[string]any{"node_id": "check", "attrs": map[string]any{"type": "wasm:hostile", "marker": "tests pass"},
		"goal": "Make the tests pass", "context": map[string]any{"graph.goal": "Make the tests pass",
			"last_response": "go test ./...: ok, tests pass", "implement.output": "go test ./...: ok, tests pass", "scores": []any{1.0, 2.0}}}
	if got := out.ContextUpdates["input"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("the guest was given\n%v\nwant\n%v", got, want)
	}
	out, err = h.Execute(context.Background(), &pipeline.Node{ID: "bare"}, pipeline.NewContext(), nil)
	if err != nil {
		t.Fatalf("a node without attributes, an empty context: %v", err)
	}
	in, _ := out.ContextUpdates["input"].(map[string]any)
	for _, key := range []string{"attrs", "context"} {
		if !reflect.DeepEqual(in[key], map[string]any{}) {
			t.Errorf("a node without attributes, an empty context: the guest was given %s %#v, want an empty object", key, in[key])
		}
	}
	if in["goal"] != "" {
		t.Errorf("a node without attributes, an empty context: the guest was given goal %#v, want empty", in["goal"])
	}
}

// The keys SPEC section 11.2 reserves are the pipeline runner's own: a key
// the runner sets that abi.ReservedStageKey let a stage overwrite would be
// a way to corrupt its routing or retries.
func TestStageReservedKeysAreTheRunners(t *testing.T) {
	for _, k := range []string{pipeline.KeyOutcome, pipeline.KeyPreferredLabel, pipeline.KeyCurrentNode, pipeline.KeyGoal,
		pipeline.KeyParallelResults, pipeline.KeyBaseURL, pipeline.KeySystemPrompt, "internal.retry_count.verify"} {
		if !abi.ReservedStageKey(k) {
			t.Errorf("the runner's key %q is not reserved", k)
		}
	}
	for _, k := range []string{pipeline.KeyLastStage, pipeline.KeyLastResponse} {
		if abi.ReservedStageKey(k) {
			t.Errorf("%q, which agent stages set, is reserved", k)
		}
	}
}

// A closed plugin and a canceled run fail the stage, saying which.
func TestStageClosedOrCanceled(t *testing.T) {
	p, h := stageOf(t, newLoader(t), stageGuest("verify", `{"status":"success"}`), Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := h.Execute(ctx, stageNode(), stageContext(), nil)
	checkFailed(t, "a canceled run", out, err, `node "check": plugin "verify" export morph_handle_stage: plugin call canceled`)
	p.Close(context.Background())
	out, err = h.Execute(context.Background(), stageNode(), stageContext(), nil)
	checkFailed(t, "a closed plugin", out, err, "plugin closed")
}

// A guest's valid outcome is the stage's: each status, the routing hints
// and the context updates as answered, the notes and failure reason
// escaped; a fail without a reason gets one.
func TestStageOutcomeMapping(t *testing.T) {
	l := newLoader(t)
	cases := []struct {
		reply string
		want  pipeline.Outcome
	}{
		{`{"status":"partial_success","preferred_label":"more","suggested_next_ids":["a","b"],"context_updates":{"x.n":2,"x.v":null},"notes":"half\u001b[2J","later":1}`,
			pipeline.Outcome{Status: pipeline.StatusPartialSuccess, PreferredLabel: "more", SuggestedNextIDs: []string{"a", "b"},
				ContextUpdates: map[string]any{"x.n": 2.0, "x.v": nil}, Notes: `half\x1b[2J`}},
		{`{"status":"fail","failure_reason":"red\u202etext"}`, pipeline.Outcome{Status: pipeline.StatusFail, FailureReason: `red\u202etext`}},
		{`{"status":"fail"}`, pipeline.Outcome{Status: pipeline.StatusFail, FailureReason: `plugin "m" failed the stage without a reason`}},
		{`{"status":"retry"}`, pipeline.Outcome{Status: pipeline.StatusRetry}},
		{`{"status":"skipped"}`, pipeline.Outcome{Status: pipeline.StatusSkipped}},
	}
	for _, c := range cases {
		_, h := stageOf(t, l, stageGuest("m", c.reply), Limits{})
		out, err := h.Execute(context.Background(), stageNode(), stageContext(), nil)
		if err != nil || !reflect.DeepEqual(*out, c.want) {
			t.Errorf("%s:\n got %+v, %v\nwant %+v", c.reply, out, err, c.want)
		}
	}
}

// verifyWasm is the example stage handler built by `make examples`.
func verifyWasm(t testing.TB) string {
	return testenv.Built(t, filepath.Join("..", "examples", "pipelines", "verify", "verify.wasm"), "examples")
}

var verifyLoader = struct {
	once sync.Once
	l    *Loader
	err  error
}{}

// sharedVerifyLoader is one loader for the tests of the example, whose
// standard Go module takes a second or more to compile: through
// testenv.CompileCache, as capLoader's, so that it compiles once.
func sharedVerifyLoader(t testing.TB) *Loader {
	verifyLoader.once.Do(func() { verifyLoader.l, verifyLoader.err = NewLoader(LoaderOptions{CacheDir: testenv.CompileCache()}) })
	if verifyLoader.err != nil {
		t.Fatal(verifyLoader.err)
	}
	return verifyLoader.l
}

// The example through the handler interface, on hand-made nodes and
// contexts: it reads implement.output (else last_response), passes on the
// marker, fails on a failure count or a missing marker with its label, and
// counts its attempts in the context. Also measures a stage call.
func TestStageVerifyExample(t *testing.T) {
	p := load(t, sharedVerifyLoader(t), Config{Path: verifyWasm(t)})
	h, ok := p.StageHandler()
	if !ok {
		t.Fatal("no stage handler")
	}
	if h.Type() != "wasm:verify" {
		t.Errorf("the stage handler's Type = %q, want wasm:verify", h.Type())
	}
	if want := []string{abi.HookHandleStage}; !slices.Equal(p.Hooks(), want) {
		t.Errorf("Hooks = %q, want %q", p.Hooks(), want)
	}
	if p.Isolation() != IsolationPooled {
		t.Errorf("Isolation = %s, want %s", p.Isolation(), IsolationPooled)
	}
	node := &pipeline.Node{ID: "verify", Attrs: map[string]string{"type": "wasm:verify"}}
	run := func(pctx *pipeline.Context) *pipeline.Outcome {
		t.Helper()
		out, err := h.Execute(context.Background(), node, pctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	pctx := pipeline.NewContext()
	pctx.Set("implement.output", "Changed the parser. Test run: 12 passed, 2 failed.")
	pctx.Set(pipeline.KeyLastResponse, "tests pass") // implement.output comes first
	out := run(pctx)
	checkOutcome(t, "a failing test run", out, pipeline.StatusFail, "fix", map[string]any{"verify.passed": false, "verify.attempts": 1.0})
	if want := "implement.output reports 2 failed"; out.FailureReason != want {
		t.Errorf("a failing test run: FailureReason = %q, want %q", out.FailureReason, want)
	}
	pctx.Apply(out.ContextUpdates)
	pctx.Set("implement.output", "Test run: 14 passed, 0 failed. Tests pass.")
	out = run(pctx)
	checkOutcome(t, "a passing test run", out, pipeline.StatusSuccess, "", map[string]any{"verify.passed": true, "verify.attempts": 2.0})
	if want := `attempt 2: checked implement.output for "tests pass"`; out.Notes != want {
		t.Errorf("a passing test run: Notes = %q, want %q", out.Notes, want)
	}
	node.Attrs = map[string]string{"check": "review", "marker": "LGTM", "fail_label": "revise"}
	out = run(stageContext())
	checkOutcome(t, "a missing key", out, pipeline.StatusFail, "revise", nil)
	if want := "nothing to verify: the context's review is empty"; out.FailureReason != want {
		t.Errorf("a missing key: FailureReason = %q, want %q", out.FailureReason, want)
	}

	// A stage call's latency, warm: input of the context above, the
	// example's JSON work, the checks, the mapping.
	node.Attrs = map[string]string{}
	const n = 200
	times := make([]time.Duration, n)
	for i := range times {
		start := time.Now()
		run(pctx)
		times[i] = time.Since(start)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	t.Logf("verify stage call (standard Go guest), warm: median %v, p90 %v over %d calls", times[n/2], times[n*9/10], n)
}

// BenchmarkStage is one stage call through the handler interface, warm:
// the input built from a small context, the call, the outcome checked and
// mapped. "wat" answers a fixed outcome (the host's own cost); "verify" is
// the example, a standard Go guest doing its JSON work.
func BenchmarkStage(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  func(testing.TB) Config
		l    func(testing.TB) *Loader
	}{
		{"wat", func(testing.TB) Config {
			return Config{Wasm: stageGuest("wat", `{"status":"success","context_updates":{"check.passed":true}}`).wasm()}
		}, func(t testing.TB) *Loader { return newLoader(t) }},
		{"verify", func(t testing.TB) Config { return Config{Path: verifyWasm(t)} }, sharedVerifyLoader},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := load(b, c.l(b), c.cfg(b))
			h, _ := p.StageHandler()
			node, pctx := stageNode(), stageContext()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if out, _ := h.Execute(ctx, node, pctx, nil); out.Status != pipeline.StatusSuccess {
					b.Fatalf("%+v", out)
				}
			}
		})
	}
}
