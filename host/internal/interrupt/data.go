package interrupt

import (
	"cmp"
	"slices"

	"github.com/morphhost/morph/host/internal/wasmbin"
)

// The merge of data segments, part of the rewrite because its result is cached with it.
//
// wazero spends per instance, for every data segment, an evaluation of its offset expression (twice: once to
// check the bounds, once to copy) and a slot in the instance's table of segments: the standard Go example has
// some 40,000 segments (its linker cuts the data at every run of zeros), which took a new instance from
// 3.4 to 9.4 ms (BenchmarkNewInstance, _initialize included) and 1.2 MiB of Go heap. Segments an instance
// can never name (see mergeable) are as good as one segment holding what they write: mergeData sorts them
// by offset and joins those that overlap, touch, or lie at most a page apart, the gap filled with zeros,
// which a fresh memory holds anyway. The price of a gap is a copy of its zeros per instance, and an OS page
// made resident if no segment wrote to it before; in the Go example every 4 KiB page the merged segment
// spans held data already (422 pages either way), so only the copy is paid.
//
// What an instance sees is unchanged: its memory after instantiation holds the same bytes (where segments
// overlap, the later one's, as the spec applies them in order), and instantiation fails if and only if it
// failed before: a group spans from its lowest offset to its highest end, so it is out of bounds exactly when
// one of its segments was. Only the index in wazero's message about an out-of-bounds segment may differ.

// pageSize is the largest gap between two segments that a merge fills with zeros: a WebAssembly page.
const pageSize = 1 << 16

// minZeros is the least of the zeros budget: a merge may add as many zeros as the module has bytes, or this
// many in a smaller module. Without a budget, 100,000 one-byte segments a page apart (within Check's
// limits) would become 6 GiB of zeros; with it, the rewrite's output is at most about twice its input.
const minZeros = 1 << 20

// segment is an active data segment with a constant offset.
type segment struct {
	off   uint32 // where its bytes go
	index uint32 // its index in the data section: the order in which instantiation applies it
	at, n int    // its bytes: buf[at : at+n]
}

// end is the offset after the segment's last byte (beyond 4 GiB for one out of bounds).
func (s segment) end() uint64 { return uint64(s.off) + uint64(s.n) }

// mergeable reports whether the data segments of m may be merged: m's code cannot name a segment (it has no
// memory.init or data.drop, which wazero accepts only with a data count section: so one without it cannot),
// and its memory is its own, zeroed when an instance starts, so that a gap filled with zeros changes
// nothing. refs says whether the code has memory.init or data.drop.
func (m *module) mergeable(refs bool) bool {
	return m.memories == 1 && m.memImports == 0 && !(m.dataCount >= 0 && refs)
}

// mergeData returns the data section's payload with its segments merged, and their number, or a nil payload
// when there is nothing to merge or the section is not of the form this merge understands: every active
// segment in memory 0 (flags 0) with an i32.const offset, and passive segments (kept, after the active
// ones, in their order). Anything else (an offset read from a global, an extended constant expression, an
// explicit memory index, a malformed section) leaves the section unchanged, so that wazero judges it as
// it would have; so does a data count section (declared, -1 without one) that does not count the
// segments, which the merge would otherwise make right. zeros bounds the zeros the merge may add: the
// output grows by at most that much.
//
// Time: O(n log n) for n segments; memory: the output, and 24 bytes per segment.
func mergeData(r wasmbin.Reader, declared int64, zeros int) ([]byte, uint32) {
	n, err := r.U32()
	if err != nil || declared >= 0 && int64(n) != declared {
		return nil, 0
	}
	var active []segment
	var passive [][]byte // each segment's encoding, copied as is
	for i := uint32(0); i < n; i++ {
		start := r.Pos
		flags, err := r.U32()
		if err != nil || flags > 1 {
			return nil, 0
		}
		s := segment{index: i}
		if flags == 0 {
			if op, err := r.Byte(); err != nil || op != opI32Const {
				return nil, 0
			}
			off, err := r.S32()
			if err != nil {
				return nil, 0
			}
			if op, err := r.Byte(); err != nil || op != opEnd {
				return nil, 0
			}
			s.off = uint32(off)
		}
		data, err := r.Name()
		if err != nil {
			return nil, 0
		}
		if flags == 1 {
			passive = append(passive, r.Buf[start:r.Pos])
			continue
		}
		s.at, s.n = r.Pos-len(data), len(data)
		active = append(active, s)
	}
	if r.ExpectEnd() != nil {
		return nil, 0
	}
	slices.SortStableFunc(active, func(a, b segment) int { return cmp.Compare(a.off, b.off) })
	groups := group(active, zeros)
	if len(groups) == len(active) {
		return nil, 0 // nothing merged
	}
	count := uint32(len(groups) + len(passive))
	out := wasmbin.AppendU32(nil, count)
	lo := 0
	for _, hi := range groups {
		out = appendMerged(out, r.Buf, active[lo:hi])
		lo = hi
	}
	for _, p := range passive {
		out = append(out, p...)
	}
	return out, count
}

// group splits segs, sorted by offset, into runs to merge, and returns where each run ends. A segment joins
// the run before it when it starts at most a page after the run's end, and the zeros between them still fit
// in the budget zeros.
func group(segs []segment, zeros int) []int {
	var ends []int
	var hi uint64 // the run's end
	for i, s := range segs {
		if i > 0 {
			gap := uint64(s.off) - min(hi, uint64(s.off)) // 0 when it overlaps the run
			if gap > pageSize || gap > uint64(zeros) {
				ends = append(ends, i)
				hi = 0
			} else {
				zeros -= int(gap)
			}
		}
		hi = max(hi, s.end())
	}
	if len(segs) > 0 {
		ends = append(ends, len(segs))
	}
	return ends
}

// appendMerged appends one active segment that writes what run, sorted by offset, wrote: from the lowest
// offset to the highest end, each segment's bytes applied in the order of the data section (the later one
// wins where they overlap), zeros in the gaps.
func appendMerged(out, buf []byte, run []segment) []byte {
	lo, hi := uint64(run[0].off), uint64(0)
	for _, s := range run {
		hi = max(hi, s.end())
	}
	size := int(hi - lo) // at most the run's bytes plus the zeros budget: the input's size twice
	out = append(out, 0, opI32Const)
	out = wasmbin.AppendS32(out, int32(run[0].off))
	out = wasmbin.AppendU32(append(out, opEnd), uint32(size))
	base := len(out)
	out = append(out, make([]byte, size)...)
	byIndex := slices.SortedFunc(slices.Values(run), func(a, b segment) int { return cmp.Compare(a.index, b.index) })
	for _, s := range byIndex {
		copy(out[base+int(uint64(s.off)-lo):], buf[s.at:s.at+s.n])
	}
	return out
}
