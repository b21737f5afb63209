;; js-sdk's circular modules (wasm/corpus/circular.wat), the main module
;; beside extism_circ_lhs and extism_circ_rhs, whose memory it imports
;; (TestExtismLinkedSharedMemory): encalculate outputs lhs's mul_two(1),
;; 127, as a little-endian u64. Besides js-sdk's: shared stores 42 at
;; address 100 of its memory and outputs what rhs's peek(100) reads there
;; (42 when the memory is rhs's); deep has rhs recurse as deep as its input
;; is long.
(module
  (import "lhs" "mul_two" (func $mul_two (param i32) (result i32)))
  (import "rhs" "peek" (func $peek (param i32) (result i32)))
  (import "rhs" "deep" (func $deep (param i32) (result i32)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (memory (import "rhs" "memory") 0)
  (func $output_u64 (param $v i64)
    (local $out i64)
    (local.set $out (call $alloc (i64.const 8)))
    (call $store_u64 (local.get $out) (local.get $v))
    (call $output_set (local.get $out) (i64.const 8)))
  (func (export "encalculate") (result i32)
    (call $output_u64 (i64.extend_i32_u (call $mul_two (i32.const 1))))
    (i32.const 0))
  (func (export "shared") (result i32)
    (i32.store8 (i32.const 100) (i32.const 42))
    (call $output_u64 (i64.extend_i32_u (call $peek (i32.const 100))))
    (i32.const 0))
  (func (export "deep") (result i32)
    (drop (call $deep (i32.wrap_i64 (call $input_length))))
    (i32.const 0)))
