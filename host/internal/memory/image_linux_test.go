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
