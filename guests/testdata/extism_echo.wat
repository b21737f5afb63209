;; An Extism plugin in WAT (imports extism:host/env, exports `() -> i32`):
;; the small guest of the Extism loader's tests.
;;   build_prompt answers {"system_prompt":"calls: N"}, N counting the
;;     instance's build_prompt calls (0-9), so a test sees which calls shared
;;     an instance (the isolation modes);
;;   build_params answers the last 16 bytes of its input (all of it when
;;     shorter), read in place in the input's kernel block: they are the
;;     input's only if all of it arrived;
;;   on_tool_success sets the error "tool store unavailable" and returns 1;
;;   fallback_final returns 7 without an error.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "error_set" (func $error_set (param i64)))
  (import "extism:host/env" "input_offset" (func $input_offset (result i64)))
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"name\":\"extism_echo\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\",\"build_params\",\"on_tool_success\",\"fallback_final\"]}")
  (data (i32.const 256) "{\"system_prompt\":\"calls: 0\"}")
  (data (i32.const 512) "tool store unavailable")
  (global $calls (mut i32) (i32.const 0))
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
    (call $out (i32.const 0) (i32.const 127))
    (i32.const 0))
  (func (export "morph_build_prompt") (result i32)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (i32.store8 (i32.const 281) (i32.add (i32.const 48) (global.get $calls)))
    (call $out (i32.const 256) (i32.const 28))
    (i32.const 0))
  (func (export "morph_build_params") (result i32)
    (local $n i64) (local $k i64)
    (local.set $n (call $input_length))
    (local.set $k (select (local.get $n) (i64.const 16) (i64.lt_u (local.get $n) (i64.const 16))))
    (call $output_set (i64.sub (i64.add (call $input_offset) (local.get $n)) (local.get $k)) (local.get $k))
    (i32.const 0))
  (func (export "morph_on_tool_success") (result i32)
    (call $error_set (call $block (i32.const 512) (i32.const 22)))
    (i32.const 1))
  (func (export "morph_fallback_final") (result i32)
    (i32.const 7)))
