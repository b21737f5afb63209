package host

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/tetratelabs/wazero/api"
)

// The Extism loader reads a module's binary itself, before anything
// compiles it: which loader a module goes to is told by its imports, and an
// Extism module's imports of Extism's own HTTP and output functions are
// renamed to morph's (see extismOverrideTypes). Only the sections that needs are
// decoded (types, imports, functions, exports); every read is bounds-checked,
// so arbitrary bytes give an error, never a panic, and a module this reader
// does not understand is left to wazero's decoder, whose errors are the ones
// reported.

// Section ids of the WebAssembly binary format.
const (
	wasmSectionType     = 1
	wasmSectionImport   = 2
	wasmSectionFunction = 3
	wasmSectionExport   = 7
)

// wasmFunc is a function type: its parameter and result value types.
type wasmFunc struct{ params, results []api.ValueType }

func (f wasmFunc) String() string { return valueTypes(f.params) + " -> " + valueTypes(f.results) }

func (f wasmFunc) equal(g wasmFunc) bool {
	return slices.Equal(f.params, g.params) && slices.Equal(f.results, g.results)
}

// wasmImport is one entry of the import section.
type wasmImport struct {
	module, name string
	kind         byte     // 0 function, 1 table, 2 memory, 3 global, 4 tag
	fn           wasmFunc // functions only
	// nameAt is where the module name, with its length prefix, starts in
	// the binary, and nameEnd where it ends: what renameImports replaces.
	nameAt, nameEnd int
}

// wasmModule is what the Extism loader needs to know of a module.
type wasmModule struct {
	imports []wasmImport
	exports map[string]wasmFunc // exported functions by name
	// importHead is where the import section starts (its id byte), and
	// importAt and importEnd bound its contents; all 0 when there is none.
	importHead, importAt, importEnd int
}

// importsExtism reports whether wasm imports Extism's host namespace, which
// makes it a module for the Extism loader. A binary that cannot be read is
// not one: it goes to the ABI v1 loader, whose compiler says what is wrong.
func importsExtism(wasm []byte) bool {
	m, err := parseWasm(wasm, false)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(m.imports, func(i wasmImport) bool { return i.module == extismEnv })
}

// parseWasm decodes the imports of wasm and, when full is set, the types of
// its imported and exported functions.
func parseWasm(wasm []byte, full bool) (*wasmModule, error) {
	r := &wasmReader{b: wasm}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly module")
	}
	r.pos = 8
	m := &wasmModule{exports: map[string]wasmFunc{}}
	var types []wasmFunc
	var funcs []uint32 // the type of each function, imported ones first
	var exports []wasmExport
	for r.pos < len(r.b) && r.err == nil {
		head := r.pos
		id := r.byte()
		size := int(r.u32())
		if r.err != nil || size > len(r.b)-r.pos {
			return nil, errors.New("truncated section")
		}
		end := r.pos + size
		sec := &wasmReader{b: r.b[:end], pos: r.pos}
		switch {
		case id == wasmSectionImport:
			m.importHead, m.importAt, m.importEnd = head, r.pos, end
			m.imports = sec.imports(&funcs)
		case !full:
		case id == wasmSectionType:
			types = sec.types()
		case id == wasmSectionFunction:
			for n := sec.u32(); n > 0 && sec.err == nil; n-- {
				funcs = append(funcs, sec.u32())
			}
		case id == wasmSectionExport:
			exports = sec.exports()
		}
		if sec.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, sec.err)
		}
		r.pos = end
	}
	if r.err != nil {
		return nil, r.err
	}
	if !full {
		return m, nil
	}
	typeOf := func(idx uint32) (wasmFunc, error) {
		if int64(idx) >= int64(len(types)) {
			return wasmFunc{}, fmt.Errorf("type index %d out of range", idx)
		}
		return types[idx], nil
	}
	fn := 0
	for i := range m.imports {
		if m.imports[i].kind != 0 {
			continue
		}
		t, err := typeOf(funcs[fn])
		if err != nil {
			return nil, err
		}
		m.imports[i].fn = t
		fn++
	}
	for _, e := range exports {
		if int64(e.index) >= int64(len(funcs)) {
			return nil, fmt.Errorf("export %s: function index %d out of range", e.name, e.index)
		}
		t, err := typeOf(funcs[e.index])
		if err != nil {
			return nil, err
		}
		m.exports[e.name] = t
	}
	return m, nil
}

// renameImports returns a copy of wasm in which the module name of each
// function import of module from whose name is in names becomes to. Nothing
// else changes: the imports keep their order and so every function index.
func renameImports(wasm []byte, m *wasmModule, from, to string, names map[string]bool) []byte {
	var sec bytes.Buffer
	last := m.importAt
	for _, imp := range m.imports {
		if imp.kind != 0 || imp.module != from || !names[imp.name] {
			continue
		}
		sec.Write(wasm[last:imp.nameAt])
		sec.Write(binary.AppendUvarint(nil, uint64(len(to))))
		sec.WriteString(to)
		last = imp.nameEnd
	}
	sec.Write(wasm[last:m.importEnd])
	out := make([]byte, 0, len(wasm)+sec.Len()-(m.importEnd-m.importAt)+5)
	out = append(out, wasm[:m.importHead]...)
	out = append(out, wasmSectionImport)
	out = binary.AppendUvarint(out, uint64(sec.Len()))
	out = append(out, sec.Bytes()...)
	return append(out, wasm[m.importEnd:]...)
}

// wasmExport is one exported function.
type wasmExport struct {
	name  string
	index uint32
}

// wasmReader reads the binary format; the first error sticks, and every
// later read returns zero values.
type wasmReader struct {
	b   []byte
	pos int
	err error
}

func (r *wasmReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *wasmReader) byte() byte {
	if r.err != nil || r.pos >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	r.pos++
	return r.b[r.pos-1]
}

// u32 reads an unsigned LEB128 number of at most 32 bits.
func (r *wasmReader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail("malformed integer")
	return 0
}

// u64 skips an unsigned LEB128 number of up to 64 bits (memory64 limits).
func (r *wasmReader) u64() {
	for i := 0; i < 10; i++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.fail("malformed integer")
}

func (r *wasmReader) name() string {
	n := int(r.u32())
	if r.err != nil || n > len(r.b)-r.pos {
		r.fail("truncated name")
		return ""
	}
	r.pos += n
	return string(r.b[r.pos-n : r.pos])
}

// valType reads one value type; only the single-byte ones exist before the
// GC proposal, which this reader (like wazero) does not support.
func (r *wasmReader) valType() api.ValueType {
	switch t := r.byte(); t {
	case api.ValueTypeI32, api.ValueTypeI64, api.ValueTypeF32, api.ValueTypeF64,
		api.ValueTypeExternref, 0x7b /* v128 */, 0x70 /* funcref */ :
		return t
	default:
		r.fail("unsupported value type 0x%x", t)
		return 0
	}
}

func (r *wasmReader) limits() {
	flags := r.byte()
	r.u64()
	if flags&1 != 0 {
		r.u64()
	}
}

func (r *wasmReader) types() []wasmFunc {
	var out []wasmFunc
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		if form := r.byte(); form != 0x60 {
			r.fail("unsupported type form 0x%x", form)
			return nil
		}
		var f wasmFunc
		for k := r.u32(); k > 0 && r.err == nil; k-- {
			f.params = append(f.params, r.valType())
		}
		for k := r.u32(); k > 0 && r.err == nil; k-- {
			f.results = append(f.results, r.valType())
		}
		out = append(out, f)
	}
	return out
}

// imports reads the import section, appending the type index of each
// imported function to funcs.
func (r *wasmReader) imports(funcs *[]uint32) []wasmImport {
	var out []wasmImport
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		imp := wasmImport{nameAt: r.pos}
		imp.module = r.name()
		imp.nameEnd = r.pos
		imp.name = r.name()
		imp.kind = r.byte()
		switch imp.kind {
		case 0: // function: its type index
			*funcs = append(*funcs, r.u32())
		case 1: // table: reference type, limits
			r.valType()
			r.limits()
		case 2: // memory: limits
			r.limits()
		case 3: // global: value type, mutability
			r.valType()
			r.byte()
		case 4: // tag: attribute, type index
			r.byte()
			r.u32()
		default:
			r.fail("unknown import kind %d", imp.kind)
		}
		out = append(out, imp)
	}
	return out
}

func (r *wasmReader) exports() []wasmExport {
	var out []wasmExport
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		name := r.name()
		kind := r.byte()
		idx := r.u32()
		if kind == 0 {
			out = append(out, wasmExport{name: name, index: idx})
		}
	}
	return out
}
