package memory

import (
	"encoding/binary"
	"os"
	"sync"
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

// pagemap is /proc/self/pagemap, opened once: the page table entries of
// this process, which say of each page whether it is present and whether
// it is a file's (or shared) page or the process's own.
var pagemap struct {
	once sync.Once
	f    *os.File
}

// privatePages counts the pages of buf (a page-aligned range of a mapping)
// that are present and the process's own: for a private mapping of a file,
// those it wrote (copied on write), not the file's pages it only reads nor
// the zero page. ok is false when the kernel does not tell (no pagemap).
func privatePages(buf []byte) (n int, ok bool) {
	pagemap.once.Do(func() { pagemap.f, _ = os.Open("/proc/self/pagemap") })
	if pagemap.f == nil || len(buf) == 0 {
		return 0, pagemap.f != nil
	}
	page := unix.Getpagesize()
	first := int64(uintptr(unsafe.Pointer(&buf[0])) / uintptr(page))
	pages := (len(buf) + page - 1) / page
	var chunk [512 * 8]byte
	for done := 0; done < pages; {
		want := min(pages-done, 512) * 8
		if _, err := pagemap.f.ReadAt(chunk[:want], (first+int64(done))*8); err != nil {
			return 0, false
		}
		for i := 0; i < want; i += 8 {
			e := binary.LittleEndian.Uint64(chunk[i:])
			if e>>63&1 == 1 && e>>61&1 == 0 && e>>56&1 == 1 { // present, not a file page, not shared (as the zero page is)
				n++
			}
		}
		done += want / 8
	}
	return n, true
}
