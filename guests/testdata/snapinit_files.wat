;; A guest whose _initialize logs "initializing" and closes a file (fd 9,
;; which it does not have: WASI answers EBADF): a guest that opens or closes
;; files while it initializes has state in the host's file table, which a
;; snapshot does not hold, so the host takes none and every instance runs
;; _initialize.
(module
  (import "morph:host/v1" "log" (func $log (param i32 i32 i32)))
  (import "wasi_snapshot_preview1" "fd_close" (func $close (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"snapinit_files\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 80)))
  (data (i32.const 512) "initializing")
  (func (export "_initialize")
    (call $log (i32.const 0) (i32.const 512) (i32.const 12))
    (drop (call $close (i32.const 9))))
  (data (i32.const 1024) "{\"system_prompt\":\"ok\"}")
  (func (export "morph_build_prompt") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 22))))
