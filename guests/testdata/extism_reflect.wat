;; The main module of Extism's linking example (TestExtismLinkedUserModule),
;; shaped like js-sdk's reflect.wasm: reflect outputs host_reflect(input), a
;; function of extism:host/user that the linked module of that name
;; (extism_upper) exports; roots outputs what morph's list_roots, of the
;; same namespace, answers.
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/user" "host_reflect" (func $host_reflect (param i64) (result i64)))
  (import "extism:host/user" "list_roots" (func $list_roots (result i64)))
  (memory (export "memory") 1)
  (func $output (param $block i64)
    (call $output_set (local.get $block) (call $length (local.get $block))))
  (func (export "reflect") (result i32)
    (local $n i64) (local $in i64) (local $i i64)
    (local.set $n (call $input_length))
    (local.set $in (call $alloc (local.get $n)))
    (block $done (loop $copy
      (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
      (call $store_u8 (i64.add (local.get $in) (local.get $i)) (call $input_load_u8 (local.get $i)))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $copy)))
    (call $output (call $host_reflect (local.get $in)))
    (i32.const 0))
  (func (export "roots") (result i32)
    (call $output (call $list_roots))
    (i32.const 0)))
