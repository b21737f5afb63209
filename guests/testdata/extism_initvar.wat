;; An Extism plugin that sets a var in its initialization
;; (TestExtismInitVars): _initialize sets the var "v" to "init"; run
;; answers the var's value (empty when unset), then sets it to "call".
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "var_get" (func $var_get (param i64) (result i64)))
  (import "extism:host/env" "var_set" (func $var_set (param i64 i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "vinitcall")
  ;; $block copies [ptr, ptr+len) of this memory to a new kernel block.
  (func $block (param $ptr i32) (param $len i32) (result i64)
    (local $k i64) (local $i i32)
    (local.set $k (call $alloc (i64.extend_i32_u (local.get $len))))
    (block $done (loop $copy
      (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
      (call $store_u8 (i64.add (local.get $k) (i64.extend_i32_u (local.get $i)))
        (i32.load8_u (i32.add (local.get $ptr) (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $copy)))
    (local.get $k))
  (func (export "_initialize")
    (call $var_set (call $block (i32.const 0) (i32.const 1)) (call $block (i32.const 1) (i32.const 4))))
  (func (export "run") (result i32)
    (local $v i64)
    (local.set $v (call $var_get (call $block (i32.const 0) (i32.const 1))))
    (call $output_set (local.get $v) (call $length (local.get $v)))
    (call $var_set (call $block (i32.const 0) (i32.const 1)) (call $block (i32.const 5) (i32.const 4)))
    (i32.const 0)))
