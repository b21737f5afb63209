package memory

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// imageFile is the image's memfd, -1 when it has none.
type imageFile int

// newSource writes the runs of mem into a memfd (only they take pages: the
// rest of the file is holes), seals it against any change, and maps it
// read-only as the image's contents: what copyInto reads where a memory
// cannot map it, from the same pages.
func newSource(mem []byte, runs [][2]int) ([]byte, imageFile, func(), error) {
	fd, err := unix.MemfdCreate("morph-snapshot", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_NOEXEC_SEAL)
	if errors.Is(err, unix.EINVAL) { // a kernel before 6.3, which has no MFD_NOEXEC_SEAL
		fd, err = unix.MemfdCreate("morph-snapshot", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, -1, nil, fmt.Errorf("memfd_create: %w", err)
	}
	fail := func(what string, err error) ([]byte, imageFile, func(), error) {
		unix.Close(fd)
		return nil, -1, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.Ftruncate(fd, int64(len(mem))); err != nil {
		return fail("ftruncate", err)
	}
	for _, r := range runs {
		for at := r[0]; at < r[1]; {
			n, err := unix.Pwrite(fd, mem[at:r[1]], int64(at))
			if err != nil {
				return fail("write", err)
			}
			at += n
		}
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("seal", err)
	}
	if len(mem) == 0 {
		return nil, imageFile(fd), func() { unix.Close(fd) }, nil
	}
	src, err := unix.Mmap(fd, 0, len(mem), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	return src, imageFile(fd), func() { unix.Munmap(src); unix.Close(fd) }, nil
}

// mapOver maps the first span bytes of the image copy-on-write over the
// start of buf, a mapping at least that long. When it fails, the range may
// have been unmapped already (a failed MAP_FIXED, before Linux 6.12): the
// caller must not use buf.
func (f imageFile) mapOver(buf []byte, span int) error {
	if span == 0 {
		return nil // nothing to map: the image is all zeros
	}
	if _, _, errno := unix.Syscall6(unix.SYS_MMAP, uintptr(unsafe.Pointer(&buf[0])), uintptr(span),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED, uintptr(f), 0); errno != 0 {
		return errno
	}
	return nil
}

// allocated is the bytes of the file that hold pages.
func (f imageFile) allocated() (uint64, bool) {
	var st unix.Stat_t
	if f < 0 || unix.Fstat(int(f), &st) != nil {
		return 0, false
	}
	return uint64(st.Blocks) * 512, true
}
