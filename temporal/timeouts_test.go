package temporal

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
)

// Setup tells each activity's timeout from what bounds its call on the
// worker, plus the margin: go-hooks' hooks, tools and stage calls by its
// timeout of 250 ms (three of them: a fresh instance, the call, a
// description), its middleware by the engine's deadline on it (250 ms and
// the host's 100 ms); verify's stage handler by the default 2 s; calc by
// the built-in tools' bound; the model call by the client's 2 s timeout,
// twice, and a wait of up to 60 s between. ActivityTimeout caps them all.
// The heartbeat timeout is the worker's heartbeat_timeout, and the
// attempts of a lost call its lost_attempts.
func TestSetupTimeouts(t *testing.T) {
	cfg, err := config.Load(appendConfig(t, writeConfig(t, `{"type":"final","final":{"thought":"t","output":1}}`), `
[[plugins]]
name = "go-hooks"
path = "`+plugin(t, "examples/go-hooks/go-hooks.wasm")+`"
timeout = "250ms"

[[plugins]]
name = "verify"
path = "`+plugin(t, "examples/pipelines/verify/verify.wasm")+`"
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.LLM.Provider, cfg.LLM.Model, cfg.LLM.BaseURL, cfg.LLM.APIKeyEnv = config.ProviderOpenAI, "m", "http://127.0.0.1:1/v1", ""
	cfg.Temporal.HeartbeatTimeout, cfg.Temporal.LostAttempts = 6*time.Second, 4
	cfg.LLM.Timeout, cfg.LLM.MaxRetries = 2*time.Second, new(int)
	*cfg.LLM.MaxRetries = 1
	ctx := context.Background()
	a := newActivities(t, cfg)

	hook := 750*time.Millisecond + activityMargin
	want := Timeouts{
		Heartbeat:    6 * time.Second,
		LostAttempts: 4,
		Chat:         2*2*time.Second + time.Minute + activityMargin,
		Hooks: map[string]time.Duration{"build_prompt": hook, "build_params": hook, "on_tool_success": hook,
			"fallback_final": hook},
		Middleware: map[string]time.Duration{"go-hooks": 350*time.Millisecond + activityMargin},
		Tools:      map[string]time.Duration{"calc": builtinToolBound + activityMargin, "word_count": hook, "json_query": hook},
		Stages:     map[string]time.Duration{"wasm:verify": 3*2*time.Second + activityMargin},
	}
	check := func(want Timeouts) {
		t.Helper()
		s, err := a.Setup(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := s.Timeouts
		what := fmt.Sprintf("ActivityTimeout %s", ActivityTimeout)
		checkFields(t, what, eq("Heartbeat", got.Heartbeat, want.Heartbeat), eq("LostAttempts", got.LostAttempts, want.LostAttempts), eq("Chat", got.Chat, want.Chat))
		for _, m := range []struct {
			name      string
			got, want map[string]time.Duration
		}{{"Hooks", got.Hooks, want.Hooks}, {"Middleware", got.Middleware, want.Middleware}, {"Tools", got.Tools, want.Tools}, {"Stages", got.Stages, want.Stages}} {
			if !maps.Equal(m.got, m.want) {
				t.Errorf("%s: %s = %v, want %v", what, m.name, m.got, m.want)
			}
		}
	}
	check(want)

	defer func(d time.Duration) { ActivityTimeout = d }(ActivityTimeout)
	ActivityTimeout = 5 * time.Second
	want.Chat, want.Tools["calc"], want.Stages["wasm:verify"] = ActivityTimeout, ActivityTimeout, ActivityTimeout
	check(want)
}

// panicky is an embedding host's tool that panics after its effect.
type panicky struct{ runs int }

func (*panicky) Name() string            { return "boom" }
func (*panicky) Description() string     { return "Panics." }
func (*panicky) ParameterSchema() string { return `{"type":"object"}` }
func (p *panicky) Execute(context.Context, map[string]any) (string, error) {
	p.runs++
	panic("boom")
}

// A tool that panics ends its call with a failure the model reads, not a
// failed activity, which Temporal would run again, the tool with it.
func TestCallToolPanicIsAnAnswer(t *testing.T) {
	ctx := context.Background()
	a := newActivities(t, finalConfig(t))
	tool := &panicky{}
	a.rt.Engine.Registry().Register(tool)
	res, err := a.CallTool(ctx, ToolCall{Tool: "boom"})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	checkFields(t, "a panicking tool", eq("Error", res.Error, "tool boom panicked: boom"), eq("runs", tool.runs, 1))
}

// finalConfig is a config on the scripted model, whose one reply is a
// final.
func finalConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load(writeConfig(t, `{"type":"final","final":{"thought":"t","output":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
