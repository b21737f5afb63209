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
	// shared is set when the memory started from an Image mapped over its
	// start: its untouched pages there are the image's, not its own.
	shared bool
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

// start makes the memory start from img: mapped over it copy-on-write
// where the platform allows, else a copy of its data pages.
func (m *mapped) start(img *Image) {
	if img.size > len(m.buf) {
		return // cannot be: the image was taken of a memory of the same plugin, under the same cap
	}
	if m.shared = img.file.mapOver(m.buf, img.size); !m.shared {
		img.copyInto(m.buf)
	}
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
// resident pages, or its size where the platform cannot tell (mincore);
// for a memory mapped over an image, its own pages: those it wrote.
func (m *mapped) resident() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf == nil {
		return 0
	}
	buf := m.buf[:m.size.Load()]
	if m.shared { // mincore would count the image's pages, which the memory shares
		if n, ok := privatePages(buf); ok {
			return uint64(n * unix.Getpagesize())
		}
		return uint64(len(buf))
	}
	vec := mincore(buf)
	if vec == nil {
		return uint64(len(buf))
	}
	var n uint64
	for _, v := range vec {
		n += uint64(v & 1)
	}
	return min(n*uint64(unix.Getpagesize()), uint64(len(buf)))
}

// trimZeros gives back the resident pages of the linear memory that hold
// only zeros, and answers their bytes: a page given back reads as zeros, as
// before, and costs nothing until it is written again. Only a page found
// resident is read, and a page that holds data is read only up to its
// first nonzero word, so the scan costs about what it gives back.
func (m *mapped) trimZeros() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf == nil || m.shared { // given back, a page of an image would read the image's contents
		return 0
	}
	buf := m.buf[:m.size.Load()]
	vec := mincore(buf)
	page := unix.Getpagesize()
	var trimmed uint64
	for i := 0; i < len(vec); {
		if vec[i]&1 == 0 || !zeros(buf[i*page:min((i+1)*page, len(buf))]) {
			i++
			continue
		}
		j := i + 1
		for j < len(vec) && vec[j]&1 == 1 && zeros(buf[j*page:min((j+1)*page, len(buf))]) {
			j++
		}
		run := buf[i*page : min(j*page, len(buf))]
		if unix.Madvise(run, unix.MADV_DONTNEED) == nil {
			trimmed += uint64(len(run))
		}
		i = j
	}
	return trimmed
}

// Free gives the memory's pages back to the system at once; the range stays
// mapped until the arena's Release (see the package comment). Only the
// memory's current size can hold pages (a linear memory never shrinks), so
// only it is given back: the kernel then walks the page tables of what the
// guest could have touched, not of the whole reservation (the plugin's
// memory cap). Measured on a 64 MiB cap with 18 pages touched: about 3 of
// the 40 us that reserving, touching, freeing and unmapping take, which
// BenchmarkNewInstance's noise hides (BENCHMARKS.md, A new instance).
func (m *mapped) Free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf != nil { // once unmapped, the range may be another memory's
		unix.Madvise(m.buf[:m.size.Load()], unix.MADV_DONTNEED)
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
