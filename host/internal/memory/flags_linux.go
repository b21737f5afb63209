package memory

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

const mapNoReserve = unix.MAP_NORESERVE

// mincore answers, for each page of buf (a page-aligned range of a
// mapping), whether it is resident: touched, and not given back
// (mincore(2)); nil when the kernel cannot tell.
func mincore(buf []byte) []byte {
	if len(buf) == 0 {
		return nil
	}
	page := unix.Getpagesize()
	vec := make([]byte, (len(buf)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return nil
	}
	return vec
}
