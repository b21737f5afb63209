//go:build wasip1

package pdk

import "unsafe"

// The exchange behind the exports (exports_gen_wasip1.go, generated from
// abi.Exports).
var mem = newExchange(addrOf)

// addrOf is the address of b's first byte in linear memory.
func addrOf(b []byte) uint32 {
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// The host functions of morph:host/v1.

//go:wasmimport morph:host/v1 log
func morphLog(level int32, ptr unsafe.Pointer, size uint32)

//go:wasmimport morph:host/v1 config_get
func morphConfigGet(keyPtr unsafe.Pointer, keyLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport morph:host/v1 http_request
func morphHTTPRequest(ptr unsafe.Pointer, size uint32) uint64

func hostHTTP(req []byte) ([]byte, bool, error) {
	return mem.claim(morphHTTPRequest(unsafe.Pointer(unsafe.SliceData(req)), uint32(len(req))))
}

func hostLog(level int32, msg string) {
	morphLog(level, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

func hostConfigGet(key string, out []byte) int32 {
	return morphConfigGet(unsafe.Pointer(unsafe.StringData(key)), uint32(len(key)),
		unsafe.Pointer(unsafe.SliceData(out)), uint32(len(out)))
}
