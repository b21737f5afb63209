package memory

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

const mapNoReserve = unix.MAP_NORESERVE

// residentPages is the bytes of buf, a page-aligned range of a mapping, in
// pages that are resident (mincore(2)): touched, and not given back. It
// answers len(buf), the upper bound, when the kernel cannot tell.
func residentPages(buf []byte) uint64 {
	if len(buf) == 0 {
		return 0
	}
	page := unix.Getpagesize()
	vec := make([]byte, (len(buf)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return uint64(len(buf))
	}
	var n uint64
	for _, v := range vec {
		n += uint64(v & 1)
	}
	return min(n*uint64(page), uint64(len(buf)))
}
