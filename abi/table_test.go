package abi

import "testing"

// The hook table is consistent: unique names and exports, exports named
// after their hooks (TestSchemaCoverage checks every payload has its
// schema).
func TestHookTable(t *testing.T) {
	names, exports := map[string]bool{}, map[string]bool{}
	for _, h := range Hooks {
		if names[h.Name] || exports[h.Export] {
			t.Errorf("%s: a second row of the name or export", h.Name)
		}
		names[h.Name], exports[h.Export] = true, true
		if h.Export != "morph_"+h.Name {
			t.Errorf("%s: export %s, want morph_%s", h.Name, h.Export, h.Name)
		}
		if got, ok := HookByName(h.Name); !ok || got.Export != h.Export {
			t.Errorf("HookByName(%q) = %v, %v", h.Name, got, ok)
		}
	}
	if got := len(EngineHookExports) + len(MiddlewareExports) + len(exportsOf(StageHandler)); got != len(Hooks) {
		t.Errorf("the kinds' exports hold %d hooks, the table %d: a row of an unknown kind?", got, len(Hooks))
	}
}

// Exports holds each hook's export once, as the hook's row says, and the
// exports that are no hook with kinds of their own.
func TestExportTable(t *testing.T) {
	seen := map[string]Export{}
	for _, e := range Exports {
		if _, dup := seen[e.Name]; dup {
			t.Errorf("%s: a second row", e.Name)
		}
		seen[e.Name] = e
		if e.Hook == "" && e.Kind != Tool && e.Kind != Lifecycle {
			t.Errorf("%s: no hook, but of kind %s", e.Name, e.Kind)
		}
	}
	for _, h := range Hooks {
		e := seen[h.Export]
		if e.Hook != h.Name {
			t.Errorf("hook %s: export row %s has Hook %q", h.Name, h.Export, e.Hook)
		}
		if e.Kind != h.Kind {
			t.Errorf("hook %s: export row %s has Kind %s, want %s", h.Name, h.Export, e.Kind, h.Kind)
		}
		if e.Input != h.Input {
			t.Errorf("hook %s: export row %s has Input %v, want %v", h.Name, h.Export, e.Input, h.Input)
		}
		if e.Output != h.Output {
			t.Errorf("hook %s: export row %s has Output %v, want %v", h.Name, h.Export, e.Output, h.Output)
		}
		if h.Doc == "" {
			t.Errorf("hook %s: no Doc, which the PDKs' documentation is made from", h.Name)
		}
	}
	for _, name := range []string{ExportDescribe, ExportCallTool, ExportDestroy, ExportInstanceReplaced} {
		if e, ok := seen[name]; !ok || e.Hook != "" {
			t.Errorf("%s: row %+v, %v; want a row of no hook", name, e, ok)
		}
	}
	if got, want := len(Exports), len(Hooks)+4; got != want {
		t.Errorf("%d exports, want %d: the hooks' and four others", got, want)
	}
}
