//go:build wasip1

package pdk

import (
	"unsafe"

	"github.com/morphhost/morph/abi"
)

// The ABI v1 exports. Every one exists in every module; the manifest says
// which hooks are real.

var mem = newExchange(addrOf)

// addrOf is the address of b's first byte in linear memory.
func addrOf(b []byte) uint32 {
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

//go:wasmexport morph_abi_v1
func morphABIv1() {}

//go:wasmexport morph_alloc
func morphAlloc(size uint32) uint32 { return mem.alloc(size) }

//go:wasmexport morph_describe
func morphDescribe(ptr, size uint32) uint64 { return mem.call(abi.ExportDescribe, ptr, size) }

//go:wasmexport morph_build_prompt
func morphBuildPrompt(ptr, size uint32) uint64 { return mem.call(abi.ExportBuildPrompt, ptr, size) }

//go:wasmexport morph_build_params
func morphBuildParams(ptr, size uint32) uint64 { return mem.call(abi.ExportBuildParams, ptr, size) }

//go:wasmexport morph_on_tool_success
func morphOnToolSuccess(ptr, size uint32) uint64 {
	return mem.call(abi.ExportOnToolSuccess, ptr, size)
}

//go:wasmexport morph_fallback_final
func morphFallbackFinal(ptr, size uint32) uint64 {
	return mem.call(abi.ExportFallbackFinal, ptr, size)
}

//go:wasmexport morph_call_tool
func morphCallTool(ptr, size uint32) uint64 { return mem.call(abi.ExportCallTool, ptr, size) }

// Session middleware.

//go:wasmexport morph_on_turn_start
func morphOnTurnStart(ptr, size uint32) uint64 { return mem.call(abi.ExportOnTurnStart, ptr, size) }

//go:wasmexport morph_on_action
func morphOnAction(ptr, size uint32) uint64 { return mem.call(abi.ExportOnAction, ptr, size) }

//go:wasmexport morph_on_observation
func morphOnObservation(ptr, size uint32) uint64 {
	return mem.call(abi.ExportOnObservation, ptr, size)
}

//go:wasmexport morph_on_final
func morphOnFinal(ptr, size uint32) uint64 { return mem.call(abi.ExportOnFinal, ptr, size) }

//go:wasmexport morph_before_run
func morphBeforeRun(ptr, size uint32) uint64 { return mem.call(abi.ExportBeforeRun, ptr, size) }

//go:wasmexport morph_after_run
func morphAfterRun(ptr, size uint32) uint64 { return mem.call(abi.ExportAfterRun, ptr, size) }

//go:wasmexport morph_before_tool_call
func morphBeforeToolCall(ptr, size uint32) uint64 {
	return mem.call(abi.ExportBeforeToolCall, ptr, size)
}

//go:wasmexport morph_after_tool_call
func morphAfterToolCall(ptr, size uint32) uint64 {
	return mem.call(abi.ExportAfterToolCall, ptr, size)
}

// Pipeline stages.

//go:wasmexport morph_handle_stage
func morphHandleStage(ptr, size uint32) uint64 { return mem.call(abi.ExportHandleStage, ptr, size) }

//go:wasmexport morph_destroy
func morphDestroy(ptr, size uint32) uint64 { return mem.call(abi.ExportDestroy, ptr, size) }

//go:wasmexport morph_instance_replaced
func morphInstanceReplaced(ptr, size uint32) uint64 {
	return mem.call(abi.ExportInstanceReplaced, ptr, size)
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
