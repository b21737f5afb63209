;; An Extism plugin in WAT that calls Extism's host functions with offsets
;; outside the kernel's memory or that are no memory block, one way per hook:
;;   build_prompt     load_u64 at 0xFFFFFFF0            (go-sdk traps)
;;   build_params     output_set of [0x7FFFFFF0, +64)   (morph: ErrBadOutput)
;;   on_tool_success  store_u64 at 0xFFFFFFF0           (go-sdk traps)
;;   fallback_final   input_load_u64 at 0x7FFFFFF0      (go-sdk traps)
;;   before_run       log_info and config_get of offsets that are no block,
;;                    then answers {}: both are soft, no trap
;;   after_run        output_set of a 1 TiB output      (morph: ErrOutputTooLarge)
;;   on_turn_start    overwrites the header of a kernel block (in Extism's
;;                    kernel, making the block its own successor), then
;;                    allocates, which has Extism's kernel walk the blocks
;;                    forever; morph's kernel walks none, and the call
;;                    answers {}
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "load_u64" (func $load_u64 (param i64) (result i64)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "input_load_u64" (func $input_load_u64 (param i64) (result i64)))
  (import "extism:host/env" "log_info" (func $log_info (param i64)))
  (import "extism:host/env" "config_get" (func $config_get (param i64) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"name\":\"extism_oob\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\",\"build_params\",\"on_tool_success\",\"fallback_final\",\"before_run\",\"after_run\",\"on_turn_start\"]}")
  (data (i32.const 256) "{}")
  (func $out (param $ptr i32) (param $len i32)
    (local $k i64) (local $i i32)
    (local.set $k (call $alloc (i64.extend_i32_u (local.get $len))))
    (block $done (loop $copy
      (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
      (call $store_u8 (i64.add (local.get $k) (i64.extend_i32_u (local.get $i)))
        (i32.load8_u (i32.add (local.get $ptr) (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $copy)))
    (call $output_set (local.get $k) (i64.extend_i32_u (local.get $len))))
  (func (export "morph_describe") (result i32)
    (call $out (i32.const 0) (i32.const 167))
    (i32.const 0))
  (func (export "morph_build_prompt") (result i32)
    (drop (call $load_u64 (i64.const 0xFFFFFFF0)))
    (i32.const 0))
  (func (export "morph_build_params") (result i32)
    (call $output_set (i64.const 0x7FFFFFF0) (i64.const 64))
    (i32.const 0))
  (func (export "morph_on_tool_success") (result i32)
    (call $store_u64 (i64.const 0xFFFFFFF0) (i64.const 1))
    (i32.const 0))
  (func (export "morph_fallback_final") (result i32)
    (drop (call $input_load_u64 (i64.const 0x7FFFFFF0)))
    (i32.const 0))
  (func (export "morph_before_run") (result i32)
    (call $log_info (i64.const 0xFFFFFFF0))
    (drop (call $config_get (i64.const 12345)))
    (call $out (i32.const 256) (i32.const 2))
    (i32.const 0))
  (func (export "morph_after_run") (result i32)
    (call $output_set (i64.const 64) (i64.const 0x10000000000))
    (i32.const 0))
  (func (export "morph_on_turn_start") (result i32)
    (local $k i64)
    (local.set $k (call $alloc (i64.const 60000)))
    ;; The block's header is the 12 bytes before its data: status (u8,
    ;; padded to 4), size (u32), used (u32). A size of -12 makes the block
    ;; its own successor; an allocation too large for the room left but not
    ;; for the blocks makes the kernel look for a free one among them.
    (call $store_u64 (i64.sub (local.get $k) (i64.const 8)) (i64.const 0x0000EA60FFFFFFF4))
    (drop (call $alloc (i64.const 10000)))
    (call $out (i32.const 256) (i32.const 2))
    (i32.const 0)))
