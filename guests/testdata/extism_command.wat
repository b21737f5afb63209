;; A command module in Extism's convention (as go-sdk's std_command.wasm):
;; its only export is _start () -> (), which sets the output "started"
;; and, with the input "exit", exits with code 3 instead. It follows no
;; convention morph serves by itself: configuration makes _start a tool.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "started")
  (func (export "_start")
    (local $k i64) (local $i i32)
    (if (i64.eq (call $input_length) (i64.const 4)) (then (call $exit (i32.const 3))))
    (local.set $k (call $alloc (i64.const 7)))
    (block $done (loop $copy
      (br_if $done (i32.ge_u (local.get $i) (i32.const 7)))
      (call $store_u8 (i64.add (local.get $k) (i64.extend_i32_u (local.get $i)))
        (i32.load8_u (local.get $i)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $copy)))
    (call $output_set (local.get $k) (i64.const 7))))
