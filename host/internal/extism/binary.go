package extism

import (
	"fmt"
	"slices"

	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// The Extism loader reads a module's binary, through package wasmbin,
// before anything compiles it: which loader a module goes to is told by its
// imports, and an Extism module's imports and exports are checked against
// what morph provides and calls (extism.go). Only the
// sections that needs are decoded (types, imports, functions, exports);
// arbitrary bytes give an error, never a panic, and a module wasmbin does
// not understand is left to wazero's decoder, whose errors are the ones
// reported.

// wasmImport is one entry of the import section.
type wasmImport struct {
	wasmbin.Import
	fn wasmbin.Signature // functions only
}

// wasmModule is what the Extism loader needs to know of a module.
type wasmModule struct {
	imports []wasmImport
	exports map[string]wasmbin.Signature // exported functions by name
	memory  uint64                       // the bytes its memory declares at least (0: none)
	// ownMemory: it defines a memory (one it imports is its exporter's).
	ownMemory bool
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
// its imported and exported functions and its memory's minimum.
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
			return r.Imports(func(_ int, imp wasmbin.Import, _ wasmbin.TableLimits) error {
				if imp.Kind == wasmbin.KindFunction {
					funcs = append(funcs, imp.Type)
				}
				m.imports = append(m.imports, wasmImport{Import: imp})
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
		case s.ID == wasmbin.IDMemory:
			n, err := r.U32()
			if err != nil || n == 0 {
				return err
			}
			m.ownMemory = true
			min, _, _, err := r.Limits()
			m.memory = uint64(min) * wasmPage
			return err
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

// wasmPage is WebAssembly's page size.
const wasmPage = 64 << 10

// signature is s as messages show it: "(i64, i64) -> (i64)".
func signature(s wasmbin.Signature) string {
	return guest.ValueTypes(s.Params) + " -> " + guest.ValueTypes(s.Results)
}
