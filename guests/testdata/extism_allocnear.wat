;; A guest whose memory holds memory_mb = 4 less 64 KiB (TestExtismKernelShare):
;; run, with an empty input, traps (unreachable) unless the kernel refuses
;; an alloc of 2 MiB (an alloc of 0) and serves one of 16 KiB (its memory's
;; first 64 KiB, which fill memory_mb exactly).
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (memory (export "memory") 63)
  (func (export "run") (result i32)
    (if (i64.ne (call $alloc (i64.const 0x200000)) (i64.const 0)) (then unreachable))
    (if (i64.eqz (call $alloc (i64.const 0x4000))) (then unreachable))
    (i32.const 0)))
