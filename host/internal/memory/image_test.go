package memory

import (
	"bytes"
	"os"
	"runtime"
	"testing"
)

// imageSource is a memory of 4 wasm pages with data in its first and third
// pages of the system's: the rest zeros.
func imageSource() []byte {
	page := os.Getpagesize()
	mem := make([]byte, 4*wasmPage)
	copy(mem, "first page")
	copy(mem[2*page:], "third page")
	return mem
}

// A memory started from an image reads the image, costs only the pages it
// writes (the others are the image's, shared), and its writes reach neither
// the image nor another memory started from it; the image keeps only the
// pages that hold data, and the memory it was taken of may change after.
func TestImage(t *testing.T) {
	page := os.Getpagesize()
	src := imageSource()
	img, err := NewImage(src)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	want := bytes.Clone(src)
	src[0] = 'X' // the image is a copy
	if img.Size() != len(src) || img.DataBytes() != 2*uint64(page) {
		t.Fatalf("image of %d bytes with %d of data, want %d with 2 pages", img.Size(), img.DataBytes(), len(src))
	}
	a, b := &Arena{Image: img}, &Arena{Image: img}
	defer a.Release()
	defer b.Release()
	ma, mb := a.Allocate(wasmPage, 64<<20), b.Allocate(wasmPage, 64<<20)
	ma.Reallocate(wasmPage) // as wazero does: the module's minimum, then growth to the image's size
	bufA, bufB := ma.Reallocate(uint64(len(want))), mb.Reallocate(uint64(len(want)))
	if !bytes.Equal(bufA, want) || !bytes.Equal(bufB, want) {
		t.Fatal("a memory started from the image does not read it")
	}
	shared := runtime.GOOS == "linux"
	if u := a.Usage(); shared && u.Resident != 0 {
		t.Fatalf("usage %+v after reading the image: want no page of its own", u)
	}
	bufA[1] = 'Y'          // a page of the image
	bufA[3*wasmPage] = 'Z' // a page the image does not hold
	if u := a.Usage(); shared && u.Resident != 2*uint64(page) {
		t.Fatalf("usage %+v after writing 2 pages: want those 2", u)
	}
	if bufB[1] != want[1] || bufB[3*wasmPage] != 0 {
		t.Fatal("a write in one memory is seen in another started from the same image")
	}
	// A page of the image the memory wrote zeros over must stay zeros:
	// given back, it would read the image again. Past the image, the zero
	// pages it read are given back as any memory's.
	clear(bufA[2*page : 3*page])
	if n := a.TrimZeros(); n > uint64(len(want)-3*page) {
		t.Fatalf("trimmed %d bytes: some of the image's part", n)
	}
	if !bytes.Equal(bufA[2*page:3*page], make([]byte, page)) {
		t.Fatal("trimming changed the zeros written over the image's page")
	}
	checkBytes(t, "trimmed memory", bufA, map[int]byte{1: 'Y', 3 * wasmPage: 'Z'})
	c := &Arena{Image: img}
	defer c.Release()
	if buf := c.Allocate(uint64(len(want)), 64<<20).Reallocate(uint64(len(want))); !bytes.Equal(buf, want) {
		t.Fatal("a memory started after another wrote reads its writes")
	}
}

// Where a memory cannot be mapped (the fallback of Go slices), it starts
// from a copy of the image, kept as it grows to the image's size.
func TestImageCopied(t *testing.T) {
	src := imageSource()
	img, err := NewImage(src)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	a := &Arena{Image: img}
	mem := a.Allocate(wasmPage, 1<<62)
	if _, ok := mem.(*sliceMemory); !ok {
		t.Fatalf("memory is a %T, want the fallback", mem)
	}
	mem.Reallocate(wasmPage)
	if buf := mem.Reallocate(uint64(len(src))); !bytes.Equal(buf, src) {
		t.Fatal("the copy does not hold the image")
	}
}
