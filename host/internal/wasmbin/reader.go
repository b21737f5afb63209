// Package wasmbin reads the WebAssembly binary format: bounds-checked, so
// that arbitrary bytes give an *Error naming the section and the offset,
// never a panic, and without allocating by any count or size the input
// declares (wazero's decoder does, which is why the host reads a module
// with this package first: see Check).
//
// It knows the WebAssembly 2.0 binary format plus the features wazero v1.12
// accepts (threads, tail calls, extended constant expressions, exception
// handling with try_table, typed function references), and decodes every
// instruction's immediates, so an opcode it does not know is an error,
// never a guess.
package wasmbin

import (
	"errors"
	"fmt"
)

// Kinds of failure, told apart with errors.Is on an *Error.
var (
	// ErrMalformed: the input does not follow the WebAssembly binary format
	// (a truncated or overlong field, an unknown opcode or section, sections
	// out of order). wazero would refuse it too.
	ErrMalformed = errors.New("malformed module")
	// ErrLimit: the module is well formed but declares more of something
	// (locals, functions, table entries, ...) than the host allows (Limits).
	ErrLimit = errors.New("module over a limit")
)

// Error is a failure to read or accept a module. It names the section and
// the byte offset in the input where the problem was found, so that a report
// about a third-party module can be checked with wasm-objdump, and it matches
// its Kind under errors.Is.
type Error struct {
	Kind    error  // ErrMalformed, ErrLimit, or a kind of the caller's (interrupt.ErrUnsupported)
	Section string // "header", "type", "code", ..., "unknown" (an unknown section id)
	Offset  int    // byte offset in the input module
	Msg     string
}

// Error reads "<kind>: <section> section at offset <hex>: <message>", the
// offset in hex as wasm-objdump prints it.
func (e *Error) Error() string {
	return fmt.Sprintf("%v: %s section at offset %#x: %s", e.Kind, e.Section, e.Offset, e.Msg)
}

// Unwrap returns the kind, so that errors.Is(err, ErrMalformed) works on a wrapped *Error.
func (e *Error) Unwrap() error { return e.Kind }

// Reader reads one bounded region of the input. Every read is
// bounds-checked against End, so that a lying size or count fails with an
// *Error instead of a panic or a read into the next section. It keeps the
// whole module in Buf so that positions, and thus error offsets, are
// absolute. A Reader is a value: copy it to peek ahead.
type Reader struct {
	Buf     []byte
	Pos     int
	End     int
	Section string // for errors
}

// NewReader reads all of buf, naming section in its errors.
func NewReader(buf []byte, section string) Reader {
	return Reader{Buf: buf, End: len(buf), Section: section}
}

// Fail returns an *Error of kind at offset off.
func (r *Reader) Fail(kind error, off int, format string, args ...any) error {
	return &Error{Kind: kind, Section: r.Section, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// Malformed returns an ErrMalformed *Error at offset off.
func (r *Reader) Malformed(off int, format string, args ...any) error {
	return r.Fail(ErrMalformed, off, format, args...)
}

// Remaining is the number of bytes left to read.
func (r *Reader) Remaining() int { return r.End - r.Pos }

// Byte reads one byte.
func (r *Reader) Byte() (byte, error) {
	if r.Pos >= r.End {
		return 0, r.Malformed(r.Pos, "unexpected end")
	}
	b := r.Buf[r.Pos]
	r.Pos++
	return b, nil
}

// Skip advances past n bytes.
func (r *Reader) Skip(n int) error {
	if n < 0 || n > r.Remaining() { // n < 0: a u32 size beyond int on a 32-bit platform
		return r.Malformed(r.Pos, "%d bytes needed, %d left", uint32(n), r.Remaining())
	}
	r.Pos += n
	return nil
}

// Sized reads a u32 size and returns a Reader over that many bytes after it, advancing r past them: a
// section, a function body or a name subsection is read through its own Reader so that it cannot overrun
// its declared size.
func (r *Reader) Sized() (Reader, error) {
	n, err := r.U32()
	if err != nil {
		return Reader{}, err
	}
	start := r.Pos
	if err := r.Skip(int(n)); err != nil {
		return Reader{}, err
	}
	return Reader{Buf: r.Buf, Pos: start, End: r.Pos, Section: r.Section}, nil
}

// ExpectEnd fails if anything is left: a declared size that does not match its content is malformed.
func (r *Reader) ExpectEnd() error {
	if r.Remaining() != 0 {
		return r.Malformed(r.Pos, "%d unexpected bytes at the end", r.Remaining())
	}
	return nil
}

// U32 reads an unsigned LEB128 of at most 5 bytes whose unused high bits are zero, as the spec and
// wazero require. Indices, counts and sizes are read with it.
func (r *Reader) U32() (uint32, error) {
	start := r.Pos
	var v uint32
	for i := 0; i < 5; i++ {
		b, err := r.Byte()
		if err != nil {
			return 0, err
		}
		v |= uint32(b&0x7F) << (7 * i)
		if b&0x80 == 0 {
			if i == 4 && b&0xF0 != 0 {
				return 0, r.Malformed(start, "u32 LEB128 overflows 32 bits")
			}
			return v, nil
		}
	}
	return 0, r.Malformed(start, "u32 LEB128 longer than 5 bytes")
}

// S32 reads a signed LEB128 of at most 5 bytes whose unused high bits extend the sign, as the spec
// requires (the i32.const immediate). It accepts a subset of what wazero's decoder does (wazero ignores
// the fifth byte's bit 6) and reads the same value from it, so that a rewrite that re-encodes the value
// never turns a module wazero refuses into one it accepts.
func (r *Reader) S32() (int32, error) {
	start := r.Pos
	var v uint32
	for i := 0; i < 5; i++ {
		b, err := r.Byte()
		if err != nil {
			return 0, err
		}
		v |= uint32(b&0x7F) << (7 * i)
		if b&0x80 != 0 {
			continue
		}
		switch {
		case i == 4 && b&0x78 != 0 && b&0x78 != 0x78: // bits 4-6 must repeat bit 3, the sign
			return 0, r.Malformed(start, "s32 LEB128 overflows 32 bits")
		case i < 4 && b&0x40 != 0:
			v |= ^uint32(0) << (7 * (i + 1)) // sign-extend
		}
		return int32(v), nil
	}
	return 0, r.Malformed(start, "s32 LEB128 longer than 5 bytes")
}

// S33 reads a signed 33-bit LEB128: the encoding of block types and heap types, where negative values
// are type constructors (-64 is 0x40, the empty block type) and non-negative ones type indices.
func (r *Reader) S33() (int64, error) {
	start := r.Pos
	var v int64
	for shift := uint(0); shift < 35; shift += 7 {
		b, err := r.Byte()
		if err != nil {
			return 0, err
		}
		v |= int64(b&0x7F) << shift
		if b&0x80 == 0 {
			if b&0x40 != 0 {
				v |= -1 << (shift + 7) // sign-extend
			}
			if v < -(1<<32) || v >= 1<<32 {
				return 0, r.Malformed(start, "s33 LEB128 out of range")
			}
			return v, nil
		}
	}
	return 0, r.Malformed(start, "s33 LEB128 longer than 5 bytes")
}

// SkipLEB skips a LEB128 number of at most maxLen bytes. Immediates that are copied unchanged (i32 and
// i64 constants, heap types) only need their length, which the continuation bits give whatever the
// signedness; their value is wazero's to check.
func (r *Reader) SkipLEB(maxLen int) error {
	start := r.Pos
	for i := 0; i < maxLen; i++ {
		b, err := r.Byte()
		if err != nil {
			return err
		}
		if b&0x80 == 0 {
			return nil
		}
	}
	return r.Malformed(start, "LEB128 longer than %d bytes", maxLen)
}

// Name reads a vec(byte): a module, field, export or custom section name.
func (r *Reader) Name() ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	start := r.Pos
	if err := r.Skip(int(n)); err != nil {
		return nil, err
	}
	return r.Buf[start:r.Pos], nil
}

// Value type encodings (spec 5.3.3, plus wazero's exnref and typed function references).
const (
	refNullPrefix = 0x63 // (ref null ht), then a heap type
	refPrefix     = 0x64 // (ref ht), then a heap type
)

// V128 is the value type v128, the only one wider than 8 bytes.
const V128 = 0x7B

// ValType skips a value type: one byte, or a reference prefix followed by an s33 heap type.
func (r *Reader) ValType() error {
	start := r.Pos
	b, err := r.Byte()
	if err != nil {
		return err
	}
	switch b {
	case 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F, 0x69: // i32 i64 f32 f64 v128 funcref externref exnref
		return nil
	case refNullPrefix, refPrefix:
		return r.SkipLEB(5)
	}
	return r.Malformed(start, "invalid value type %#x", b)
}

// Limits reads a table or memory limits: a flag (bit 0: has a maximum, bit 1: shared) and u32 bounds.
func (r *Reader) Limits() (min, max uint32, hasMax bool, err error) {
	start := r.Pos
	flag, err := r.Byte()
	if err != nil {
		return 0, 0, false, err
	}
	if flag > 3 {
		return 0, 0, false, r.Malformed(start, "invalid limits flag %#x", flag)
	}
	if min, err = r.U32(); err != nil || flag&1 == 0 {
		return min, 0, false, err
	}
	max, err = r.U32()
	return min, max, true, err
}

// AppendU32 appends v as the shortest unsigned LEB128.
func AppendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendS32 appends v as the shortest signed LEB128 (the i32.const immediate).
func AppendS32(b []byte, v int32) []byte { return AppendS64(b, int64(v)) }

// AppendS64 appends v as the shortest signed LEB128 (the i64.const immediate).
func AppendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// AppendName appends a vec(byte).
func AppendName(b []byte, name string) []byte {
	return append(AppendU32(b, uint32(len(name))), name...)
}
