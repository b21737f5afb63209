//go:build unix

package memory

import (
	"math"
	"sync"

	"golang.org/x/sys/unix"
)

// mapped is a linear memory in an anonymous private mapping of its maximum
// size: pages are committed when first touched (the kernel zeroes them),
// and MAP_NORESERVE keeps the untouched rest out of the commit charge.
type mapped struct {
	mu  sync.Mutex // Free (wazero's) and unmap (the arena's) may come from different goroutines
	buf []byte
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
	return m.buf[:size:size]
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
