package wasmbin

import "math"

// CapTables returns wasm with the maximum of each table it defines lowered
// so that all of them together never hold more than total entries: each
// keeps its initial size (Check bounds their sum by Limits.TableEntries)
// and may grow by an equal share of the rest. A table.grow past its maximum
// fails inside the guest as the specification says (it returns -1), where
// an unbounded table would grow the host's memory by 8 bytes an entry,
// outside the plugin's memory cap. wasm itself is returned when no maximum
// needs lowering; tables imported by the module are not its to bound (the
// host provides none).
func CapTables(wasm []byte, total uint32) ([]byte, error) {
	sections, err := Sections(wasm)
	if err != nil {
		return nil, err
	}
	for _, s := range sections {
		if s.ID != IDTable {
			continue
		}
		payload, changed, err := capTables(s.Body, total)
		if err != nil || !changed {
			return wasm, err
		}
		out := make([]byte, 0, len(wasm)+len(payload)-s.Body.Remaining()+5)
		out = append(out, wasm[:s.Start]...)
		out = append(AppendU32(append(out, IDTable), uint32(len(payload))), payload...)
		return append(out, wasm[s.Body.End:]...), nil
	}
	return wasm, nil
}

// tableEntry is one table of the table section: where its limits are, and
// its sizes.
type tableEntry struct {
	start, limitsAt, limitsEnd, end int // the entry, its limits, and its end (after any initialiser)
	flag                            byte
	TableLimits
}

// capTables rewrites the table section r with capped maxima; changed is
// false when none needs it.
func capTables(r Reader, total uint32) (payload []byte, changed bool, err error) {
	n, err := r.U32()
	if err != nil {
		return nil, false, err
	}
	var tables []tableEntry
	var sum uint64
	for i := uint32(0); i < n; i++ {
		e := tableEntry{start: r.Pos}
		init := r.Remaining() > 1 && r.Buf[r.Pos] == 0x40
		if init {
			r.Pos += 2 // 0x40 0x00, checked by Check
		}
		if err := r.ValType(); err != nil {
			return nil, false, err
		}
		e.limitsAt = r.Pos
		if e.Min, e.Max, e.HasMax, err = r.Limits(); err != nil {
			return nil, false, err
		}
		e.flag = r.Buf[e.limitsAt] // Limits read it
		e.limitsEnd = r.Pos
		if init {
			if err := constExpr(&r); err != nil {
				return nil, false, err
			}
		}
		e.end = r.Pos
		sum += uint64(e.Min)
		tables = append(tables, e) // at most Limits.Tables entries, read one by one
	}
	if err := r.ExpectEnd(); err != nil {
		return nil, false, err
	}
	if sum > uint64(total) {
		return nil, false, &LimitError{Limit: "TableEntries", Value: sum, Max: uint64(total), Section: r.Section, Offset: r.Pos}
	}
	share := (uint64(total) - sum) / uint64(max(len(tables), 1))
	out := AppendU32(nil, n)
	for _, e := range tables {
		limit := uint32(min(uint64(e.Min)+share, math.MaxUint32))
		if e.HasMax && e.Max <= limit {
			out = append(out, r.Buf[e.start:e.end]...)
			continue
		}
		changed = true
		out = append(out, r.Buf[e.start:e.limitsAt]...)
		out = AppendU32(AppendU32(append(out, e.flag|1), e.Min), limit)
		out = append(out, r.Buf[e.limitsEnd:e.end]...)
	}
	return out, changed, nil
}
