;; leak.wat as an Extism plugin, with the state only an Extism plugin has:
;; build_prompt answers {"system_prompt":"seen N"}, N = 1 when something it
;; writes was already there: a word in a data page, one in a page no data
;; segment touches, one in a page it grows, its global $g, or its var "v"
;; (kept by the kernel, in Go); 0 when none was. Then it writes all five.
;; A fresh instance must answer 0 (TestIsolationNoLeak, both loaders).
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "var_get" (func $var_get (param i64) (result i64)))
  (import "extism:host/env" "var_set" (func $var_set (param i64 i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 2)
  (global $g (mut i64) (i64.const 0))
  (data (i32.const 16) "{\"name\":\"leak\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"]}")
  ;; the answer at 1024; its digit at 1047; the var's key "v" and value "x" at 1100
  (data (i32.const 1024) "{\"system_prompt\":\"seen 0\"}")
  (data (i32.const 1100) "vx")
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
  (func $out (param $ptr i32) (param $len i32)
    (call $output_set (call $block (local.get $ptr) (local.get $len)) (i64.extend_i32_u (local.get $len))))
  (func (export "morph_describe") (result i32)
    (call $out (i32.const 16) (i32.const 70))
    (i32.const 0))
  (func (export "morph_build_prompt") (result i32)
    (local $seen i64)
    (if (i32.lt_u (memory.size) (i32.const 3))
      (then (drop (memory.grow (i32.const 1)))))
    (local.set $seen (i64.or (i64.or (i64.load (i32.const 1080)) (global.get $g))
      (i64.or (i64.load (i32.const 65544)) (i64.load (i32.const 131080)))))
    (local.set $seen (i64.or (local.get $seen) (call $var_get (call $block (i32.const 1100) (i32.const 1)))))
    (i32.store8 (i32.const 1047) (i32.add (i32.const 48) (i64.ne (local.get $seen) (i64.const 0))))
    (i64.store (i32.const 1080) (i64.const 0x5a5a5a5a5a5a5a5a))
    (i64.store (i32.const 65544) (i64.const 0x5a5a5a5a5a5a5a5a))
    (i64.store (i32.const 131080) (i64.const 0x5a5a5a5a5a5a5a5a))
    (global.set $g (i64.const 1))
    (call $var_set (call $block (i32.const 1100) (i32.const 1)) (call $block (i32.const 1101) (i32.const 1)))
    (call $out (i32.const 1024) (i32.const 26))
    (i32.const 0)))
