package interrupt

import "fmt"

// reader reads one bounded region of the input. Every read is bounds-checked against end, so that
// a lying size or count fails with an *Error instead of a panic or a read into the next section.
// It keeps the whole module in buf so that positions, and thus error offsets, are absolute.
type reader struct {
	buf     []byte
	pos     int
	end     int
	section string // for errors
}

// malformed returns an ErrMalformed *Error at offset off.
func (r *reader) malformed(off int, format string, args ...any) error {
	return &Error{Kind: ErrMalformed, Section: r.section, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func (r *reader) remaining() int { return r.end - r.pos }

func (r *reader) readByte() (byte, error) {
	if r.pos >= r.end {
		return 0, r.malformed(r.pos, "unexpected end")
	}
	b := r.buf[r.pos]
	r.pos++
	return b, nil
}

// skip advances past n bytes.
func (r *reader) skip(n int) error {
	if n < 0 || n > r.remaining() { // n < 0: a u32 size beyond int on a 32-bit platform
		return r.malformed(r.pos, "%d bytes needed, %d left", uint32(n), r.remaining())
	}
	r.pos += n
	return nil
}

// sized reads a u32 size and returns a reader over that many bytes after it, advancing r past them: a
// section, a function body or a name subsection is read through its own reader so that it cannot overrun
// its declared size.
func (r *reader) sized() (reader, error) {
	n, err := r.u32()
	if err != nil {
		return reader{}, err
	}
	start := r.pos
	if err := r.skip(int(n)); err != nil {
		return reader{}, err
	}
	return reader{buf: r.buf, pos: start, end: r.pos, section: r.section}, nil
}

// expectEnd fails if anything is left: a declared size that does not match its content is malformed.
func (r *reader) expectEnd() error {
	if r.remaining() != 0 {
		return r.malformed(r.pos, "%d unexpected bytes at the end", r.remaining())
	}
	return nil
}

// u32 reads an unsigned LEB128 of at most 5 bytes whose unused high bits are zero, as the spec and
// wazero require. Indices, counts and sizes are read with it.
func (r *reader) u32() (uint32, error) {
	start := r.pos
	var v uint32
	for i := 0; i < 5; i++ {
		b, err := r.readByte()
		if err != nil {
			return 0, err
		}
		v |= uint32(b&0x7F) << (7 * i)
		if b&0x80 == 0 {
			if i == 4 && b&0xF0 != 0 {
				return 0, r.malformed(start, "u32 LEB128 overflows 32 bits")
			}
			return v, nil
		}
	}
	return 0, r.malformed(start, "u32 LEB128 longer than 5 bytes")
}

// s33 reads a signed 33-bit LEB128: the encoding of block types and heap types, where negative values
// are type constructors (-64 is 0x40, the empty block type) and non-negative ones type indices.
func (r *reader) s33() (int64, error) {
	start := r.pos
	var v int64
	for shift := uint(0); shift < 35; shift += 7 {
		b, err := r.readByte()
		if err != nil {
			return 0, err
		}
		v |= int64(b&0x7F) << shift
		if b&0x80 == 0 {
			if b&0x40 != 0 {
				v |= -1 << (shift + 7) // sign-extend
			}
			if v < -(1<<32) || v >= 1<<32 {
				return 0, r.malformed(start, "s33 LEB128 out of range")
			}
			return v, nil
		}
	}
	return 0, r.malformed(start, "s33 LEB128 longer than 5 bytes")
}

// skipLEB skips a LEB128 number of at most maxLen bytes. Immediates that are copied unchanged (i32 and
// i64 constants, heap types) only need their length, which the continuation bits give whatever the
// signedness; their value is wazero's to check.
func (r *reader) skipLEB(maxLen int) error {
	start := r.pos
	for i := 0; i < maxLen; i++ {
		b, err := r.readByte()
		if err != nil {
			return err
		}
		if b&0x80 == 0 {
			return nil
		}
	}
	return r.malformed(start, "LEB128 longer than %d bytes", maxLen)
}

// name reads a vec(byte): a module, field, export or custom section name.
func (r *reader) name() ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	start := r.pos
	if err := r.skip(int(n)); err != nil {
		return nil, err
	}
	return r.buf[start:r.pos], nil
}

// Value type encodings (spec 5.3.3, plus wazero's exnref and typed function references).
const (
	refNullPrefix = 0x63 // (ref null ht), then a heap type
	refPrefix     = 0x64 // (ref ht), then a heap type
)

// valType skips a value type: one byte, or a reference prefix followed by an s33 heap type.
func (r *reader) valType() error {
	start := r.pos
	b, err := r.readByte()
	if err != nil {
		return err
	}
	switch b {
	case 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F, 0x69: // i32 i64 f32 f64 v128 funcref externref exnref
		return nil
	case refNullPrefix, refPrefix:
		return r.skipLEB(5)
	}
	return r.malformed(start, "invalid value type %#x", b)
}

// limits skips a table or memory limits: a flag (bit 0: has a maximum, bit 1: shared) and u32 bounds.
func (r *reader) limits() error {
	start := r.pos
	flag, err := r.readByte()
	if err != nil {
		return err
	}
	if flag > 3 {
		return r.malformed(start, "invalid limits flag %#x", flag)
	}
	if _, err := r.u32(); err != nil {
		return err
	}
	if flag&1 != 0 {
		_, err = r.u32()
	}
	return err
}

// appendU32 appends v as the shortest unsigned LEB128.
func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// appendS32 appends v as the shortest signed LEB128 (the i32.const immediate).
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// appendName appends a vec(byte).
func appendName(b []byte, name string) []byte {
	return append(appendU32(b, uint32(len(name))), name...)
}
