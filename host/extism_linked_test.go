package host

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// Extism's linking example, as the Rust runtime and js-sdk run it: a
// linked module named extism:host/user adds its exports to that
// namespace's host functions, beside morph's (and an embedding host's of
// other names), and it has no memory of its own. An embedding host's
// function of a name the module exports too is refused naming both.
func TestExtismLinkedUserModule(t *testing.T) {
	l := newLoader(t)
	cfg := func(fns ...HostFunction) Config {
		return Config{Path: fixture(t, "extism_reflect"), Tools: []ExportTool{{Export: "reflect", Input: "field:s"}, {Export: "roots"}},
			Modules: []LinkedModule{{Name: "extism:host/user", Path: fixture(t, "extism_upper")}}, HostFunctions: fns}
	}
	p := load(t, l, cfg())
	for range 2 {
		if out, err := callTool(t, p, "reflect", map[string]any{"s": "Hello, world!"}); err != nil || out != "HELLO, WORLD!" {
			t.Fatalf("reflect: %q, %v; want the linked extism:host/user's host_reflect to upper-case it", out, err)
		}
	}
	if out, err := callTool(t, p, "roots", nil); err != nil || out != `{"roots":[]}` {
		t.Fatalf("roots: %q, %v; want morph's list_roots, of the same namespace", out, err)
	}

	// An embedding host's function of another name is in the namespace too.
	i64 := []api.ValueType{api.ValueTypeI64}
	roots := HostFunction{Name: "list_roots", Results: i64, Func: func(_ context.Context, call *HostCall, stack []uint64) (err error) {
		stack[0], err = call.Write([]byte(`{"roots":[{"uri":"file:///embedder"}]}`))
		return err
	}}
	p = load(t, l, cfg(roots))
	if out, err := callTool(t, p, "roots", nil); err != nil || !strings.Contains(out, "file:///embedder") {
		t.Fatalf("roots with the embedding host's list_roots: %q, %v; want its answer", out, err)
	}
	if out, err := callTool(t, p, "reflect", map[string]any{"s": "abc"}); err != nil || out != "ABC" {
		t.Fatalf("reflect beside the embedding host's list_roots: %q, %v", out, err)
	}

	// inspect suggests linking the module for the function it imports,
	// and nothing once it is linked.
	hint := `imports extism:host/user."host_reflect": a Go program embedding morph can provide it (host.Config.HostFunctions), ` +
		`or a module linked as "extism:host/user" that exports it (under [plugins.modules]: "extism:host/user" = "PATH")`
	for _, linked := range []bool{false, true} {
		c := cfg()
		if !linked {
			c.Modules = nil
		}
		rep, err := l.Inspect(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.ContainsFunc(rep.Suggested, func(s string) bool { return strings.Contains(s, hint) }); got == linked {
			t.Errorf("inspect, the module linked %v: suggested %q, want the hint %v", linked, rep.Suggested, !linked)
		}
	}

	for _, module := range []string{"", "extism:host/user"} {
		clash := HostFunction{Module: module, Name: "host_reflect", Params: i64, Results: i64, Func: func(context.Context, *HostCall, []uint64) error { return nil }}
		loadRefused(t, l, "an embedding host's host_reflect in module "+module, cfg(clash),
			`host function extism:host/user.host_reflect is given both by the embedding host (host.Config.HostFunctions) and by the linked module "extism:host/user"`)
	}
	bad := cfg()
	bad.Path, bad.Tools = fixture(t, "extism_badimport"), nil
	loadRefused(t, l, "a host function none provides", bad,
		`imports extism:host/user.my_function, a host function neither morph nor the embedding host provides, nor the linked module "extism:host/user" exports`)
	other := cfg()
	other.Modules[0].Name = "extism:host/env"
	loadRefused(t, l, "a linked module named extism:host/env", other, `modules[0]: name "extism:host/env"`, "not main, extism:* but extism:host/user")
}

// js-sdk's circular modules: lhs and rhs call each other, and the main
// module imports rhs's memory. They answer what js-sdk expects (127, a
// little-endian u64); the main module's writes are rhs's reads; the shared
// memory is counted once within memory_mb, not twice and not zero; and the
// bounds hold across the modules: max_linked_depth through the proxies,
// max_stack_kb in rhs's recursion, which the main module calls directly.
func TestExtismLinkedSharedMemory(t *testing.T) {
	l := newLoader(t)
	const shared = 40 * 64 << 10 // extism_circ_rhs's memory
	cfg := func(limits Limits) Config {
		limits.Timeout = time.Minute
		return Config{Path: fixture(t, "extism_circ_main"),
			Tools:   []ExportTool{{Export: "encalculate"}, {Export: "shared"}, {Export: "deep", Input: "field:s"}},
			Modules: []LinkedModule{{Name: "rhs", Path: fixture(t, "extism_circ_rhs")}, {Name: "lhs", Path: fixture(t, "extism_circ_lhs")}},
			Limits:  limits}
	}
	// 4 MiB holds the shared memory and the kernel's once, not twice.
	p := load(t, l, cfg(Limits{MemoryMiB: 4}))
	if out, err := callTool(t, p, "encalculate", nil); err != nil || out != "\x7f\x00\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("encalculate: %q, %v; want 127 as a little-endian u64 (js-sdk's answer)", out, err)
	}
	if out, err := callTool(t, p, "shared", nil); err != nil || out != "\x2a\x00\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("shared: %q, %v; want 42, which the main module stored, read by rhs", out, err)
	}
	n, ok := p.IdleMemory()
	if !ok || n < shared || n >= 2*shared {
		t.Fatalf("an instance's memory: %d bytes (idle %v), want the shared memory's %d counted once, with the kernel's", n, ok, shared)
	}

	if _, err := callTool(t, p, "deep", map[string]any{"s": strings.Repeat("x", 100)}); err != nil {
		t.Fatalf("deep 100: %v", err)
	}
	_, err := callTool(t, p, "deep", map[string]any{"s": strings.Repeat("x", 1<<20)})
	var stack *StackLimitError
	if !errors.Is(err, ErrTrap) || !errors.As(err, &stack) {
		t.Fatalf("rhs recursing 1<<20 deep, called directly by the main module: %v, want ErrTrap with a StackLimitError", err)
	}

	p = load(t, l, cfg(Limits{MaxLinkedDepth: 4}))
	_, err = callTool(t, p, "encalculate", nil)
	var depth *LinkedDepthError
	if !errors.Is(err, ErrTrap) || !errors.As(err, &depth) || depth.Limit != 4 {
		t.Fatalf("encalculate within max_linked_depth = 4 (it nests 13 deep): %v, want ErrTrap with a LinkedDepthError", err)
	}

	table := cfg(Limits{})
	table.Path, table.Tools = fixture(t, "extism_linkedtable"), []ExportTool{{Export: "run"}}
	loadRefused(t, l, "a table, a global and an unlinked memory", table,
		"imports rhs.table, a table: linked modules may share a memory (Extism's circular-module convention) but not tables or globals",
		"imports rhs.counter, a global: linked modules may share a memory",
		"imports nolib.memory, a memory: an Extism plugin may import a memory only from one of its linked modules ([plugins.modules])")
	loadRefused(t, l, "a cycle of memory imports", Config{Path: fixture(t, "extism_noimports"), Tools: []ExportTool{{Export: "answer"}},
		Modules: []LinkedModule{{Name: "peer", Path: fixture(t, "extism_memcycle")}}},
		`linked modules "peer" import each other's memory (a cycle)`)
	noMem := cfg(Limits{})
	noMem.Modules = []LinkedModule{{Name: "rhs", Path: fixture(t, "extism_upper")}, {Name: "lhs", Path: fixture(t, "extism_biglib")}}
	loadRefused(t, l, "a memory the linked module does not export", noMem, `imports rhs.memory, a memory the linked module "rhs" does not export`)
}

// loadRefused loads cfg, which must fail with ErrLoad and an error
// containing each of want.
func loadRefused(t *testing.T, l *Loader, what string, cfg Config, want ...string) {
	t.Helper()
	_, err := l.Load(context.Background(), cfg)
	if !errors.Is(err, ErrLoad) {
		t.Fatalf("%s: %v, want ErrLoad", what, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error lacks %q:\n%v", what, w, err)
		}
	}
}
