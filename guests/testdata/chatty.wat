;; Writes 2,000 lines of 64 bytes (128,000 bytes) to stdout through WASI in
;; build_prompt, then answers normally: the host must log only its per-instance
;; budget of guest output.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 8192))
  (data (i32.const 16) "{\"name\":\"chatty\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 72)))
  ;; a 64-byte line at 512, its iovec at 1024
  (data (i32.const 512) "chatty guest line, padded to sixty-four bytes with dots........\0a")
  (data (i32.const 256) "{\"system_prompt\":\"still fine\"}")
  (func (export "morph_build_prompt") (param i32 i32) (result i64)
    (local $i i32)
    (i32.store (i32.const 1024) (i32.const 512))
    (i32.store (i32.const 1028) (i32.const 64))
    (loop $l
      (drop (call $fd_write (i32.const 1) (i32.const 1024) (i32.const 1) (i32.const 1040)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 2000))))
    (i64.or (i64.shl (i64.const 256) (i64.const 32)) (i64.const 30))))
