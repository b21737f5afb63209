package interrupt

import "github.com/morphhost/morph/host/internal/wasmbin"

// The sections that the rewrite extends, or that hold function indices (spec 5.5). Each rewrite reads the
// whole section, copies what it does not change byte for byte, and fails on trailing bytes.

// readTypes counts the types, since the added one takes the next index, and keeps each one's arity (a
// function's locals start after its parameters).
func (m *module) readTypes(r *wasmbin.Reader) error {
	return r.FuncTypes(func(_ int, t wasmbin.FuncType) error {
		m.sigs = append(m.sigs, t)
		m.v128 = m.v128 || t.V128
		m.types++ // at least 3 bytes each, in a section of at most 4 GiB: no overflow
		return nil
	})
}

// readFunctions keeps the type index of every defined function.
func (m *module) readFunctions(r *wasmbin.Reader) error {
	var err error
	m.funcTypes, err = r.TypeIndices()
	m.funcs = uint32(len(m.funcTypes))
	return err
}

// readImports counts the imported functions, globals and memories (the added imports and globals go after them),
// keeps the imported functions' types, and refuses a module that already imports Module.Func or
// Module.StackFunc: it was instrumented already, or it means to supply its own check, and the host could
// not tell the imports apart.
func (m *module) readImports(r *wasmbin.Reader) error {
	return r.Imports(func(at int, imp wasmbin.Import, _ wasmbin.TableLimits) error {
		switch {
		case imp.Module == Module && (imp.Name == Func || imp.Name == StackFunc):
			return &wasmbin.Error{Kind: ErrUnsupported, Section: r.Section, Offset: at,
				Msg: "the module already imports " + Module + "." + imp.Name}
		case imp.Kind == wasmbin.KindFunction:
			m.funcImports++
			m.importTypes = append(m.importTypes, imp.Type)
		case imp.Kind == wasmbin.KindGlobal:
			m.globalImports++
			m.v128 = m.v128 || imp.Type == wasmbin.V128
		case imp.Kind == wasmbin.KindMemory:
			m.memImports++
		}
		return nil
	})
}

// typeSection appends the check's type () -> () after the existing types, so no type index shifts. The
// existing entries, read by readTypes, are copied.
func (w *rewriter) typeSection(r *wasmbin.Reader) ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n+1) // n < MaxUint32: it counts entries readTypes read
	out = append(out, r.Buf[r.Pos:r.End]...)
	return append(out, 0x60, 0, 0), nil
}

// importSection appends the imports of Module.Func and Module.StackFunc after the existing imports
// (already checked by readImports), so that they take the first indices after the imported functions.
func (w *rewriter) importSection(r *wasmbin.Reader) ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n+addedFuncs) // n counts entries readImports read: far below MaxUint32
	out = append(out, r.Buf[r.Pos:r.End]...)
	for _, name := range [addedFuncs]string{Func, StackFunc} {
		out = wasmbin.AppendName(wasmbin.AppendName(out, Module), name)
		out = wasmbin.AppendU32(append(out, 0x00), w.checkType)
	}
	return out, nil
}

// globalSection renumbers ref.func in the initialisers and appends the counter and the stack budget:
// mutable i32s that start at the budget and the stack budget.
func (w *rewriter) globalSection(r *wasmbin.Reader) ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n+2) // n = m.globals < MaxUint32-1: checked by rewrite
	for i := uint32(0); i < n; i++ {
		mark := r.Pos
		if w.graph != nil && r.Remaining() > 0 && r.Buf[r.Pos] == wasmbin.V128 {
			w.graph.wide = true
		}
		if err := r.ValType(); err != nil {
			return nil, err
		}
		if _, err := r.Byte(); err != nil { // mutability
			return nil, err
		}
		out = append(out, r.Buf[mark:r.Pos]...)
		if out, err = w.constExpr(r, out); err != nil {
			return nil, err
		}
	}
	if err := r.ExpectEnd(); err != nil {
		return nil, err
	}
	for _, v := range []uint32{w.budget, w.stack} {
		out = append(out, 0x7F, 0x01, opI32Const) // i32, mutable
		out = append(wasmbin.AppendS32(out, int32(v)), opEnd)
	}
	return out, nil
}

// tableSection renumbers ref.func in table initialisers (typed function references: 0x40 0x00, then the
// table type and a constant expression).
func (w *rewriter) tableSection(r *wasmbin.Reader) ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		mark := r.Pos
		withInit := r.Remaining() > 0 && r.Buf[r.Pos] == 0x40
		if withInit {
			r.Pos++
			if b, err := r.Byte(); err != nil {
				return nil, err
			} else if b != 0 {
				return nil, r.Malformed(r.Pos-1, "table initialiser prefix 0x40 %#x, want 0x40 0x00", b)
			}
		}
		if err := r.ValType(); err != nil {
			return nil, err
		}
		if _, _, _, err := r.Limits(); err != nil {
			return nil, err
		}
		out = append(out, r.Buf[mark:r.Pos]...)
		if withInit {
			if out, err = w.constExpr(r, out); err != nil {
				return nil, err
			}
		}
	}
	return out, r.ExpectEnd()
}

// exportSection renumbers the exported functions; the names and the other kinds are copied.
func (w *rewriter) exportSection(r *wasmbin.Reader) ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		mark := r.Pos
		if _, err := r.Name(); err != nil {
			return nil, err
		}
		kind, err := r.Byte()
		if err != nil {
			return nil, err
		}
		out = append(out, r.Buf[mark:r.Pos]...)
		if kind == 0x00 {
			if w.graph != nil {
				peek := *r
				idx, _ := peek.U32() // funcIdx reports a bad one
				w.graph.noteRoot(idx)
			}
			out, err = w.funcIdx(r, out)
		} else {
			mark = r.Pos
			_, err = r.U32()
			out = append(out, r.Buf[mark:r.Pos]...)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, r.ExpectEnd()
}

// startSection renumbers the start function.
func (w *rewriter) startSection(r *wasmbin.Reader) ([]byte, error) {
	if w.graph != nil {
		peek := *r
		idx, _ := peek.U32() // funcIdx reports a bad one
		w.graph.noteRoot(idx)
	}
	out, err := w.funcIdx(r, nil)
	if err != nil {
		return nil, err
	}
	return out, r.ExpectEnd()
}

// elementSection renumbers the function indices of element segments in all eight encodings (spec 5.5.12).
// The flags' bit 0 means passive or declarative (else active, with an offset expression), bit 1 with bit 0
// clear an explicit table index, bits 0-1 not both clear an element kind or reference type, and bit 2
// initialisers that are constant expressions instead of function indices.
func (w *rewriter) elementSection(r *wasmbin.Reader) ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		mark := r.Pos
		flags, err := r.U32()
		if err != nil {
			return nil, err
		}
		if flags > 7 {
			return nil, r.Malformed(mark, "element segment flags %d, want 0 to 7", flags)
		}
		if flags&3 == 2 {
			if _, err := r.U32(); err != nil { // table index
				return nil, err
			}
		}
		out = append(out, r.Buf[mark:r.Pos]...)
		if flags&1 == 0 {
			if out, err = w.constExpr(r, out); err != nil { // offset
				return nil, err
			}
		}
		mark = r.Pos
		if flags&3 != 0 {
			if flags&4 != 0 {
				err = r.ValType() // reference type
			} else {
				_, err = r.Byte() // element kind
			}
			if err != nil {
				return nil, err
			}
		}
		count, err := r.U32()
		if err != nil {
			return nil, err
		}
		out = append(out, r.Buf[mark:r.Pos]...)
		for j := uint32(0); j < count; j++ {
			if flags&4 != 0 {
				out, err = w.constExpr(r, out)
			} else {
				if w.graph != nil {
					peek := *r
					idx, _ := peek.U32() // funcIdx reports a bad one
					w.graph.note(opRefFunc, 0, idx)
				}
				out, err = w.funcIdx(r, out)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return out, r.ExpectEnd()
}

// nameSection renumbers the subsections keyed by function index: 1 (function names), 2 (local names) and
// 3 (label names, from the extended name section proposal). It keeps the subsections whose indices do not
// shift (0 module, 4 type, 5 table, 6 memory, 7 global, 8 element, 9 data unless the data segments were
// merged, 10 field and 11 tag names) and drops any other, or one it cannot parse: names are debugging aids, the spec asks engines to ignore a
// malformed name section, and a wrong one would mislabel every stack trace.
func (w *rewriter) nameSection(r *wasmbin.Reader) []byte {
	var out []byte
	for r.Remaining() > 0 {
		start := r.Pos
		id, _ := r.Byte() // cannot fail: remaining > 0
		sub, err := r.Sized()
		if err != nil {
			return out // the rest is unreadable
		}
		switch {
		case id == 1 || id == 2 || id == 3:
			if payload, err := w.funcNames(&sub, id != 1); err == nil {
				out = appendSection(out, id, payload)
			}
		case id == 9 && w.data != nil: // data names, whose indices the merge of data segments changed
		case id <= 11:
			out = append(out, r.Buf[start:sub.End]...)
		}
	}
	return out
}

// funcNames renumbers a name map (indirect false: function index, name) or an indirect name map (function
// index, then a name map of its locals or labels, whose indices do not change).
func (w *rewriter) funcNames(r *wasmbin.Reader, indirect bool) ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		if out, err = w.funcIdx(r, out); err != nil {
			return nil, err
		}
		mark := r.Pos
		if indirect {
			err = skipNameMap(r)
		} else {
			_, err = r.Name()
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r.Buf[mark:r.Pos]...)
	}
	return out, r.ExpectEnd()
}

// skipNameMap skips a vector of (index, name).
func skipNameMap(r *wasmbin.Reader) error {
	n, err := r.U32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		if _, err := r.U32(); err != nil {
			return err
		}
		if _, err := r.Name(); err != nil {
			return err
		}
	}
	return nil
}
