//go:build unix && !linux

package memory

// mapNoReserve is Linux's MAP_NORESERVE; elsewhere anonymous mappings are
// committed lazily anyway.
const mapNoReserve = 0

// residentPages answers len(buf), the upper bound: the portable mincore
// differs from Linux's in what it reports.
func residentPages(buf []byte) uint64 { return uint64(len(buf)) }
