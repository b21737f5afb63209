package wasmbin

import (
	"fmt"
	"strconv"
	"strings"
)

// SnapshotPrefix starts the names of the exports PrepareSnapshot adds. A
// module that already exports a name with it is not prepared.
const SnapshotPrefix = "morph.snapshot."

// Snapshot is what a host must do by hand for the first instance of a
// module PrepareSnapshot rewrote, which no longer initializes its memory
// or calls its start function itself, and what it reads and writes of every
// instance.
type Snapshot struct {
	// Globals are the exports of the module's mutable globals, one for each
	// global it defines as mutable: an image holds their values.
	Globals []string
	// Start is the export of the start function the module had, "" when it
	// had none. The first instance calls it after writing Data, as
	// instantiation would have.
	Start string
	// Data are the module's active data segments, in order: the first
	// instance writes them into its memory, as instantiation would have.
	Data []DataSegment
}

// DataSegment is one active data segment: its bytes (a slice of the
// module's) at Offset in memory 0.
type DataSegment struct {
	Offset uint32
	Bytes  []byte
}

// PrepareSnapshot rewrites wasm, a module that passed Check, so that an
// instance of it can start from an image of another's memory and globals
// (the host's pre-initialized snapshots) instead of initializing itself:
// its active data segments are emptied (instantiating then writes nothing,
// and touches no page of an image mapped copy-on-write), its start section
// is removed and the start function exported, and each mutable global it
// defines is exported so that the host can read and set it. Everything else
// is unchanged: the indices of functions, globals and segments, the code,
// the tables and their elements. It fails, saying why, for a module whose
// state an image cannot hold: a mutable global of a reference or vector type
// (its value is not a number another instance could take), a segment offset
// other than a constant, or an export name under SnapshotPrefix.
func PrepareSnapshot(wasm []byte) ([]byte, *Snapshot, error) {
	sections, err := Sections(wasm)
	if err != nil {
		return nil, nil, err
	}
	snap := &Snapshot{}
	var importedGlobals uint32
	var globals []uint32 // the mutable globals' indices
	var exports, data []byte
	hasExports := false
	start := -1
	for _, s := range sections {
		r := s.Body
		switch s.ID {
		case IDImport:
			err = r.Imports(func(_ int, imp Import, _ TableLimits) error {
				if imp.Kind == KindGlobal {
					importedGlobals++
				}
				return nil
			})
		case IDGlobal:
			globals, err = mutableGlobals(r, importedGlobals)
		case IDExport:
			hasExports = true
			exports = r.Buf[r.Pos:r.End] // before Exports reads on
			err = r.Exports(func(e Export, _ uint32) error {
				if strings.HasPrefix(e.Name, SnapshotPrefix) {
					return fmt.Errorf("the module exports %q, a name the host's snapshots use", e.Name)
				}
				return nil
			})
		case IDStart:
			var fn uint32
			if fn, err = r.U32(); err == nil {
				start = int(fn)
				snap.Start = SnapshotPrefix + "start"
			}
		case IDData:
			data, snap.Data, err = emptySegments(r)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	for _, g := range globals {
		snap.Globals = append(snap.Globals, SnapshotPrefix+"global."+strconv.FormatUint(uint64(g), 10))
	}
	exports = appendExports(exports, hasExports, snap, globals, start)
	out := append([]byte(nil), wasm[:8]...)
	exported := false
	for _, s := range sections {
		if !exported && s.ID != IDCustom && Order[s.ID] >= Order[IDExport] {
			out = appendSection(out, IDExport, exports)
			exported = true
		}
		switch s.ID {
		case IDExport, IDStart: // written above; the start function is an export now
		case IDData:
			out = appendSection(out, IDData, data)
		default:
			out = append(out, wasm[s.Start:s.Body.End]...)
		}
	}
	if !exported {
		out = appendSection(out, IDExport, exports)
	}
	return out, snap, nil
}

// appendSection appends a section of id with payload.
func appendSection(out []byte, id byte, payload []byte) []byte {
	return append(AppendU32(append(out, id), uint32(len(payload))), payload...)
}

// mutableGlobals reads a global section and answers the index of each
// mutable global, refusing one an image cannot hold.
func mutableGlobals(r Reader, imported uint32) ([]uint32, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	var mutable []uint32
	for i := uint32(0); i < n; i++ {
		at := r.Pos
		if err := r.ValType(); err != nil {
			return nil, err
		}
		t := r.Buf[at]
		mut, err := r.Byte()
		if err != nil {
			return nil, err
		}
		if err := constExpr(&r); err != nil {
			return nil, err
		}
		if mut == 0 {
			continue
		}
		if t < 0x7C || t > 0x7F { // i32 i64 f32 f64
			return nil, fmt.Errorf("global %d is a mutable %s: an image holds numbers only", imported+i, valTypeName(t))
		}
		mutable = append(mutable, imported+i)
	}
	return mutable, nil
}

// valTypeName names a value type's first byte, for messages.
func valTypeName(t byte) string {
	switch t {
	case 0x7B:
		return "v128"
	case 0x70:
		return "funcref"
	case 0x6F:
		return "externref"
	}
	return "reference"
}

// appendExports is the export section's payload (entries, the entries of
// the module's own section, without its count) with the snapshot's exports
// added: each mutable global, and the start function.
func appendExports(entries []byte, had bool, snap *Snapshot, globals []uint32, start int) []byte {
	count := uint32(len(globals))
	if start >= 0 {
		count++
	}
	if had {
		r := NewReader(entries, "export")
		n, _ := r.U32() // read by PrepareSnapshot already
		count += n
		entries = entries[r.Pos:]
	}
	out := append(AppendU32(nil, count), entries...)
	for i, g := range globals {
		out = AppendU32(append(AppendName(out, snap.Globals[i]), KindGlobal), g)
	}
	if start >= 0 {
		out = AppendU32(append(AppendName(out, snap.Start), KindFunction), uint32(start))
	}
	return out
}

// emptySegments rewrites a data section with every active segment's bytes
// removed, and answers those segments.
func emptySegments(r Reader) (payload []byte, active []DataSegment, err error) {
	n, err := r.U32()
	if err != nil {
		return nil, nil, err
	}
	payload = AppendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		at := r.Pos
		flags, err := r.U32()
		if err != nil {
			return nil, nil, err
		}
		if flags == 2 {
			if _, err := r.U32(); err != nil { // memory 0: Check allows no other
				return nil, nil, err
			}
		}
		exprAt := r.Pos
		var offset uint32
		if flags != 1 {
			if offset, err = i32Const(&r, i); err != nil {
				return nil, nil, err
			}
		}
		headEnd := r.Pos
		b, err := r.Name() // vec(byte)
		if err != nil {
			return nil, nil, err
		}
		if flags == 1 { // passive: unchanged, memory.init reads it
			payload = append(payload, r.Buf[at:r.Pos]...)
			continue
		}
		active = append(active, DataSegment{Offset: offset, Bytes: b})
		payload = append(payload, r.Buf[at:exprAt]...)
		payload = append(payload, r.Buf[exprAt:headEnd]...)
		payload = AppendU32(payload, 0)
	}
	return payload, active, r.ExpectEnd()
}

// i32Const reads the offset of data segment i, which must be i32.const.
func i32Const(r *Reader, i uint32) (uint32, error) {
	at := r.Pos
	op, err := r.Byte()
	if err != nil {
		return 0, err
	}
	if op != 0x41 {
		return 0, fmt.Errorf("data segment %d's offset is not a constant (opcode %#x at %d)", i, op, at)
	}
	v, err := r.S32()
	if err != nil {
		return 0, err
	}
	if end, err := r.Byte(); err != nil || end != 0x0B {
		return 0, fmt.Errorf("data segment %d's offset is not a constant", i)
	}
	return uint32(v), nil
}
