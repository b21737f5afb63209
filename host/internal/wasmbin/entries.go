package wasmbin

// The entries of the sections that both the limits check and the deadline rewrite read, one reader each.

// FuncTypes reads a type section, calling each with every function type, in index order, and where it
// starts (for errors). An entry is a function type or, as wazero also accepts, a recursive type group
// (0x4E, from the GC proposal) of several.
func (r *Reader) FuncTypes(each func(at int, t FuncType) error) error {
	n, err := r.U32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		group := uint32(1)
		if r.Remaining() > 0 && r.Buf[r.Pos] == 0x4E {
			r.Pos++
			if group, err = r.U32(); err != nil {
				return err
			}
		}
		for j := uint32(0); j < group; j++ {
			at := r.Pos
			t, err := r.FuncType()
			if err != nil {
				return err
			}
			if err := each(at, t); err != nil {
				return err
			}
		}
	}
	return r.ExpectEnd()
}

// Imports reads an import section, calling each with every entry: where it starts (for errors), its
// names, kind and type, and, for a table, its limits.
func (r *Reader) Imports(each func(at int, imp Import, table TableLimits) error) error {
	n, err := r.U32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		at := r.Pos
		module, err := r.Name()
		if err != nil {
			return err
		}
		name, err := r.Name()
		if err != nil {
			return err
		}
		kindAt := r.Pos
		kind, err := r.Byte()
		if err != nil {
			return err
		}
		imp := Import{Module: string(module), Name: string(name), Kind: kind}
		var table TableLimits
		switch kind {
		case KindFunction: // type index
			imp.Type, err = r.U32()
		case KindTable: // reference type, limits
			if err = r.ValType(); err == nil {
				table.Min, table.Max, table.HasMax, err = r.Limits()
			}
		case KindMemory: // limits
			_, _, _, err = r.Limits()
		case KindGlobal: // value type, mutability
			if r.Remaining() > 0 {
				imp.Type = uint32(r.Buf[r.Pos])
			}
			if err = r.ValType(); err == nil {
				_, err = r.Byte()
			}
		case KindTag: // attribute, type index
			if _, err = r.Byte(); err == nil {
				_, err = r.U32()
			}
		default:
			return r.Malformed(kindAt, "unknown import kind %#x", kind)
		}
		if err != nil {
			return err
		}
		if err := each(at, imp, table); err != nil {
			return err
		}
	}
	return r.ExpectEnd()
}

// TypeIndices reads a function section: each defined function's type index, in order.
func (r *Reader) TypeIndices() ([]uint32, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	var types []uint32
	for i := uint32(0); i < n; i++ {
		t, err := r.U32()
		if err != nil {
			return nil, err
		}
		types = append(types, t) // read one by one: a lying count runs out of bytes first
	}
	return types, r.ExpectEnd()
}

// Exports reads an export section, calling each with every entry and the index, in its kind's index
// space, of what it exports.
func (r *Reader) Exports(each func(e Export, index uint32) error) error {
	n, err := r.U32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		name, err := r.Name()
		if err != nil {
			return err
		}
		kind, err := r.Byte()
		if err != nil {
			return err
		}
		index, err := r.U32()
		if err != nil {
			return err
		}
		if err := each(Export{Name: string(name), Kind: kind}, index); err != nil {
			return err
		}
	}
	return r.ExpectEnd()
}
