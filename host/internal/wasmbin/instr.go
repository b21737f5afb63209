package wasmbin

// BlockType skips a block type: 0x40 (empty), a value type, or an s33 type index, which it returns (-1
// for the others). wazero reads it as one s33, and so does this, so that a (ref null ht) or (ref ht) type
// is followed by its heap type whichever way the prefix is encoded.
func (r *Reader) BlockType() (int64, error) {
	v, err := r.S33()
	if err != nil {
		return 0, err
	}
	if v == refNullPrefix-0x80 || v == refPrefix-0x80 { // the prefixes as s33: -29 and -28
		return -1, r.SkipLEB(5)
	}
	return max(v, -1), nil
}

// Memarg skips a memory argument: alignment and offset.
func (r *Reader) Memarg() error {
	if _, err := r.U32(); err != nil {
		return err
	}
	_, err := r.U32()
	return err
}

// U32s skips n u32 immediates.
func (r *Reader) U32s(n int) error {
	for i := 0; i < n; i++ {
		if _, err := r.U32(); err != nil {
			return err
		}
	}
	return nil
}

// Immediates skips the immediates of the instruction op, whose opcode byte is at start (for errors), and
// fails on an opcode it does not know.
func (r *Reader) Immediates(op byte, start int) error {
	switch {
	case op >= 0x45 && op <= 0xC4: // numeric, sign extension
		return nil
	case op >= 0x28 && op <= 0x3E: // loads and stores
		return r.Memarg()
	case op >= 0x20 && op <= 0x26: // local.get/set/tee, global.get/set, table.get/set
		return r.U32s(1)
	}
	switch op {
	case 0x00, 0x01, 0x05, 0x0A, 0x0B, 0x0F, 0x1A, 0x1B, 0xD1, 0xD4:
		// unreachable nop else throw_ref end return drop select ref.is_null ref.as_non_null
		return nil
	case 0x02, 0x03, 0x04: // block loop if
		_, err := r.BlockType()
		return err
	case 0x08, 0x0C, 0x0D, 0x10, 0x12, 0x14, 0x15, 0xD2, 0xD5, 0xD6:
		// throw tag, br label, br_if label, call function, return_call function, call_ref type,
		// return_call_ref type, ref.func function, br_on_null label, br_on_non_null label
		return r.U32s(1)
	case 0x11, 0x13: // call_indirect, return_call_indirect: type, table
		return r.U32s(2)
	case 0x3F, 0x40: // memory.size, memory.grow: memory index (a 0x00 byte)
		return r.U32s(1)
	case 0x0E: // br_table: vec(label), default label
		n, err := r.U32()
		if err != nil {
			return err
		}
		for i := uint32(0); i <= n; i++ {
			if _, err := r.U32(); err != nil {
				return err
			}
		}
		return nil
	case 0x1C: // select t*
		_, err := r.ValTypes()
		return err
	case 0x1F: // try_table: block type, vec(catch)
		_, err := r.TryTable(nil)
		return err
	case 0x41: // i32.const
		return r.SkipLEB(5)
	case 0x42: // i64.const
		return r.SkipLEB(10)
	case 0x43: // f32.const
		return r.Skip(4)
	case 0x44: // f64.const
		return r.Skip(8)
	case 0xD0: // ref.null: heap type
		return r.SkipLEB(5)
	case 0xFC:
		return r.misc(start)
	case 0xFD:
		return r.simd(start)
	case 0xFE:
		return r.atomic(start)
	}
	return r.Malformed(start, "unknown opcode %#x", op)
}

// TryTable skips try_table's immediates: a block type and catch clauses, each a kind (0 catch, 1 catch_ref:
// tag and label; 2 catch_all, 3 catch_all_ref: label). It appends the clauses' labels to labels.
func (r *Reader) TryTable(labels []uint32) ([]uint32, error) {
	if _, err := r.BlockType(); err != nil {
		return nil, err
	}
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	for i := uint32(0); i < n; i++ {
		at := r.Pos
		kind, err := r.Byte()
		if err != nil {
			return nil, err
		}
		switch kind {
		case 0, 1:
			_, err = r.U32() // tag
		case 2, 3:
		default:
			return nil, r.Malformed(at, "unknown catch clause kind %#x", kind)
		}
		if err != nil {
			return nil, err
		}
		l, err := r.U32()
		if err != nil {
			return nil, err
		}
		labels = append(labels, l)
	}
	return labels, nil
}

// miscU32s is the number of u32 immediates of each 0xFC instruction: 0-7 the saturating truncations,
// 8 memory.init (data, memory), 9 data.drop, 10 memory.copy (memory, memory), 11 memory.fill, 12 table.init
// (element, table), 13 elem.drop, 14 table.copy (table, table), 15 table.grow, 16 table.size, 17 table.fill.
var miscU32s = [...]int{0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 2, 1, 2, 1, 2, 1, 1, 1}

func (r *Reader) misc(start int) error {
	op, err := r.U32()
	if err != nil {
		return err
	}
	if op >= uint32(len(miscU32s)) {
		return r.Malformed(start, "unknown opcode 0xfc %d", op)
	}
	return r.U32s(miscU32s[op])
}

// simd skips the immediates of a 0xFD instruction (fixed-width SIMD).
func (r *Reader) simd(start int) error {
	op, err := r.U32()
	if err != nil {
		return err
	}
	switch {
	case op <= 0x0B || op == 0x5C || op == 0x5D: // v128.load*, v128.store, v128.load32/64_zero
		return r.Memarg()
	case op == 0x0C || op == 0x0D: // v128.const, i8x16.shuffle
		return r.Skip(16)
	case op >= 0x15 && op <= 0x22: // extract_lane, replace_lane: lane index
		return r.Skip(1)
	case op >= 0x54 && op <= 0x5B: // v128.load/store*_lane: memarg, lane index
		if err := r.Memarg(); err != nil {
			return err
		}
		return r.Skip(1)
	case op > 0xFF:
		return r.Malformed(start, "unknown opcode 0xfd %d", op)
	}
	switch op { // the opcodes the SIMD proposal left unassigned
	case 0x9A, 0xA2, 0xA5, 0xA6, 0xAF, 0xB0, 0xB2, 0xB3, 0xB4, 0xBB, 0xC2, 0xC5, 0xC6, 0xCF, 0xD0, 0xD2, 0xD3, 0xD4, 0xE2, 0xEE:
		return r.Malformed(start, "unknown opcode 0xfd %d", op)
	}
	return nil
}

// atomic skips the immediates of a 0xFE instruction (threads): a memarg, except atomic.fence's 0x00 byte.
func (r *Reader) atomic(start int) error {
	op, err := r.U32()
	if err != nil {
		return err
	}
	switch {
	case op == 0x03:
		return r.Skip(1)
	case op <= 0x02 || (op >= 0x10 && op <= 0x4E):
		return r.Memarg()
	}
	return r.Malformed(start, "unknown opcode 0xfe %d", op)
}

// FuncType is what FuncType reads of a function type.
type FuncType struct {
	Params, Results uint32
	V128            bool // a parameter or a result is a v128
}

// FuncType skips a function type (0x60, the parameter types, the result types) and returns its arity.
func (r *Reader) FuncType() (FuncType, error) {
	var t FuncType
	err := r.funcType(&t, nil)
	return t, err
}

// Signature is a function type's parameter and result types, one byte
// each: a value type's encoding (wazero's api.ValueType), or for a
// reference to a heap type, its prefix (0x63, 0x64) alone. It is what a
// caller that checks a function's signature, not only its arity, reads.
type Signature struct {
	Params, Results []byte
}

// Signature reads a function type as FuncType does, keeping its value types.
func (r *Reader) Signature() (Signature, error) {
	var t FuncType
	var s Signature
	err := r.funcType(&t, &s)
	return s, err
}

// Equal reports whether s and o have the same parameter and result types.
func (s Signature) Equal(o Signature) bool {
	return string(s.Params) == string(o.Params) && string(s.Results) == string(o.Results)
}

// funcType reads a function type into t and, when sig is not nil, its value types into sig.
func (r *Reader) funcType(t *FuncType, sig *Signature) error {
	at := r.Pos
	if b, err := r.Byte(); err != nil {
		return err
	} else if b != 0x60 {
		return r.Malformed(at, "type constructor %#x, want 0x60 (function)", b)
	}
	var params, results *[]byte
	if sig != nil {
		params, results = &sig.Params, &sig.Results
	}
	var err error
	if t.Params, err = r.valTypes(&t.V128, params); err == nil {
		t.Results, err = r.valTypes(&t.V128, results)
	}
	return err
}

// ValTypes skips a vector of value types and returns its length.
func (r *Reader) ValTypes() (uint32, error) {
	var v128 bool
	return r.valTypes(&v128, nil)
}

// valTypes is ValTypes, and sets *v128 if one of the types is v128; when
// keep is not nil, it appends each type's first byte to *keep.
func (r *Reader) valTypes(v128 *bool, keep *[]byte) (uint32, error) {
	n, err := r.U32()
	if err != nil {
		return 0, err
	}
	for i := uint32(0); i < n; i++ {
		if r.Remaining() > 0 {
			*v128 = *v128 || r.Buf[r.Pos] == V128
			if keep != nil {
				*keep = append(*keep, r.Buf[r.Pos]) // one by one: a lying count runs out of bytes first
			}
		}
		if err := r.ValType(); err != nil {
			return 0, err
		}
	}
	return n, nil
}
