;; A command module linked with --export=__wasm_call_ctors
;; (TestExtismCommandCtors): its constructor counts its runs in a global.
;; _start runs the constructors itself, as wasi-libc's does, then outputs
;; the count as one digit; count outputs it without running them. Each
;; answers "1" when the constructors ran once in the instance.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)
  (global $runs (mut i32) (i32.const 0))
  (func $ctors (export "__wasm_call_ctors")
    (global.set $runs (i32.add (global.get $runs) (i32.const 1))))
  (func $out
    (local $k i64)
    (local.set $k (call $alloc (i64.const 1)))
    (call $store_u8 (local.get $k) (i32.add (i32.const 48) (global.get $runs)))
    (call $output_set (local.get $k) (i64.const 1)))
  (func (export "_start") (call $ctors) (call $out))
  (func (export "count") (result i32) (call $out) (i32.const 0)))
