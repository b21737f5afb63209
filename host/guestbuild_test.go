package host

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// A small assembler of guests, for the hostile matrix and the
// structure-aware fuzz target: what a hostile module declares (billions of
// locals, huge tables, bodies of a million instructions) cannot be written
// in WAT, and committing such binaries would hide what they are.

func leb(v uint64) []byte { return wasmbin.AppendU32(nil, uint32(v)) } // every count and index here fits a u32

func sleb(v int64) []byte { return wasmbin.AppendS64(nil, v) }

func wvec(items ...[]byte) []byte { return append(leb(uint64(len(items))), bytes.Join(items, nil)...) }

func wsec(id byte, payload ...[]byte) []byte {
	p := bytes.Join(payload, nil)
	return append(append([]byte{id}, leb(uint64(len(p)))...), p...)
}

func wname(s string) []byte { return append(leb(uint64(len(s))), s...) }

func wbody(code []byte) []byte { return append(leb(uint64(len(code))), code...) }

func i32const(v int64) []byte { return append([]byte{0x41}, sleb(v)...) }

// Offsets in the assembled guest's memory.
const (
	guestManifestAt = 16
	guestAnswerAt   = 2048
	guestInputAt    = 4096
	guestAnswer     = `{"system_prompt":"ok"}`
)

// guestImport is an imported function: its module, name and type (0x60 ...).
type guestImport struct {
	module, name string
	typ          []byte
}

// WASI and morph:host/v1 functions the hostile guests import.
var (
	importPollOneoff = guestImport{"wasi_snapshot_preview1", "poll_oneoff", []byte{0x60, 4, 0x7F, 0x7F, 0x7F, 0x7F, 1, 0x7F}}
	importRandomGet  = guestImport{"wasi_snapshot_preview1", "random_get", []byte{0x60, 2, 0x7F, 0x7F, 1, 0x7F}}
	importFdWrite    = guestImport{"wasi_snapshot_preview1", "fd_write", []byte{0x60, 4, 0x7F, 0x7F, 0x7F, 0x7F, 1, 0x7F}}
	importLog        = guestImport{"morph:host/v1", "log", []byte{0x60, 3, 0x7F, 0x7F, 0x7F, 0}}
)

// guestFunc is an extra function: its type (an index into guestModule.types),
// its body (locals, code and the final end), and an export name if any.
type guestFunc struct {
	typ    uint32
	body   []byte
	export string
}

// guestModule is a guest that implements build_prompt: a memory of two
// pages, morph_describe answering a manifest, and morph_build_prompt
// running attack, then answering guestAnswer (or running hook, a body of its
// own). In ABI v1 (native) it also has the marker and an allocator answering
// a fixed address; as an Extism module (extismABI) it imports Extism's
// kernel and answers through output_set. Function indices (fn): the
// imports, then 0 morph_alloc (Extism: emit), 1 morph_describe, 2 the
// marker (Extism: a no-op), 3 morph_build_prompt, 4... funcs.
type guestModule struct {
	name      string
	locals    []byte        // morph_build_prompt's locals declaration; nil: none
	attack    []byte        // code morph_build_prompt runs before it answers (stack-neutral)
	hook      []byte        // instead of locals and attack: the whole body of morph_build_prompt (ABI v1 only)
	types     [][]byte      // extra function types, each 0x60 ... (see typ)
	imports   []guestImport // functions the guest imports (after Extism's kernel), see imported
	destroy   []byte        // code morph_destroy runs before it returns; nil: no morph_destroy
	funcs     []guestFunc   // extra functions
	tables    [][]byte      // table types
	globals   [][]byte      // global entries
	elements  [][]byte      // element segments
	customs   [][]byte      // custom sections, whole, at the end
	memory    []byte        // the memory type; nil: two pages
	extismABI bool          // an Extism module
	reply     string        // what morph_build_prompt answers; "": guestAnswer
	as        string        // the hook function 3 implements instead of build_prompt (e.g. before_tool_call)
}

// extism is g as an Extism module.
func (g guestModule) extism() guestModule {
	g.extismABI = true
	return g
}

// extismImports are the functions of Extism's kernel an Extism guest
// imports, first, with their types (types 0 to 2).
var extismImports = []struct {
	name string
	typ  []byte
}{
	{"alloc", []byte{0x60, 1, 0x7E, 1, 0x7E}},      // (i64) -> (i64)
	{"store_u8", []byte{0x60, 2, 0x7E, 0x7F, 0}},   // (i64, i32) -> ()
	{"output_set", []byte{0x60, 2, 0x7E, 0x7E, 0}}, // (i64, i64) -> ()
}

// baseTypes are the types before g.types: ABI v1's (i32) -> (i32), (i32,
// i32) -> (i64) and () -> (); Extism's three imports', () -> (i32) and emit's
// (i32, i32) -> ().
func (g guestModule) baseTypes() [][]byte {
	if g.extismABI {
		var ts [][]byte
		for _, imp := range extismImports {
			ts = append(ts, imp.typ)
		}
		return append(ts, []byte{0x60, 0, 1, 0x7F}, []byte{0x60, 2, 0x7F, 0x7F, 0})
	}
	return [][]byte{{0x60, 1, 0x7F, 1, 0x7F}, {0x60, 2, 0x7F, 0x7F, 1, 0x7E}, {0x60, 0, 0}}
}

// typ is the index of g.types[i]; the imports' types follow them.
func (g guestModule) typ(i int) uint64 { return uint64(len(g.baseTypes()) + i) }

// kernel is how many functions of Extism's kernel g imports.
func (g guestModule) kernel() int {
	if g.extismABI {
		return len(extismImports)
	}
	return 0
}

// fn is the index of the guest's i-th own function (see guestModule).
func (g guestModule) fn(i int) uint64 { return uint64(g.kernel() + len(g.imports) + i) }

// imported is the index of the function g imports as imp (one of g.imports).
func (g guestModule) imported(imp guestImport) uint64 {
	for i, m := range g.imports {
		if m.module == imp.module && m.name == imp.name {
			return uint64(g.kernel() + i)
		}
	}
	panic("not imported: " + imp.name)
}

// call is a call instruction of the function g imports as imp.
func (g guestModule) call(imp guestImport) []byte {
	return append([]byte{0x10}, leb(g.imported(imp))...)
}

// answer is the code that answers [ptr, ptr+n) of the guest's memory and
// returns from an export.
func (g guestModule) answer(ptr, n int) []byte {
	if g.extismABI {
		b := append(append(i32const(int64(ptr)), i32const(int64(n))...), 0x10)
		return append(append(b, leb(g.fn(0))...), 0x41, 0) // call emit; i32.const 0 (success)
	}
	return append([]byte{0x42}, sleb(int64(ptr)<<32|int64(n))...) // i64.const ptr<<32|n
}

// extismEmit is emit(ptr, len): it copies [ptr, ptr+len) of the guest's
// memory into a new kernel block, a byte at a time, and sets it as the output.
var extismEmit = []byte{2, 1, 0x7E, 1, 0x7F, // locals: off i64 (2), i i32 (3)
	0x20, 1, 0xAD, 0x10, 0, 0x21, 2, // off = alloc(len)
	0x02, 0x40, 0x03, 0x40, // block loop
	0x20, 3, 0x20, 1, 0x4F, 0x0D, 1, // br_if 1 (i >= len)
	0x20, 2, 0x20, 3, 0xAD, 0x7C, // off + i
	0x20, 0, 0x20, 3, 0x6A, 0x2D, 0, 0, // load8_u(ptr + i)
	0x10, 1, // store_u8
	0x20, 3, 0x41, 1, 0x6A, 0x21, 3, 0x0C, 0, // i++; br 0
	0x0B, 0x0B, // end end
	0x20, 2, 0x20, 1, 0xAD, 0x10, 2, 0x0B} // output_set(off, len)

func (g guestModule) wasm() []byte {
	name := g.name
	if name == "" {
		name = "guest"
	}
	hook := cmp.Or(g.as, abi.HookBuildPrompt)
	manifest := fmt.Sprintf(`{"name":%q,"version":"1","abi_version":1,"hooks":[%q]}`, name, hook)
	locals := g.locals
	if locals == nil {
		locals = []byte{0}
	}
	reply := cmp.Or(g.reply, guestAnswer)
	body := g.hook
	if body == nil {
		body = append(append(append(slices.Clone(locals), g.attack...), g.answer(guestAnswerAt, len(reply))...), 0x0B)
	}
	describe := wbody(append(append([]byte{0}, g.answer(guestManifestAt, len(manifest))...), 0x0B))
	var imports, funcTypes, bodies, exports [][]byte
	export := func(name string, i int) {
		exports = append(exports, append(wname(name), append([]byte{0}, leb(g.fn(i))...)...))
	}
	types := append(g.baseTypes(), g.types...)
	if g.extismABI {
		for i, imp := range extismImports {
			imports = append(imports, append(append(wname("extism:host/env"), wname(imp.name)...), 0, byte(i)))
		}
		funcTypes = [][]byte{{4}, {3}, {3}, {3}} // emit, describe, the no-op, build_prompt
		bodies = [][]byte{wbody(extismEmit), describe, wbody([]byte{0, 0x41, 0, 0x0B}), wbody(body)}
	} else {
		funcTypes = [][]byte{{0}, {1}, {2}, {1}}
		bodies = [][]byte{wbody(append(append([]byte{0}, i32const(guestInputAt)...), 0x0B)), describe, wbody([]byte{0, 0x0B}), wbody(body)}
		export("morph_alloc", 0)
		export("morph_abi_v1", 2)
	}
	for _, imp := range g.imports {
		imports = append(imports, append(append(append(wname(imp.module), wname(imp.name)...), 0), leb(uint64(len(types)))...))
		types = append(types, imp.typ)
	}
	export("morph_describe", 1)
	export("morph_"+hook, 3)
	exports = append(exports, append(wname("memory"), 2, 0))
	funcs := g.funcs
	if g.destroy != nil {
		done := append(append([]byte{0}, g.destroy...), append(g.answer(0, 0), 0x0B)...)
		if g.extismABI {
			done = append(append([]byte{0}, g.destroy...), 0x41, 0, 0x0B)
		}
		funcs = append(slices.Clone(funcs), guestFunc{typ: ^uint32(0), body: done, export: "morph_destroy"})
	}
	for i, f := range funcs {
		t := g.typ(int(f.typ))
		if f.typ == ^uint32(0) { // morph_destroy: the type of the exports
			t = uint64(funcTypes[1][0])
		}
		funcTypes = append(funcTypes, leb(t))
		bodies = append(bodies, wbody(f.body))
		if f.export != "" {
			export(f.export, 4+i)
		}
	}
	memory := g.memory
	if memory == nil {
		memory = []byte{0, 2}
	}
	segment := func(at int, s string) []byte {
		return append(append(append([]byte{0}, i32const(int64(at))...), 0x0B), wname(s)...)
	}
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = append(out, wsec(1, wvec(types...))...)
	if len(imports) > 0 {
		out = append(out, wsec(2, wvec(imports...))...)
	}
	out = append(out, wsec(3, wvec(funcTypes...))...)
	if len(g.tables) > 0 {
		out = append(out, wsec(4, wvec(g.tables...))...)
	}
	out = append(out, wsec(5, wvec(memory))...)
	if len(g.globals) > 0 {
		out = append(out, wsec(6, wvec(g.globals...))...)
	}
	out = append(out, wsec(7, wvec(exports...))...)
	if len(g.elements) > 0 {
		out = append(out, wsec(9, wvec(g.elements...))...)
	}
	out = append(out, wsec(10, wvec(bodies...))...)
	out = append(out, wsec(11, wvec(segment(guestManifestAt, manifest), segment(guestAnswerAt, reply)))...)
	for _, c := range g.customs {
		out = append(out, c...)
	}
	return out
}
