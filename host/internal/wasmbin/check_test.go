package wasmbin_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/morphhost/morph/host/internal/wasmbin"
	"github.com/morphhost/morph/internal/testenv"
)

// realModules are the guests this repository builds: every one must pass the
// default limits with room to spare.
func realModules(t *testing.T) map[string][]byte {
	t.Helper()
	var paths []string
	for _, glob := range []string{"../../../guests/testdata/*.wasm", "../../../examples/*/*.wasm", "../../../guests/extism/*.wasm",
		"../../../examples/rust-hooks/target/wasm32-unknown-unknown/release/*.wasm"} {
		m, _ := filepath.Glob(glob)
		paths = append(paths, m...)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	if len(out) == 0 {
		t.Fatal("no modules built: run `make guests` in the repository root")
	}
	return out
}

func TestRealModulesPass(t *testing.T) {
	for name, wasm := range realModules(t) {
		s, err := wasmbin.Check(wasm, wasmbin.Limits{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		t.Logf("%-28s %8d bytes: %6d functions, depth %4d, nesting cost %9d, locals %7d (largest %5d), tables %v",
			name, len(wasm), s.Functions, s.MaxDepth, s.NestingCost, s.TotalLocals, s.LargestLocal, s.Tables)
	}
}

// BenchmarkCheck is what every load pays before anything compiles: the
// standard Go example (3.5 MB) and the Rust example (336 KB).
func BenchmarkCheck(b *testing.B) {
	for _, m := range []struct{ name, path string }{
		{"go-hooks", "../../../examples/go-hooks/go-hooks.wasm"},
		{"rust-hooks", "../../../examples/rust-hooks/target/wasm32-unknown-unknown/release/rust_hooks.wasm"},
	} {
		b.Run(m.name, func(b *testing.B) {
			wasm := testenv.File(b, m.path, "examples rust")
			b.SetBytes(int64(len(wasm)))
			for b.Loop() {
				if _, err := wasmbin.Check(wasm, wasmbin.Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Hand-assembly of hostile modules.

func u32(v uint32) []byte { return wasmbin.AppendU32(nil, v) }

func vec(items ...[]byte) []byte {
	out := u32(uint32(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func sec(id byte, payload ...[]byte) []byte {
	var p []byte
	for _, b := range payload {
		p = append(p, b...)
	}
	return append(append([]byte{id}, u32(uint32(len(p)))...), p...)
}

func body(code ...byte) []byte { return append(u32(uint32(len(code))), code...) }

func module(sections ...[]byte) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		out = append(out, s...)
	}
	return out
}

func repeat(n int, b ...byte) []byte {
	out := make([]byte, 0, n*len(b))
	for range n {
		out = append(out, b...)
	}
	return out
}

var (
	voidType = sec(1, vec([]byte{0x60, 0, 0}))
	oneFunc  = sec(3, vec(u32(0)))
)

// funcs is a module of n functions, each with code.
func funcs(n int, code []byte) []byte {
	types, bodies := make([][]byte, n), make([][]byte, n)
	for i := range n {
		types[i], bodies[i] = u32(0), body(code...)
	}
	return module(voidType, sec(3, vec(types...)), sec(10, vec(bodies...)))
}

func nested(depth int) []byte {
	return append(append(append([]byte{0}, repeat(depth, 0x02, 0x40)...), repeat(depth, 0x0B)...), 0x0B)
}

// Every limit refuses the module that exceeds it, naming the limit and the
// value, and accepts the module at the limit. Each hostile module is tiny
// or small: what it declares, not its size, is the attack.
func TestLimits(t *testing.T) {
	localsDecl := func(counts ...uint32) []byte {
		code := u32(uint32(len(counts)))
		for _, c := range counts {
			code = append(append(code, u32(c)...), 0x7F)
		}
		return append(code, 0x0B)
	}
	cases := []struct {
		name   string
		wasm   []byte
		limits wasmbin.Limits
		limit  string
		value  uint64
	}{
		{"billions of locals", module(voidType, oneFunc, sec(10, vec(body(localsDecl(0xFFFFFFFF)...)))), wasmbin.Limits{}, "FunctionLocals", 0xFFFFFFFF},
		{"locals summed over declarations", module(voidType, oneFunc, sec(10, vec(body(localsDecl(40_000, 40_000)...)))), wasmbin.Limits{}, "FunctionLocals", 80_000},
		{"locals of all functions", funcs(5, localsDecl(1000)), wasmbin.Limits{TotalLocals: 4000}, "TotalLocals", 5000},
		{"one long body", funcs(1, append(append([]byte{0}, repeat(1000, 0x01)...), 0x0B)), wasmbin.Limits{FunctionBytes: 1000}, "FunctionBytes", 1002},
		{"a large code section", funcs(10, append(append([]byte{0}, repeat(100, 0x01)...), 0x0B)), wasmbin.Limits{CodeBytes: 1000}, "CodeBytes", 1031},
		{"declared functions", module(voidType, sec(3, u32(0xFFFFFFFF))), wasmbin.Limits{}, "Functions", 0xFFFFFFFF},
		{"declared globals", module(sec(6, u32(0xFFFFFFF0))), wasmbin.Limits{}, "Globals", 0xFFFFFFF0},
		{"declared exports", module(sec(7, u32(0xFFFFFFF0))), wasmbin.Limits{}, "Exports", 0xFFFFFFF0},
		{"declared imports", module(sec(2, u32(0xFFFFFFF0))), wasmbin.Limits{}, "Imports", 0xFFFFFFF0},
		{"declared data segments", module(sec(11, u32(0xFFFFFFF0))), wasmbin.Limits{}, "DataSegments", 0xFFFFFFF0},
		{"declared element segments", module(sec(9, u32(0xFFFFFFF0))), wasmbin.Limits{}, "ElementSegments", 0xFFFFFFF0},
		{"element items", module(voidType, oneFunc, sec(4, vec([]byte{0x70, 0, 1})), sec(9, vec(append([]byte{1, 0}, u32(0xFFFFFFF0)...)))), wasmbin.Limits{}, "ElementItems", 0xFFFFFFF0},
		{"declared tags", module(sec(13, u32(0xFFFFFFF0))), wasmbin.Limits{}, "Tags", 0xFFFFFFF0},
		{"declared tables", module(sec(4, u32(0xFFFFFFF0))), wasmbin.Limits{}, "Tables", 0xFFFFFFF0},
		{"a huge table", module(sec(4, vec(append([]byte{0x70, 0}, u32(0xFFFFFFFF)...)))), wasmbin.Limits{}, "TableEntries", 0xFFFFFFFF},
		{"tables huge together", module(sec(4, vec(append([]byte{0x70, 0}, u32(600_000)...), append([]byte{0x70, 0}, u32(600_000)...)))), wasmbin.Limits{}, "TableEntries", 1_200_000},
		{"an imported table", module(sec(2, vec(append(append(append([]byte{}, []byte("\x01m\x01t")...), 0x01, 0x70, 0), u32(0xFFFFFFFF)...)))), wasmbin.Limits{}, "TableEntries", 0xFFFFFFFF},
		{"many types", module(sec(1, append(u32(3), repeat(3, 0x60, 0, 0)...))), wasmbin.Limits{Types: 2}, "Types", 3},
		{"a type of many parameters", module(sec(1, vec(append(append(append([]byte{0x60}, u32(1001)...), repeat(1001, 0x7F)...), 0)))), wasmbin.Limits{}, "TypeArity", 1001},
		{"nested blocks", funcs(1, nested(2001)), wasmbin.Limits{}, "NestingDepth", 2001},
		{"nesting cost", funcs(5, nested(100)), wasmbin.Limits{NestingCost: 40_000}, "NestingCost", 50_000},
		{"custom sections", module(repeat(4, sec(0, []byte("\x01x"))...)), wasmbin.Limits{CustomSections: 3}, "CustomSections", 4},
		{"declared function names", module(sec(0, []byte("\x04name"), []byte{1}, u32(5), u32(0xFFFFFFF0))), wasmbin.Limits{}, "Names", 0xFFFFFFF0},
		{"declared local names", module(sec(0, []byte("\x04name"), []byte{2}, u32(7), u32(1), u32(0), u32(0xFFFFFFF0))), wasmbin.Limits{}, "Names", 0xFFFFFFF0},
		{"module size", funcs(1, []byte{0, 0x0B}), wasmbin.Limits{ModuleBytes: 20}, "ModuleBytes", 24},
		{"a long export name", module(voidType, oneFunc, sec(7, vec(append(append(u32(70_000), repeat(70_000, 'x')...), 0, 0))),
			sec(10, vec(body(0, 0x0B)))), wasmbin.Limits{}, "NameBytes", 70_000},
		{"a long function name", module(voidType, oneFunc, sec(10, vec(body(0, 0x0B))),
			sec(0, []byte("\x04name"), []byte{1}, u32(70_000+5), u32(1), u32(0), u32(70_000), repeat(70_000, 'f'))), wasmbin.Limits{}, "NameBytes", 70_000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := wasmbin.Check(c.wasm, c.limits)
			var le *wasmbin.LimitError
			if !errors.As(err, &le) || !errors.Is(err, wasmbin.ErrLimit) {
				t.Fatalf("Check = %v, want a *LimitError", err)
			}
			if le.Limit != c.limit || le.Value != c.value {
				t.Fatalf("%v: limit %s value %d, want %s %d", err, le.Limit, le.Value, c.limit, c.value)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(c.value)) || !strings.Contains(err.Error(), fmt.Sprint(le.Max)) {
				t.Fatalf("message %q names neither the value nor the limit", err)
			}
		})
	}
}

// At its limit a module passes; one more is refused.
func TestLimitBoundaries(t *testing.T) {
	if _, err := wasmbin.Check(funcs(1, nested(2000)), wasmbin.Limits{}); err != nil {
		t.Fatalf("depth 2000: %v", err)
	}
	if _, err := wasmbin.Check(module(voidType, oneFunc, sec(10, vec(body(1, 0x80, 0x86, 0x03, 0x7F, 0x0B)))), wasmbin.Limits{}); err != nil {
		t.Fatalf("50,000 locals: %v", err)
	}
	// A parameter and a local; a global: the last index of each is fine.
	if _, err := wasmbin.Check(module(sec(1, vec([]byte{0x60, 1, 0x7F, 0})), oneFunc, sec(6, vec([]byte{0x7F, 1, 0x41, 0, 0x0B})),
		sec(10, vec(body(1, 1, 0x7F, 0x41, 1, 0x21, 1, 0x41, 1, 0x24, 0, 0x0B)))), wasmbin.Limits{}); err != nil {
		t.Fatalf("indices in range: %v", err)
	}
	s, err := wasmbin.Check(module(sec(4, vec([]byte{0x70, 1, 2, 5}, []byte{0x70, 0, 3}))), wasmbin.Limits{})
	if err != nil {
		t.Fatalf("tables: %v", err)
	}
	if want := []wasmbin.TableLimits{{Min: 2, Max: 5, HasMax: true}, {Min: 3}}; !slices.Equal(s.Tables, want) {
		t.Errorf("Tables = %+v, want %+v", s.Tables, want)
	}
}

// Malformed modules are ErrMalformed, never a panic; lying counts fail when
// the bytes run out, without allocating by them.
func TestMalformed(t *testing.T) {
	for name, wasm := range map[string][]byte{
		"two memories":        module(sec(5, vec([]byte{0, 1}, []byte{0, 1}))),
		"types beyond bytes":  module(sec(1, u32(1_000_000))),
		"early end":           funcs(1, []byte{0, 0x0B, 0x01, 0x0B}),
		"data beyond bytes":   module(sec(11, vec(append([]byte{1}, u32(0xFFFFFFF0)...)))),
		"names beyond bytes":  module(sec(0, []byte("\x04name"), []byte{1}, u32(3), u32(100))),
		"unknown opcode":      funcs(1, []byte{0, 0x27, 0x0B}),
		"bad data flags":      module(sec(11, vec([]byte{7}))),
		"truncated type":      module(sec(1, vec([]byte{0x60}))),
		"not a function type": module(sec(1, vec([]byte{0x5F, 0, 0}))),
		// One past the last local or global: after the deadline rewrite, the
		// counter's; the guest could reset it for ever.
		"local index past the locals":   module(sec(1, vec([]byte{0x60, 1, 0x7F, 0})), oneFunc, sec(10, vec(body(1, 1, 0x7F, 0x41, 1, 0x21, 2, 0x0B)))),
		"global index past the globals": module(voidType, oneFunc, sec(6, vec([]byte{0x7F, 1, 0x41, 0, 0x0B})), sec(10, vec(body(0, 0x41, 1, 0x24, 1, 0x0B)))),
	} {
		if _, err := wasmbin.Check(wasm, wasmbin.Limits{}); !errors.Is(err, wasmbin.ErrMalformed) {
			t.Errorf("%s: Check = %v, want ErrMalformed", name, err)
		}
	}
}
