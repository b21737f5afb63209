// Package memory backs WebAssembly linear memories with address space
// reserved for their maximum size, outside Go's heap, so that a guest's
// memory costs the host what the guest touches, once, and is given back to
// the operating system when the instance closes.
//
// Why: wazero's own linear memory is a Go slice that memory.grow extends
// with append. A guest growing its memory a page at a time up to a 64 MiB
// cap made the host copy it over and over, and hold the copies until the
// garbage collector ran: a peak of 3.5 to 4.5 times the cap. Reserving the
// maximum up front (a mapping with no pages until they are touched) makes
// memory.grow free and moves nothing.
//
// The catch is that unmapped memory must never be read: a Go slice outlives
// its use safely, a mapping does not. wazero frees a memory when its module
// closes, which may happen while a call's output is still read from it
// (an instance closed by the plugin's Close, a command module's exit). So
// freeing only gives the pages back (the range stays mapped,
// reading zeros, or an Image's contents where it was mapped from one), and
// an Arena unmaps its memories when the host, which knows when an instance
// is no longer used, releases it.
package memory

import (
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
)

// Arena allocates the linear memories of one instance (give it to wazero
// with experimental.WithMemoryAllocator when instantiating), and unmaps
// them at Release. Where the platform cannot reserve memory (see reserve),
// it falls back to Go slices, as wazero's own allocator.
type Arena struct {
	// Image, when set before the arena allocates, is what the next memory
	// it allocates starts from (see Image): the first memory of an
	// instance, which is its module's own when the instance has others
	// (the Extism loader's kernel memory is allocated after it). Allocate
	// clears it.
	Image *Image
	// Limit, when not 0, is the bytes all the arena's memories may hold
	// together (the plugin's memory cap when one instance has several
	// memories): a memory's Reallocate past it answers nil, so that
	// memory.grow fails with -1 as at a memory's own maximum. Only the
	// first size a memory is given is not refused, but counted: wazero
	// allocates a module's memory at its declared minimum, which its
	// runtime's cap checked, and cannot fail an instantiation there; a
	// memory allocated by hand should be given 0 first. Usage does not
	// change with it: each memory still reserves its own maximum.
	Limit uint64

	mu         sync.Mutex
	maps       []*mapped
	sliceBytes atomic.Uint64 // the capacities of its fallback memories
	held       atomic.Uint64 // the sizes of its memories, against Limit
}

// Allocate implements experimental.MemoryAllocator.
func (a *Arena) Allocate(capacity, maxBytes uint64) experimental.LinearMemory {
	a.mu.Lock()
	img := a.Image
	a.Image = nil
	a.mu.Unlock()
	if maxBytes > 0 {
		if m := reserve(maxBytes); m != nil {
			if img == nil || m.start(img) {
				m.arena = a
				a.mu.Lock()
				a.maps = append(a.maps, m)
				a.mu.Unlock()
				return m
			}
			m.unmap() // the image could not be mapped: a Go slice copies it
		}
	}
	if img != nil { // growing to the image's size then keeps the copy, which is in the capacity
		capacity = max(capacity, uint64(img.size))
	}
	buf := make([]byte, 0, capacity)
	if img != nil {
		img.copyInto(buf[:img.size])
	}
	a.sliceBytes.Add(uint64(cap(buf)))
	return &sliceMemory{buf: buf, max: maxBytes, sized: &a.sliceBytes, share: share{arena: a}}
}

// share is a memory's part of its arena's Limit.
type share struct {
	arena   *Arena        // nil: no limit (a memory made outside an arena)
	held    atomic.Uint64 // the memory's size, counted in arena.held
	started bool          // it was given its first size (see Arena.Limit)
}

// grow counts the memory's growth to size bytes in its arena, and answers
// false, counting nothing, when that would take the arena's memories past
// its Limit. A linear memory never shrinks, nor does what it holds.
func (s *share) grow(size uint64) bool {
	first := !s.started
	s.started = true
	old := s.held.Load()
	if s.arena == nil || size <= old {
		return true
	}
	for {
		all := s.arena.held.Load()
		next := all - old + size
		if !first && s.arena.Limit > 0 && next > s.arena.Limit {
			return false
		}
		if s.arena.held.CompareAndSwap(all, next) {
			s.held.Store(size)
			return true
		}
	}
}

// free gives the memory's part of the limit back: a freed memory holds
// nothing.
func (s *share) free() {
	if s.arena != nil {
		s.arena.held.Add(-s.held.Swap(0))
	}
}

// Release unmaps the arena's memories. The instance they belong to must be
// closed and no longer used by anyone.
func (a *Arena) Release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.maps {
		m.unmap()
	}
	a.maps = nil
}

// Usage is what an arena's memories cost the host, in bytes.
type Usage struct {
	// Reserved is address space: the mapped memories' maxima (the plugin's
	// memory cap each), which no other mapping can take until Release.
	Reserved uint64
	// Resident is what the memories hold: the pages of their current sizes
	// that are their own (written and not given back; not an image's pages
	// they only read, nor the zero page: see mapped.resident), plus
	// the capacities of the fallback's Go slices (an upper bound: Go may not
	// have touched all of a large slice's zeros).
	Resident uint64
}

// Usage answers what the arena's memories cost now. It reads the page
// tables, so it is for reports (Plugin.Memory), not for every call.
func (a *Arena) Usage() Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	var u Usage
	for _, m := range a.maps {
		u.Reserved += m.reserved()
		u.Resident += m.resident()
	}
	u.Resident += a.sliceBytes.Load()
	return u
}

// TrimZeros gives back the pages of the arena's mapped memories that are
// resident but hold only zeros, and answers their bytes. What the memories
// read does not change. Call it when no call runs on the instance: after
// instantiation, where a guest's runtime may have touched pages it left
// zero (standard Go's: 69 of the Go example's 597 resident pages, 276
// KiB). Where the platform cannot tell which pages are resident (mincore),
// it gives back nothing.
func (a *Arena) TrimZeros() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n uint64
	for _, m := range a.maps {
		n += m.trimZeros()
	}
	return n
}

// sliceMemory is a linear memory in Go's heap, grown by append; sized
// counts its bytes in its arena's Usage.
type sliceMemory struct {
	share
	buf   []byte
	max   uint64
	sized *atomic.Uint64
}

func (m *sliceMemory) Reallocate(size uint64) []byte {
	if size > m.max || !m.grow(size) {
		return nil
	}
	before := cap(m.buf)
	if n := int(size); n <= cap(m.buf) {
		m.buf = m.buf[:n]
	} else {
		m.buf = append(m.buf[:cap(m.buf)], make([]byte, n-cap(m.buf))...)
	}
	m.sized.Add(uint64(cap(m.buf) - before))
	return m.buf
}

func (m *sliceMemory) Free() {
	m.free()
	m.sized.Add(-uint64(cap(m.buf)))
	m.buf = nil
}

// zeros reports whether b, a page (a multiple of 8 bytes, 8-aligned), holds
// only zeros.
func zeros(b []byte) bool {
	for _, w := range unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8) {
		if w != 0 {
			return false
		}
	}
	return true
}

// pageSize is the system's memory page size.
func pageSize() int { return os.Getpagesize() }
