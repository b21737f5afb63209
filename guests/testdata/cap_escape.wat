;; A raw WASI guest for the host's file-grant tests, for paths Go's os
;; package would clean up before the host saw them. build_prompt opens its
;; input, a path relative to the first preopened directory (fd 3),
;; following symbolic links, and answers the file's first 256 bytes, or the
;; error flag and "errno NN" (WASI's errno) when path_open or fd_read fails.
(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_close" (func $fd_close (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  ;; inputs go at 8192; morph_alloc's single buffer is reused by every call
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 8192))
  (data (i32.const 16) "{\"name\":\"cap_escape\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"],\"capabilities\":[\"fs\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 98)))
  (data (i32.const 512) "errno 00")
  ;; the error result: "errno NN" at 512
  (func $fail (param $errno i32) (result i64)
    (i32.store8 (i32.const 518) (i32.add (i32.const 48) (i32.div_u (local.get $errno) (i32.const 10))))
    (i32.store8 (i32.const 519) (i32.add (i32.const 48) (i32.rem_u (local.get $errno) (i32.const 10))))
    (i64.or (i64.shl (i64.const 512) (i64.const 32)) (i64.or (i64.const 0x80000000) (i64.const 8))))
  (func (export "morph_build_prompt") (param $p i32) (param $n i32) (result i64)
    (local $e i32) (local $fd i32)
    ;; dirflags 1: follow symlinks; oflags 0; rights fd_read (2) only, so
    ;; the file opens for reading; fd out at 600
    (local.set $e (call $path_open (i32.const 3) (i32.const 1) (local.get $p) (local.get $n)
      (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 600)))
    (if (local.get $e) (then (return (call $fail (local.get $e)))))
    (local.set $fd (i32.load (i32.const 600)))
    ;; one iovec at 608: 256 bytes at 1024; bytes read at 616
    (i32.store (i32.const 608) (i32.const 1024))
    (i32.store (i32.const 612) (i32.const 256))
    (local.set $e (call $fd_read (local.get $fd) (i32.const 608) (i32.const 1) (i32.const 616)))
    (drop (call $fd_close (local.get $fd)))
    (if (local.get $e) (then (return (call $fail (local.get $e)))))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.extend_i32_u (i32.load (i32.const 616))))))
