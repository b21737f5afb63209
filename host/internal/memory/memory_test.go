package memory

import (
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
)

const wasmPage = 64 << 10

// A mapped memory grows in place up to its maximum and no further, costs
// what is touched of it, gives its pages back at Free, and its address
// space at Release.
func TestMappedMemory(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("memories are Go slices here (TestSliceMemory)")
	}
	const max = 64 << 20
	var a Arena
	mem := a.Allocate(wasmPage, max)
	if _, ok := mem.(*mapped); !ok {
		t.Fatalf("memory is a %T, want a mapping", mem)
	}
	buf := mem.Reallocate(wasmPage)
	buf[0], buf[wasmPage-1] = 1, 2
	grown := mem.Reallocate(16 * wasmPage)
	if len(grown) != 16*wasmPage {
		t.Fatalf("grown to %d bytes, want %d", len(grown), 16*wasmPage)
	}
	if unsafe.SliceData(grown) != unsafe.SliceData(buf) {
		t.Fatalf("growing moved the memory")
	}
	checkBytes(t, "grown memory", grown, map[int]byte{0: 1, wasmPage - 1: 2})
	if mem.Reallocate(max+1) != nil {
		t.Fatalf("grew past its maximum")
	}
	u := a.Usage()
	if u.Reserved != max {
		t.Fatalf("usage %+v, want %d reserved", u, max)
	}
	// Two pages touched (the first and the last of the first wasm page):
	// mincore on Linux sees just them; elsewhere the bound is the size.
	if page := uint64(os.Getpagesize()); runtime.GOOS == "linux" && u.Resident != 2*page {
		t.Fatalf("usage %+v, want 2 pages of %d resident", u, page)
	} else if u.Resident > 16*wasmPage {
		t.Fatalf("usage %+v: more resident than the memory's size", u)
	}
	mem.Free()
	if u := a.Usage(); runtime.GOOS == "linux" && u.Resident != 0 {
		t.Fatalf("usage after Free %+v, want nothing resident", u)
	}
	if grown[0] != 0 {
		t.Fatalf("a freed memory still reads its old contents")
	}
	a.Release()
	if u := a.Usage(); u != (Usage{}) {
		t.Fatalf("usage after Release %+v", u)
	}
}

// Where a mapping cannot be had (here: a maximum larger than the address
// space), the memory is a Go slice that keeps the maximum and its contents
// across growth, and counts in the arena's Usage as allocated.
func TestSliceMemory(t *testing.T) {
	var a Arena
	mem := a.Allocate(wasmPage, 1<<62)
	if _, ok := mem.(*sliceMemory); !ok {
		t.Fatalf("memory is a %T, want the fallback", mem)
	}
	buf := mem.Reallocate(wasmPage)
	buf[wasmPage-1] = 7
	if grown := mem.Reallocate(3 * wasmPage); len(grown) != 3*wasmPage || grown[wasmPage-1] != 7 {
		t.Fatalf("growing lost the memory")
	}
	if u := a.Usage(); u.Reserved != 0 || u.Resident < 3*wasmPage {
		t.Fatalf("usage %+v, want at least %d resident and nothing reserved", u, 3*wasmPage)
	}
	mem.Free()
	if u := a.Usage(); u != (Usage{}) {
		t.Fatalf("usage after Free %+v", u)
	}
	small := &sliceMemory{max: 2 * wasmPage, sized: &a.sliceBytes}
	if small.Reallocate(2*wasmPage) == nil || small.Reallocate(2*wasmPage+1) != nil {
		t.Fatalf("the fallback does not hold its maximum")
	}
}

// TrimZeros gives back the resident pages that hold only zeros, and
// nothing else: what the memory reads does not change.
func TestTrimZeros(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pages are trimmed where mincore tells which are resident")
	}
	page := os.Getpagesize()
	var a Arena
	defer a.Release()
	mem := a.Allocate(wasmPage, 64<<20)
	buf := mem.Reallocate(wasmPage)
	buf[0] = 1                        // page 0: data
	buf[page] = 0                     // page 1: touched, zero
	buf[2*page], buf[3*page-1] = 0, 3 // page 2: data in its last byte
	buf[3*page] = 0                   // pages 3 and 4: touched, zero
	buf[4*page] = 0
	if n := a.TrimZeros(); n != 3*uint64(page) {
		t.Fatalf("trimmed %d bytes, want the 3 zero pages", n)
	}
	if u := a.Usage(); u.Resident != 2*uint64(page) {
		t.Fatalf("usage %+v, want the 2 pages with data resident", u)
	}
	checkBytes(t, "trimmed memory", buf, map[int]byte{0: 1, page: 0, 3*page - 1: 3})
}

// checkBytes fails t at each offset of buf that does not hold its byte of
// want; what names the memory.
func checkBytes(t *testing.T, what string, buf []byte, want map[int]byte) {
	t.Helper()
	for off, b := range want {
		if buf[off] != b {
			t.Fatalf("%s: byte %d = %d, want %d", what, off, buf[off], b)
		}
	}
}

// An arena's Limit holds for all its memories together, mapped or Go
// slices: a memory may grow while the others leave it room, and not past
// it; a memory's first size is counted but never refused (wazero cannot
// fail an instantiation there); a freed memory gives its part back; and
// the limit changes nothing in Usage, each memory reserving its maximum.
func TestArenaLimit(t *testing.T) {
	const max = 64 << 20
	for _, tc := range []struct {
		name  string
		alloc func(a *Arena) experimental.LinearMemory
	}{
		{"mapped", func(a *Arena) experimental.LinearMemory {
			if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
				t.Skip("memories are Go slices here")
			}
			return a.Allocate(0, max)
		}},
		{"slice", func(a *Arena) experimental.LinearMemory {
			return a.Allocate(0, 1<<62) // no mapping that large: the fallback
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Arena{Limit: 4 * wasmPage}
			defer a.Release()
			guest, kernel := tc.alloc(a), tc.alloc(a)
			if guest.Reallocate(wasmPage) == nil || kernel.Reallocate(0) == nil {
				t.Fatal("first sizes within the limit refused")
			}
			before := a.Usage()
			if kernel.Reallocate(3*wasmPage) == nil {
				t.Fatal("growth to the limit refused")
			}
			if b := guest.Reallocate(2 * wasmPage); b != nil {
				t.Fatalf("the guest grew to %d bytes past the arena's limit (%d held by the other memory)", len(b), 3*wasmPage)
			}
			if kernel.Reallocate(3*wasmPage+1) != nil {
				t.Fatal("the kernel grew past the arena's limit")
			}
			if b := guest.Reallocate(wasmPage); len(b) != wasmPage {
				t.Fatal("a memory refused the size it has")
			}
			if u := a.Usage(); u.Reserved != before.Reserved {
				t.Fatalf("the limit changed what is reserved: %+v, then %+v", before, u)
			}
			kernel.Free()
			if guest.Reallocate(4*wasmPage) == nil {
				t.Fatal("the room a freed memory gave back was not given")
			}
			if guest.Reallocate(4*wasmPage+1) != nil {
				t.Fatal("grew past the limit alone")
			}
			// A memory's first size is never refused, and counts.
			third := tc.alloc(a)
			if third.Reallocate(wasmPage) == nil {
				t.Fatal("a first size past the limit refused: wazero would panic")
			}
			if third.Reallocate(2*wasmPage) != nil {
				t.Fatal("grew while the arena is past its limit")
			}
		})
	}
	// Without a limit, memories hold their own maxima only.
	var a Arena
	defer a.Release()
	m1, m2 := a.Allocate(0, 1<<62), a.Allocate(0, 1<<62)
	if m1.Reallocate(8*wasmPage) == nil || m2.Reallocate(8*wasmPage) == nil {
		t.Fatal("an arena without a limit refused growth")
	}
}

// An arena's Image goes to the first memory it allocates only: a second
// memory of the same instance (the Extism loader's kernel) starts from zeros.
func TestArenaImageFirstMemory(t *testing.T) {
	img, err := NewImage(imageSource())
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	a := &Arena{Image: img}
	defer a.Release()
	first, second := a.Allocate(wasmPage, 64<<20), a.Allocate(wasmPage, 64<<20)
	if a.Image != nil {
		t.Fatal("Allocate left the image set")
	}
	if b := first.Reallocate(uint64(img.Size())); string(b[:10]) != "first page" {
		t.Fatalf("the first memory does not read the image: %q", b[:10])
	}
	if b := second.Reallocate(uint64(img.Size())); !zeros(b[:os.Getpagesize()]) {
		t.Fatal("the second memory read the image")
	}
}
