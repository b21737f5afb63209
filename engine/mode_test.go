package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// mutatingTool is a tool that says whether it changes things.
type mutatingTool struct {
	testTool
	mutates bool
}

func (t *mutatingTool) Mutates() bool { return t.mutates }

func writeTool() *mutatingTool {
	return &mutatingTool{testTool{name: "write", fn: func(map[string]any) (string, error) { return "written", nil }}, true}
}

// In plan mode a call of a tool that changes things is refused with an
// observation that says why and how to run it, and the run goes on;
// other tools run. The mode is read at each call: switched during a run,
// it holds from the next call on.
func TestPlanModeRefusesMutatingTools(t *testing.T) {
	write := writeTool()
	read := &mutatingTool{testTool{name: "read", fn: func(map[string]any) (string, error) { return "read", nil }}, false}
	m := script(toolCall("write", `{"n":1}`), toolCall("read", `{}`), toolCall("echo", `{"text":"a"}`), toolCall("write", `{"n":2}`), finalReply("done"))
	var e *Engine
	e = New(m, registry(write, read, echoTool()), WithEventHandler(func(ev Event) {
		if ev.Kind == EventStep && ev.Action == "echo" { // switched in the middle of the run
			if err := e.SetMode(ModeNormal); err != nil {
				t.Error(err)
			}
		}
	}))
	if err := e.SetMode(ModePlan); err != nil || e.Mode() != ModePlan {
		t.Fatalf("SetMode: %v, mode %s", err, e.Mode())
	}
	final, rc, err := e.Run(context.Background(), "t", RunOptions{})
	if err != nil || final.Output != "done" {
		t.Fatalf("final %+v err %v", final, err)
	}
	refused := rc.Steps[0]
	if want := "Tool call refused: plan mode: tool 'write' changes things"; !strings.HasPrefix(refused.Observation, want) {
		t.Errorf("step 1's Observation = %q, want it to start %q", refused.Observation, want)
	}
	if !strings.Contains(refused.Observation, "switched to normal") {
		t.Errorf("step 1's Observation = %q, want it to say the mode switched to normal", refused.Observation)
	}
	if refused.Error != refused.Observation {
		t.Errorf("step 1's Error = %q, want its Observation, %q", refused.Error, refused.Observation)
	}
	checkFields(t, "the run", eq("step 2's Observation", rc.Steps[1].Observation, "read"), eq("step 4's Observation", rc.Steps[3].Observation, "written"),
		eq("write's calls", write.calls.Load(), 1))
	st := e.Status()
	checkFields(t, "status", eq("Mode", st.Mode, ModeNormal), eq("Tools[2].Name", st.Tools[2].Name, "write"),
		eq("Tools[2].Mutates", st.Tools[2].Mutates, true), eq("Tools[1].Mutates", st.Tools[1].Mutates, false))
}

// RunOptions.Mode overrides the engine's mode for one run, either way; a
// mode that is none fails the run before any model call.
func TestRunMode(t *testing.T) {
	for _, c := range []struct {
		engine, run Mode
		ran         bool
	}{{ModeNormal, ModePlan, false}, {ModePlan, ModeNormal, true}, {ModePlan, "", false}} {
		write := writeTool()
		e := New(script(toolCall("write", `{}`), finalReply("x")), registry(write))
		if err := e.SetMode(c.engine); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.Run(context.Background(), "t", RunOptions{Mode: c.run}); err != nil || (write.calls.Load() == 1) != c.ran {
			t.Errorf("engine %s, run %q: err %v, write ran %d times", c.engine, c.run, err, write.calls.Load())
		}
	}
	m := script(finalReply("x"))
	_, rc, err := New(m, nil).Run(context.Background(), "t", RunOptions{Mode: "dry"})
	var ve *ConfigValueError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a *ConfigValueError", err)
	}
	checkFields(t, "a mode that is none", eq("the error's Key", ve.Key, ConfigMode), eq("StopReason", rc.StopReason, StopBadOptions),
		eq("requests", len(m.reqs), 0),
		eq("message", err.Error(), `engine: config key "mode": want one of "normal", "plan", got "dry" in RunOptions.Mode`))
}

// The mode is a config key of the engine's own: it is set through the
// config too, and neither the host nor a plugin may declare another.
func TestModeIsAConfigKey(t *testing.T) {
	p := &fakePlugin{name: "p", ext: Extension{ConfigKeys: []ConfigKey{{Name: ConfigMode, Type: ConfigBool}}}}
	e := New(script(), nil, WithExtenders(p))
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.SetConfig(ConfigMode, "plan"); err != nil || e.Mode() != ModePlan {
		t.Fatalf("SetConfig: %v, mode %s", err, e.Mode())
	}
	var ve *ConfigValueError
	if err := e.SetMode("dry"); !errors.As(err, &ve) || e.Mode() != ModePlan {
		t.Fatalf("SetMode(dry) = %v, mode %s", err, e.Mode())
	}
	if w := e.Status().Warnings; len(w) != 1 || w[0] != `the config key "mode" of plugin "p" is not used: the engine's key of that name is` {
		t.Fatalf("warnings %q", w)
	}
	err := New(script(), nil, WithConfigKeys(ConfigKey{Name: ConfigMode, Type: ConfigString})).Initialize(context.Background())
	if !errors.Is(err, ErrInit) || !strings.Contains(err.Error(), `host config key "mode" is the engine's own`) {
		t.Fatalf("err = %v", err)
	}
}
