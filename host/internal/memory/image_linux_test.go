package memory

import (
	"testing"

	"golang.org/x/sys/unix"
)

// An image's file is sealed: nothing, in the host or through a bug in it,
// can change what every memory started from it reads.
func TestImageSealed(t *testing.T) {
	img, err := NewImage(imageSource())
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if _, err := unix.Pwrite(int(img.file), []byte("x"), 0); err == nil {
		t.Fatal("wrote into the image's file")
	}
	if err := unix.Ftruncate(int(img.file), 0); err == nil {
		t.Fatal("truncated the image's file")
	}
	if _, err := unix.Mmap(int(img.file), 0, img.Size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		t.Fatal("mapped the image's file writable and shared")
	}
}

// Reading a hole of the image through a memory gives the file a page,
// shared and counted in Bytes; the zeros past the last data page are not
// mapped from the image, and reading them costs the image nothing.
func TestImageHoles(t *testing.T) {
	page := uint64(unix.Getpagesize())
	src := imageSource() // data in pages 0 and 2 of 64
	img, err := NewImage(src)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if img.Bytes() != 2*page {
		t.Fatalf("image holds %d bytes, want its 2 data pages", img.Bytes())
	}
	a := &Arena{Image: img}
	defer a.Release()
	buf := a.Allocate(uint64(len(src)), 64<<20).Reallocate(uint64(len(src)))
	var sum byte
	for i := 0; i < len(buf); i += int(page) {
		sum += buf[i]
	}
	if sum != 'f'+'t' { // the first bytes of the data pages: and the loads are not optimized away
		t.Fatalf("read %d", sum)
	}
	if img.Bytes() != 3*page {
		t.Fatalf("after reading every page, the image holds %d bytes, want 3 pages: its data and the hole between", img.Bytes())
	}
	if u := a.Usage(); u.Resident != 0 {
		t.Fatalf("usage %+v: reading gave the memory pages of its own", u)
	}
}
