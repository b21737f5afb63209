//go:build unix

package memory

import (
	"math"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// mapped is a linear memory in an anonymous private mapping of its maximum
// size: pages are committed when first touched (the kernel zeroes them),
// and MAP_NORESERVE keeps the untouched rest out of the commit charge.
type mapped struct {
	mu   sync.Mutex // Free (wazero's) and unmap (the arena's) may come from different goroutines
	buf  []byte
	size atomic.Uint64 // the linear memory's size, as last reallocated: what resident looks at
}

// reserve maps max bytes, or answers nil when it cannot.
func reserve(max uint64) *mapped {
	if max > math.MaxInt {
		return nil
	}
	buf, err := unix.Mmap(-1, 0, int(max), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|mapNoReserve)
	if err != nil {
		return nil
	}
	return &mapped{buf: buf}
}

// Reallocate answers the first size bytes of the mapping: growing is free,
// and the memory never moves.
func (m *mapped) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil
	}
	m.size.Store(size)
	return m.buf[:size:size]
}

// reserved is the mapping's length, until it is unmapped.
func (m *mapped) reserved() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return uint64(len(m.buf))
}

// resident is how much of the linear memory's current size is in
// resident pages (residentPages says how the platform knows).
func (m *mapped) resident() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf == nil {
		return 0
	}
	return residentPages(m.buf[:m.size.Load()])
}

// Free gives the memory's pages back to the system at once; the range stays
// mapped until the arena's Release (see the package comment).
func (m *mapped) Free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf != nil { // once unmapped, the range may be another memory's
		unix.Madvise(m.buf, unix.MADV_DONTNEED)
	}
}

func (m *mapped) unmap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf != nil {
		unix.Munmap(m.buf)
		m.buf = nil
	}
}
