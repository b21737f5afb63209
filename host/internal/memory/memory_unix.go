//go:build unix

package memory

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// mapped is a linear memory in an anonymous private mapping of its maximum
// size: pages are committed when first touched (the kernel zeroes them),
// and MAP_NORESERVE keeps the untouched rest out of the commit charge.
type mapped struct {
	share
	mu   sync.Mutex // Free (wazero's) and unmap (the arena's) may come from different goroutines
	buf  []byte
	size atomic.Uint64 // the linear memory's size, as last reallocated: what resident looks at
	// imaged is the bytes at its start mapped from an Image (Image.span),
	// 0 when none: its pages there that it has not written are the image's.
	imaged int
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
// where the platform allows, else a copy of its data pages. false: neither
// could be done, and the memory must be unmapped, unused.
func (m *mapped) start(img *Image) bool {
	if img.size > len(m.buf) {
		return false // cannot be: the image was taken of a memory of the same plugin, under the same cap
	}
	switch err := img.file.mapOver(m.buf, img.span); {
	case err == nil:
		m.imaged = img.span
	case errors.Is(err, errNoMapping):
		img.copyInto(m.buf)
	default:
		return false
	}
	return true
}

// Reallocate answers the first size bytes of the mapping: growing is free,
// and the memory never moves.
func (m *mapped) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) || !m.grow(size) {
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

// resident is how much of the linear memory's current size is in pages
// of its own (privatePages: those it wrote, not an image's it reads nor the
// zero page), or its size where the platform cannot tell.
func (m *mapped) resident() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf == nil {
		return 0
	}
	buf := m.buf[:m.size.Load()]
	if pages, ok := privatePages(buf); ok {
		return min(uint64(pages*unix.Getpagesize()), uint64(len(buf)))
	}
	return uint64(len(buf))
}

// trimZeros gives back the resident pages of the linear memory that hold
// only zeros, past what it maps of an image (given back, a page there would
// read the image's contents), and answers their bytes: a page given back
// reads as zeros, as before, and costs nothing until it is written again.
// Only a page found resident is read, and a page that holds data is read
// only up to its first nonzero word, so the scan costs about what it gives
// back.
func (m *mapped) trimZeros() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf == nil {
		return 0
	}
	buf := m.buf[min(m.imaged, int(m.size.Load())):m.size.Load()]
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
	m.free()
}

func (m *mapped) unmap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf != nil {
		unix.Munmap(m.buf)
		m.buf = nil
	}
}
