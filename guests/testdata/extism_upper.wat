;; The library of Extism's linking example (TestExtismLinkedUserModule),
;; linked as "extism:host/user" beside extism_reflect and shaped like
;; js-sdk's upper.wasm: host_reflect upper-cases the ASCII letters of an
;; Extism memory block in place and answers it. It has no memory of its own.
(module
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "load_u8" (func $load_u8 (param i64) (result i32)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (func (export "host_reflect") (param $block i64) (result i64)
    (local $p i64) (local $end i64) (local $c i32)
    (local.set $p (local.get $block))
    (local.set $end (i64.add (local.get $block) (call $length (local.get $block))))
    (block $done (loop $each
      (br_if $done (i64.ge_u (local.get $p) (local.get $end)))
      (local.set $c (call $load_u8 (local.get $p)))
      (if (i32.lt_u (i32.sub (local.get $c) (i32.const 97)) (i32.const 26))
        (then (call $store_u8 (local.get $p) (i32.sub (local.get $c) (i32.const 32)))))
      (local.set $p (i64.add (local.get $p) (i64.const 1)))
      (br $each)))
    (local.get $block)))
