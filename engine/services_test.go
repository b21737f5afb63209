package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// counter is a service a test shares between plugins.
type counter struct{ n int }

// Services follow the precedence of tools and hooks: the host's over a
// plugin's, a later plugin's over an earlier one's, each time with a
// warning naming both; Status lists each plugin's services in use.
func TestServicePrecedence(t *testing.T) {
	hostCfg, c1, c2 := "host config", &counter{1}, &counter{2}
	p1 := &fakePlugin{name: "p1", ext: Extension{Services: map[string]any{"config": "p1 config", "counter": c1, "only1": 1}}}
	p2 := &fakePlugin{name: "p2", ext: Extension{Services: map[string]any{"counter": c2}}}
	e := New(script(), nil, WithExtenders(p1, p2), WithService("config", hostCfg))
	if v, ok := e.Service("config"); !ok || v != hostCfg {
		t.Fatalf("before Initialize: the host's service %v %v", v, ok)
	}
	if _, ok := e.Service("counter"); ok {
		t.Fatal("a plugin's service before Initialize")
	}
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]any{"config": hostCfg, "counter": c2, "only1": 1} {
		if v, ok := e.Service(name); !ok || v != want {
			t.Errorf("service %s = %v, %v; want %v", name, v, ok, want)
		}
	}
	st := e.Status()
	if got := fmt.Sprint(st.Plugins[0].Services, st.Plugins[1].Services); got != "[only1] [counter]" {
		t.Errorf("services in use by p1, p2: %s", got)
	}
	want := []string{
		`the service "config" of plugin "p1" is not used: the host's service of that name is`,
		`the service "counter" of plugin "p2" replaces plugin "p1"'s`,
	}
	if got := strings.Join(st.Warnings, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

func TestServiceAs(t *testing.T) {
	e := New(script(), nil, WithService("counter", &counter{7}), WithService("err", errors.New("x")))
	c, err := ServiceAs[*counter](e, "counter")
	if err != nil || c.n != 7 {
		t.Fatalf("ServiceAs = %v, %v", c, err)
	}
	if got, err := ServiceAs[error](e, "err"); err != nil || got.Error() != "x" { // an interface the service implements
		t.Fatalf("ServiceAs[error] = %v, %v", got, err)
	}
	if _, err := ServiceAs[*counter](e, "ghost"); !errors.Is(err, ErrNoService) || !strings.Contains(err.Error(), `"ghost"`) {
		t.Fatalf("missing service: %v", err)
	}
	_, err = ServiceAs[fmt.Stringer](e, "counter")
	var te *ServiceTypeError
	if !errors.As(err, &te) {
		t.Fatalf("wrong type: %v, want a *ServiceTypeError", err)
	}
	checkFields(t, "wrong type", eq("Name", te.Name, "counter"), eq("Want", te.Want, "fmt.Stringer"), eq("Got", te.Got, "*engine.counter"))
	if err.Error() != `engine: service "counter" is a *engine.counter, not a fmt.Stringer` {
		t.Fatalf("message %q", err)
	}
}

// A service that could not be looked up reliably fails initialization,
// blamed on its plugin or on the host.
func TestBadServicesFailInitialize(t *testing.T) {
	p := &fakePlugin{name: "p", ext: Extension{Services: map[string]any{"two words": 1, "nothing": nil}}}
	err := New(script(), nil, WithExtenders(p)).Initialize(context.Background())
	var ie *InitError
	var pe *PluginError
	if !errors.As(err, &ie) {
		t.Fatalf("err = %v, want an *InitError", err)
	}
	if len(ie.Errs) != 2 {
		t.Fatalf("the InitError holds %d errors, want 2: %v", len(ie.Errs), err)
	}
	if !errors.As(ie.Errs[0], &pe) {
		t.Errorf("the first error %v (%T), want a *PluginError", ie.Errs[0], ie.Errs[0])
	} else if pe.Plugin != "p" {
		t.Errorf("the first error's Plugin = %q, want p", pe.Plugin)
	}
	if want := `plugin "p": service "nothing" is nil`; ie.Problems[0] != want {
		t.Errorf("Problems[0] = %q, want %q", ie.Problems[0], want)
	}
	if want := `service name "two words"`; !strings.Contains(ie.Problems[1], want) {
		t.Errorf("Problems[1] = %q, want it to say %q", ie.Problems[1], want)
	}
	err = New(script(), nil, WithService("", 1)).Initialize(context.Background())
	if !errors.Is(err, ErrInit) || !strings.Contains(err.Error(), `host service name ""`) {
		t.Fatalf("err = %v", err)
	}
}

// A plugin's options set its engine hooks and nothing else: a service
// offered or an identity set through them would take the host's place.
func TestPluginOptionsSetOnlyHooks(t *testing.T) {
	p := &fakePlugin{name: "p", ext: Extension{Options: []Option{WithService("stolen", 1), WithIdentity("pwned"),
		WithFallbackFinal(func() *Final { return &Final{Output: "p's fallback"} })}}}
	e := New(script("junk"), nil, WithExtenders(p))
	final, rc, err := e.Run(context.Background(), "t", RunOptions{MaxSteps: 1, ParseRetries: -1})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if final.Output != "p's fallback" {
		t.Errorf("final output = %v, want the plugin's fallback", final.Output)
	}
	if !strings.HasPrefix(rc.SystemPrompt, DefaultIdentity) {
		t.Errorf("system prompt %.40q..., want the default identity, not the plugin's", rc.SystemPrompt)
	}
	if _, ok := e.Service("stolen"); ok {
		t.Fatal("a plugin's option offered a host service")
	}
}
