package extism

import (
	"slices"
	"strings"
	"testing"

	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// importsMemory is a module that imports the memory of each of from.
func importsMemory(from ...string) *wasmModule {
	m := &wasmModule{}
	for _, f := range from {
		m.imports = append(m.imports, wasmImport{Import: wasmbin.Import{Module: f, Name: "memory", Kind: wasmbin.KindMemory}})
	}
	return m
}

// Linked modules are instantiated with each one whose memory another
// imports first (else in their order, by name), and a cycle of memory
// imports, which no order satisfies, is refused naming its modules.
func TestOrderLinked(t *testing.T) {
	linked := func(names ...string) []guest.LinkedModule {
		var out []guest.LinkedModule
		for _, n := range names {
			out = append(out, guest.LinkedModule{Name: n})
		}
		return out
	}
	names := func(lms []guest.LinkedModule) []string {
		var out []string
		for _, lm := range lms {
			out = append(out, lm.Name)
		}
		return out
	}
	for _, c := range []struct {
		infos map[string]*wasmModule
		in    []string
		want  []string // nil: refused
	}{
		{map[string]*wasmModule{"a": {}, "b": {}}, []string{"a", "b"}, []string{"a", "b"}},
		// a imports z's memory, m none of theirs: z moves before a only.
		{map[string]*wasmModule{"a": importsMemory("z"), "m": {}, "z": {}}, []string{"a", "m", "z"}, []string{"m", "z", "a"}},
		// a chain: a imports b's, b imports c's; and one from a module not linked (refused elsewhere) is no constraint.
		{map[string]*wasmModule{"a": importsMemory("b"), "b": importsMemory("c", "nolib"), "c": {}}, []string{"a", "b", "c"}, []string{"c", "b", "a"}},
		{map[string]*wasmModule{"a": importsMemory("b"), "b": importsMemory("a"), "c": {}}, []string{"a", "b", "c"}, nil},
		{map[string]*wasmModule{"self": importsMemory("self")}, []string{"self"}, nil},
	} {
		in := linked(c.in...)
		got, err := orderLinked(in, c.infos)
		switch {
		case c.want == nil && (err == nil || !strings.Contains(err.Error(), "import each other's memory (a cycle)")):
			t.Errorf("%v: %v, %v; want a cycle refused", c.in, names(got), err)
		case c.want != nil && (err != nil || !slices.Equal(names(got), c.want)):
			t.Errorf("%v: %v, %v; want %v", c.in, names(got), err, c.want)
		}
		if !slices.Equal(names(in), c.in) {
			t.Errorf("%v: orderLinked reordered its argument: %v", c.in, names(in))
		}
	}
	_, err := orderLinked(linked("a", "b", "c"), map[string]*wasmModule{"a": importsMemory("b"), "b": importsMemory("a"), "c": {}})
	if err == nil || !strings.Contains(err.Error(), `"a", "b"`) || strings.Contains(err.Error(), `"c"`) {
		t.Errorf("a cycle of a and b beside c: %v, want it to name a and b only", err)
	}
	shared := sharedMemories(importsMemory("rhs", "nolib"), map[string]*wasmModule{"lhs": importsMemory("mid"), "mid": {}, "rhs": {}})
	if want := map[string]bool{"rhs": true, "mid": true}; len(shared) != len(want) || !shared["rhs"] || !shared["mid"] {
		t.Errorf("sharedMemories: %v, want %v (the linked modules whose memory a module imports)", shared, want)
	}
}
