package extism

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// The Extism loader reads a module's binary, through package wasmbin,
// before anything compiles it: which loader a module goes to is told by its
// imports, and an Extism module's imports of Extism's own HTTP and output
// functions are renamed to morph's (see extismOverrideTypes). Only the
// sections that needs are decoded (types, imports, functions, exports);
// arbitrary bytes give an error, never a panic, and a module wasmbin does
// not understand is left to wazero's decoder, whose errors are the ones
// reported.

// wasmImport is one entry of the import section.
type wasmImport struct {
	wasmbin.Import
	fn wasmbin.Signature // functions only
	// nameAt is where the module name, with its length prefix, starts in
	// the binary, and nameEnd where it ends: what renameImports replaces.
	nameAt, nameEnd int
}

// wasmModule is what the Extism loader needs to know of a module.
type wasmModule struct {
	imports []wasmImport
	exports map[string]wasmbin.Signature // exported functions by name
	// importHead is where the import section starts (its id byte), and
	// importAt and importEnd bound its contents; all 0 when there is none.
	importHead, importAt, importEnd int
}

// Detect reports whether wasm imports Extism's host namespace, which
// makes it a module for the Extism loader. A binary that cannot be read is
// not one: it goes to the ABI v1 loader, whose compiler says what is wrong.
func Detect(wasm []byte) bool {
	m, err := parseWasm(wasm, false)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(m.imports, func(i wasmImport) bool { return i.Module == extismEnv })
}

// parseWasm decodes the imports of wasm and, when full is set, the types of
// its imported and exported functions.
func parseWasm(wasm []byte, full bool) (*wasmModule, error) {
	m := &wasmModule{exports: map[string]wasmbin.Signature{}}
	var types []wasmbin.Signature
	var funcs []uint32 // the type of each function, imported ones first
	var exports []wasmbin.Export
	var exported []uint32 // the function index of each of exports
	err := wasmbin.Walk(wasm, func(s wasmbin.Section) error {
		r := s.Body
		switch {
		case s.ID == wasmbin.IDImport:
			m.importHead, m.importAt, m.importEnd = s.Start, r.Pos, r.End
			return r.Imports(func(at int, imp wasmbin.Import, _ wasmbin.TableLimits) error {
				name := wasmbin.Reader{Buf: wasm, Pos: at, End: r.End}
				if _, err := name.Name(); err != nil { // read already: cannot fail
					return err
				}
				if imp.Kind == wasmbin.KindFunction {
					funcs = append(funcs, imp.Type)
				}
				m.imports = append(m.imports, wasmImport{Import: imp, nameAt: at, nameEnd: name.Pos})
				return nil
			})
		case !full:
		case s.ID == wasmbin.IDType:
			return r.FuncTypes(func(at int, _ wasmbin.FuncType) error {
				t := wasmbin.Reader{Buf: wasm, Pos: at, End: r.End}
				sig, err := t.Signature()
				types = append(types, sig)
				return err
			})
		case s.ID == wasmbin.IDFunction:
			defined, err := r.TypeIndices()
			funcs = append(funcs, defined...)
			return err
		case s.ID == wasmbin.IDExport:
			return r.Exports(func(e wasmbin.Export, index uint32) error {
				if e.Kind == wasmbin.KindFunction {
					exports, exported = append(exports, e), append(exported, index)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !full {
		return m, nil
	}
	typeOf := func(idx uint32) (wasmbin.Signature, error) {
		if int64(idx) >= int64(len(types)) {
			return wasmbin.Signature{}, fmt.Errorf("type index %d out of range", idx)
		}
		return types[idx], nil
	}
	fn := 0
	for i := range m.imports {
		if m.imports[i].Kind != wasmbin.KindFunction {
			continue
		}
		t, err := typeOf(funcs[fn])
		if err != nil {
			return nil, err
		}
		m.imports[i].fn = t
		fn++
	}
	for i, e := range exports {
		if int64(exported[i]) >= int64(len(funcs)) {
			return nil, fmt.Errorf("export %s: function index %d out of range", e.Name, exported[i])
		}
		t, err := typeOf(funcs[exported[i]])
		if err != nil {
			return nil, err
		}
		m.exports[e.Name] = t
	}
	return m, nil
}

// signature is s as messages show it: "(i64, i64) -> (i64)".
func signature(s wasmbin.Signature) string {
	return guest.ValueTypes(s.Params) + " -> " + guest.ValueTypes(s.Results)
}

// renameImports returns a copy of wasm in which the module name of each
// function import of module from whose name is in names becomes to. Nothing
// else changes: the imports keep their order and so every function index.
func renameImports(wasm []byte, m *wasmModule, from, to string, names map[string]bool) []byte {
	var sec bytes.Buffer
	last := m.importAt
	for _, imp := range m.imports {
		if imp.Kind != wasmbin.KindFunction || imp.Module != from || !names[imp.Name] {
			continue
		}
		sec.Write(wasm[last:imp.nameAt])
		sec.Write(wasmbin.AppendName(nil, to))
		last = imp.nameEnd
	}
	sec.Write(wasm[last:m.importEnd])
	out := make([]byte, 0, len(wasm)+sec.Len()-(m.importEnd-m.importAt)+5)
	out = append(out, wasm[:m.importHead]...)
	out = wasmbin.AppendU32(append(out, wasmbin.IDImport), uint32(sec.Len()))
	out = append(out, sec.Bytes()...)
	return append(out, wasm[m.importEnd:]...)
}
