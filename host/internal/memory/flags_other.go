//go:build unix && !linux

package memory

// mapNoReserve is Linux's MAP_NORESERVE; elsewhere anonymous mappings are
// committed lazily anyway.
const mapNoReserve = 0
