package interrupt

// The sections that the rewrite extends, or that hold function indices (spec 5.5). Each rewrite reads the
// whole section, copies what it does not change byte for byte, and fails on trailing bytes.

// readTypes counts the types, since the added one takes the next index, and keeps each one's parameter
// count, where a function's locals start. An entry is a function type or, as wazero also accepts, a
// recursive type group (0x4E, from the GC proposal) of several function types.
func (m *module) readTypes(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		group := uint32(1)
		if r.remaining() > 0 && r.buf[r.pos] == 0x4E {
			r.pos++
			if group, err = r.u32(); err != nil {
				return err
			}
		}
		for j := uint32(0); j < group; j++ {
			params, err := r.funcType()
			if err != nil {
				return err
			}
			m.params = append(m.params, params)
			m.types++ // at least 3 bytes each, in a section of at most 4 GiB: no overflow
		}
	}
	return r.expectEnd()
}

// funcType skips a function type (0x60, the parameter types, the result types) and returns its number
// of parameters.
func (r *reader) funcType() (uint32, error) {
	at := r.pos
	if b, err := r.readByte(); err != nil {
		return 0, err
	} else if b != 0x60 {
		return 0, r.malformed(at, "type constructor %#x, want 0x60 (function)", b)
	}
	params, err := r.valTypes()
	if err != nil {
		return 0, err
	}
	_, err = r.valTypes()
	return params, err
}

// valTypes skips a vector of value types and returns its length.
func (r *reader) valTypes() (uint32, error) {
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	for i := uint32(0); i < n; i++ {
		if err := r.valType(); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// readFunctions keeps the type index of every defined function.
func (m *module) readFunctions(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	m.funcs = n
	for i := uint32(0); i < n; i++ {
		t, err := r.u32()
		if err != nil {
			return err
		}
		m.funcTypes = append(m.funcTypes, t)
	}
	return r.expectEnd()
}

// readImports counts the imported functions and globals (the added import and global go after them) and
// refuses a module that already imports Module.Func: it was instrumented already, or it means to supply
// its own check, and the host could not tell the two imports apart.
func (m *module) readImports(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		start := r.pos
		mod, err := r.name()
		if err != nil {
			return err
		}
		name, err := r.name()
		if err != nil {
			return err
		}
		if string(mod) == Module && string(name) == Func {
			return &Error{Kind: ErrUnsupported, Section: r.section, Offset: start,
				Msg: "the module already imports " + Module + "." + Func}
		}
		kindAt := r.pos
		kind, err := r.readByte()
		if err != nil {
			return err
		}
		switch kind {
		case 0x00: // function: type index
			m.funcImports++
			_, err = r.u32()
		case 0x01: // table: reference type, limits
			if err = r.valType(); err == nil {
				err = r.limits()
			}
		case 0x02: // memory: limits
			err = r.limits()
		case 0x03: // global: value type, mutability
			m.globalImports++
			if err = r.valType(); err == nil {
				_, err = r.readByte()
			}
		case 0x04: // tag: attribute, type index
			if _, err = r.readByte(); err == nil {
				_, err = r.u32()
			}
		default:
			return r.malformed(kindAt, "unknown import kind %#x", kind)
		}
		if err != nil {
			return err
		}
	}
	return r.expectEnd()
}

// typeSection appends the check's type () -> () after the existing types, so no type index shifts. The
// existing entries, read by readTypes, are copied.
func (w *rewriter) typeSection(r *reader) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n+1) // n < MaxUint32: it counts entries readTypes read
	out = append(out, r.buf[r.pos:r.end]...)
	return append(out, 0x60, 0, 0), nil
}

// importSection appends the import of Module.Func after the existing imports (already checked by
// readImports), so that it takes the first index after the imported functions.
func (w *rewriter) importSection(r *reader) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n+1) // n < MaxUint32: it counts entries readImports read
	out = append(out, r.buf[r.pos:r.end]...)
	out = appendName(appendName(out, Module), Func)
	return appendU32(append(out, 0x00), w.checkType), nil
}

// globalSection renumbers ref.func in the initialisers and appends the counter: a mutable i32 that starts
// at the period.
func (w *rewriter) globalSection(r *reader) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n+1) // n = m.globals < MaxUint32: checked by rewrite
	for i := uint32(0); i < n; i++ {
		mark := r.pos
		if err := r.valType(); err != nil {
			return nil, err
		}
		if _, err := r.readByte(); err != nil { // mutability
			return nil, err
		}
		out = append(out, r.buf[mark:r.pos]...)
		if out, err = w.constExpr(r, out); err != nil {
			return nil, err
		}
	}
	if err := r.expectEnd(); err != nil {
		return nil, err
	}
	out = append(out, 0x7F, 0x01, opI32Const) // i32, mutable
	return append(appendS32(out, int32(w.period)), opEnd), nil
}

// tableSection renumbers ref.func in table initialisers (typed function references: 0x40 0x00, then the
// table type and a constant expression).
func (w *rewriter) tableSection(r *reader) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		mark := r.pos
		withInit := r.remaining() > 0 && r.buf[r.pos] == 0x40
		if withInit {
			r.pos++
			if b, err := r.readByte(); err != nil {
				return nil, err
			} else if b != 0 {
				return nil, r.malformed(r.pos-1, "table initialiser prefix 0x40 %#x, want 0x40 0x00", b)
			}
		}
		if err := r.valType(); err != nil {
			return nil, err
		}
		if err := r.limits(); err != nil {
			return nil, err
		}
		out = append(out, r.buf[mark:r.pos]...)
		if withInit {
			if out, err = w.constExpr(r, out); err != nil {
				return nil, err
			}
		}
	}
	return out, r.expectEnd()
}

// exportSection renumbers the exported functions; the names and the other kinds are copied.
func (w *rewriter) exportSection(r *reader) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		mark := r.pos
		if _, err := r.name(); err != nil {
			return nil, err
		}
		kind, err := r.readByte()
		if err != nil {
			return nil, err
		}
		out = append(out, r.buf[mark:r.pos]...)
		if kind == 0x00 {
			out, err = w.funcIdx(r, out)
		} else {
			mark = r.pos
			_, err = r.u32()
			out = append(out, r.buf[mark:r.pos]...)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, r.expectEnd()
}

// startSection renumbers the start function.
func (w *rewriter) startSection(r *reader) ([]byte, error) {
	out, err := w.funcIdx(r, nil)
	if err != nil {
		return nil, err
	}
	return out, r.expectEnd()
}

// elementSection renumbers the function indices of element segments in all eight encodings (spec 5.5.12).
// The flags' bit 0 means passive or declarative (else active, with an offset expression), bit 1 with bit 0
// clear an explicit table index, bits 0-1 not both clear an element kind or reference type, and bit 2
// initialisers that are constant expressions instead of function indices.
func (w *rewriter) elementSection(r *reader) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		mark := r.pos
		flags, err := r.u32()
		if err != nil {
			return nil, err
		}
		if flags > 7 {
			return nil, r.malformed(mark, "element segment flags %d, want 0 to 7", flags)
		}
		if flags&3 == 2 {
			if _, err := r.u32(); err != nil { // table index
				return nil, err
			}
		}
		out = append(out, r.buf[mark:r.pos]...)
		if flags&1 == 0 {
			if out, err = w.constExpr(r, out); err != nil { // offset
				return nil, err
			}
		}
		mark = r.pos
		if flags&3 != 0 {
			if flags&4 != 0 {
				err = r.valType() // reference type
			} else {
				_, err = r.readByte() // element kind
			}
			if err != nil {
				return nil, err
			}
		}
		count, err := r.u32()
		if err != nil {
			return nil, err
		}
		out = append(out, r.buf[mark:r.pos]...)
		for j := uint32(0); j < count; j++ {
			if flags&4 != 0 {
				out, err = w.constExpr(r, out)
			} else {
				if w.graph != nil {
					peek := *r
					idx, _ := peek.u32() // funcIdx reports a bad one
					w.graph.note(opRefFunc, 0, idx)
				}
				out, err = w.funcIdx(r, out)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return out, r.expectEnd()
}

// nameSection renumbers the subsections keyed by function index: 1 (function names), 2 (local names) and
// 3 (label names, from the extended name section proposal). It keeps the subsections whose indices do not
// shift (0 module, 4 type, 5 table, 6 memory, 7 global, 8 element, 9 data, 10 field and 11 tag names) and
// drops any other, or one it cannot parse: names are debugging aids, the spec asks engines to ignore a
// malformed name section, and a wrong one would mislabel every stack trace.
func (w *rewriter) nameSection(r *reader) []byte {
	var out []byte
	for r.remaining() > 0 {
		start := r.pos
		id, _ := r.readByte() // cannot fail: remaining > 0
		sub, err := r.sized()
		if err != nil {
			return out // the rest is unreadable
		}
		switch {
		case id == 1 || id == 2 || id == 3:
			if payload, err := w.funcNames(&sub, id != 1); err == nil {
				out = appendSection(out, id, payload)
			}
		case id <= 11:
			out = append(out, r.buf[start:sub.end]...)
		}
	}
	return out
}

// funcNames renumbers a name map (indirect false: function index, name) or an indirect name map (function
// index, then a name map of its locals or labels, whose indices do not change).
func (w *rewriter) funcNames(r *reader, indirect bool) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		if out, err = w.funcIdx(r, out); err != nil {
			return nil, err
		}
		mark := r.pos
		if indirect {
			err = skipNameMap(r)
		} else {
			_, err = r.name()
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r.buf[mark:r.pos]...)
	}
	return out, r.expectEnd()
}

// skipNameMap skips a vector of (index, name).
func skipNameMap(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		if _, err := r.u32(); err != nil {
			return err
		}
		if _, err := r.name(); err != nil {
			return err
		}
	}
	return nil
}
