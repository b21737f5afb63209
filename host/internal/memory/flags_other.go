//go:build unix && !linux

package memory

// mapNoReserve is Linux's MAP_NORESERVE; elsewhere anonymous mappings are
// committed lazily anyway.
const mapNoReserve = 0

// mincore answers nil: the portable mincore differs from Linux's in what
// it reports, so the resident memory is bounded by the size and no page is
// trimmed.
func mincore([]byte) []byte { return nil }

// privatePages cannot tell here (no pagemap): memories are not mapped over
// images anyway (see imageFile).
func privatePages([]byte) (int, bool) { return 0, false }
