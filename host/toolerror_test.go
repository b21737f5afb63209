package host

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/morphhost/morph/engine"
)

// A failing plugin tool's error text, which the engine sends the model, is
// the plugin's message (a reported error) or a trap's first line: not the
// plugin's name, morph's internal export names or the wasm stack, which the
// *Error under it and the plugin's log keep.
func TestToolErrorText(t *testing.T) {
	logs := &syncBuffer{}
	l, err := NewLoader(LoaderOptions{CacheDir: "off", Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	p := load(t, l, Config{Name: "ext", Path: fixture(t, "extism_tools_http")})
	tools := map[string]interface {
		Execute(context.Context, map[string]any) (string, error)
	}{}
	for _, tl := range p.engineTools() {
		tools[tl.Name()] = tl
	}
	for _, c := range []struct {
		tool, want string
		kind       error
		detail     string // in the *Error and the log only
	}{
		{"fail", "division by zero", ErrGuest, "export morph_call_tool"},
		{"crash", "plugin trapped: wasm error: unreachable", ErrTrap, "wasm stack trace"},
	} {
		_, err := tools[c.tool].Execute(context.Background(), map[string]any{})
		var te *ToolError
		if !errors.As(err, &te) {
			t.Fatalf("%s: %#v (%v), want a *ToolError", c.tool, err, err)
		}
		if err.Error() != c.want {
			t.Errorf("%s: error %q, want %q", c.tool, err, c.want)
		}
		if !errors.Is(err, c.kind) {
			t.Errorf("%s: error %v, want one of kind %v", c.tool, err, c.kind)
		}
		if te.Tool != c.tool {
			t.Errorf("%s: the ToolError's Tool = %q, want %q", c.tool, te.Tool, c.tool)
		}
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: error %v, want an *Error under it", c.tool, err)
		} else if !strings.Contains(pe.Error(), c.detail) {
			t.Errorf("%s: the *Error %q lost the detail %q", c.tool, pe, c.detail)
		}
		if !strings.Contains(logs.String(), c.detail) {
			t.Errorf("%s: the log lost the detail %q:\n%s", c.tool, c.detail, logs)
		}
	}

	// In a run, that text is the observation the model gets.
	m := &scriptModel{replies: []string{
		`{"type":"tool_call","tool_call":{"tool_name":"fail","tool_params":{}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"crash","tool_params":{}}}`,
		`{"type":"final","final":{"output":"done"}}`,
	}}
	e := engine.New(m, nil, engine.WithExtenders(l.Extender(Config{Name: "ext", Path: fixture(t, "extism_tools_http")}, engine.MiddlewareConfig{})))
	defer e.Close(context.Background())
	_, rc, err := e.NewSession("s").RunTurn(context.Background(), "fail, then crash", engine.RunOptions{})
	if err != nil || len(rc.Steps) < 2 {
		t.Fatalf("run: %v, steps %+v", err, rc.Steps)
	}
	for i, want := range []string{"error: division by zero", "error: plugin trapped: wasm error: unreachable"} {
		if obs := rc.Steps[i].Observation; obs != want {
			t.Errorf("step %d observation %q, want %q", i+1, obs, want)
		}
	}
}

// A plugin tool is given its call's ID (call_id), as the engine names the
// call: the tool's input is the ToolCallInput the host sent, which the
// echo_tool fixture answers as its error.
func TestToolCallID(t *testing.T) {
	l := newLoader(t)
	p := load(t, l, Config{Name: "echo_tool", Path: fixture(t, "echo_tool")})
	var tool engine.Tool
	for _, tl := range p.engineTools() {
		tool = tl
	}
	if tool == nil || tool.Name() != "echo_input" {
		t.Fatalf("tools %v", p.engineTools())
	}
	ctx := engine.WithCallID(context.Background(), "s1/N/2/3/1")
	_, err := tool.Execute(ctx, map[string]any{"x": 1})
	if err == nil {
		t.Fatal("the tool's input: no error, want one echoing it")
	}
	for _, want := range []string{`"call_id":"s1/N/2/3/1"`, `"params":{"x":1}`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the tool's input: %q, want it to say %s", err, want)
		}
	}
	// outside a call: no call_id
	if _, err := tool.Execute(context.Background(), map[string]any{}); err == nil || strings.Contains(err.Error(), "call_id") {
		t.Fatalf("the tool's input without a call: %v", err)
	}
}
