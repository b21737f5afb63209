package engine

import (
	"context"
	"strings"
	"testing"
)

// A plugin's changing tool list (Extension.WatchTools) replaces its own
// tools only: it cannot take a built-in's, another plugin's or the host's
// (nor drop them later), a list naming a tool twice or with a bad schema is
// refused whole, and a built-in the plugin had replaced at Initialize comes
// back when the plugin drops it.
func TestWatchToolsReplacesOwnToolsOnly(t *testing.T) {
	tool := func(name string) *testTool { return &testTool{name: name, schema: `{"type":"object"}`} }
	var update func(context.Context, []Tool) error
	dyn := &fakePlugin{name: "dyn", ext: Extension{Tools: []Tool{tool("calc"), tool("a")},
		WatchTools: func(u func(context.Context, []Tool) error) { update = u }}}
	other := &fakePlugin{name: "other", ext: Extension{Tools: []Tool{tool("read_file")}}}
	reg := NewRegistry()
	reg.Register(tool("host_tool"))
	e := New(script(), reg, WithBuiltinTools(tool("calc")), WithExtenders(other, dyn))
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	sources := func() string {
		var out []string
		for _, name := range e.reg.Names() {
			src, _ := e.reg.Source(name)
			out = append(out, name+"="+src)
		}
		return strings.Join(out, " ")
	}
	if got := sources(); got != "a=plugin:dyn calc=plugin:dyn host_tool=host read_file=plugin:other" {
		t.Fatalf("after Initialize: %s", got)
	}
	ctx := context.Background()
	if err := update(ctx, []Tool{tool("b"), tool("read_file"), tool("host_tool")}); err != nil {
		t.Fatal(err)
	}
	if got := sources(); got != "b=plugin:dyn calc=builtin host_tool=host read_file=plugin:other" {
		t.Errorf("after the change: %s", got)
	}
	for _, bad := range [][]Tool{
		{tool("c"), tool("c")},
		{tool("c"), &testTool{name: "d", schema: `{"type": 3}`}},
	} {
		if err := update(ctx, bad); err == nil {
			t.Errorf("list %v accepted", bad)
		}
	}
	if got := sources(); got != "b=plugin:dyn calc=builtin host_tool=host read_file=plugin:other" {
		t.Errorf("after refused lists: %s", got)
	}
}

// An Extension's Warnings reach Status.Warnings, naming the plugin; and
// Registry.CheckTool refuses what Initialize would (a bad name, a bad
// schema) without registering anything.
func TestExtensionWarningsAndCheckTool(t *testing.T) {
	p := &fakePlugin{name: "srv", ext: Extension{Warnings: []string{"tool x left out"}}}
	e := New(script(), NewRegistry(), WithExtenders(p))
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := e.Status().Warnings; len(w) != 1 || w[0] != `plugin "srv": tool x left out` {
		t.Errorf("warnings %q", w)
	}
	reg := NewRegistry()
	for _, bad := range []Tool{&testTool{name: "a b", schema: `{}`}, &testTool{name: "d", schema: `{"type": 3}`}} {
		if err := reg.CheckTool(bad); err == nil {
			t.Errorf("CheckTool(%q) passed", bad.Name())
		}
	}
	if err := reg.CheckTool(&testTool{name: "ok.tool", schema: `{"type":"object"}`}); err != nil {
		t.Error(err)
	}
	if n := len(reg.Names()); n != 0 {
		t.Errorf("CheckTool registered %d tools", n)
	}
}

// OnToolsChanged's functions are called after a plugin's list change, once
// the registry holds it, and not after a refused list; a removed one is not
// called again.
func TestOnToolsChanged(t *testing.T) {
	tool := func(name string) *testTool { return &testTool{name: name, schema: `{"type":"object"}`} }
	var update func(context.Context, []Tool) error
	dyn := &fakePlugin{name: "dyn", ext: Extension{Tools: []Tool{tool("a")},
		WatchTools: func(u func(context.Context, []Tool) error) { update = u }}}
	e := New(script(), nil, WithExtenders(dyn))
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	var seen []string
	remove := e.OnToolsChanged(func(context.Context) { seen = append(seen, strings.Join(e.reg.Names(), ",")) })
	ctx := context.Background()
	if err := update(ctx, []Tool{tool("b")}); err != nil {
		t.Fatal(err)
	}
	if err := update(ctx, []Tool{tool("c"), tool("c")}); err == nil {
		t.Fatal("a list naming a tool twice was taken")
	}
	remove()
	if err := update(ctx, []Tool{tool("d")}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(seen, " "); got != "b" {
		t.Errorf("OnToolsChanged saw %q, want one call, after the first change, seeing b", got)
	}
}
