;; A hostile guest for the sandbox tests. build_prompt counts the environment
;; variables and arguments WASI gives it, calls the host functions with
;; out-of-bounds pointers, and answers {"system_prompt":"env E args A log ok config C"}
;; where C is config_get's answer for an out-of-bounds key (-1 expected: "-").
(module
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $env_sizes (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes (param i32 i32) (result i32)))
  (import "morph:host/v1" "log" (func $log (param i32 i32 i32)))
  (import "morph:host/v1" "config_get" (func $config_get (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 8192))
  (data (i32.const 16) "{\"name\":\"snoop\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 71)))
  ;; the answer template at 256; digits are patched in at 278 (env), 285 (args), 301 (config)
  (data (i32.const 256) "{\"system_prompt\":\"env 0 args 0 log ok config 0\"}")
  (func $digit (param $at i32) (param $n i32)
    (i32.store8 (local.get $at) (i32.add (i32.const 48) (i32.rem_u (local.get $n) (i32.const 10)))))
  (func (export "morph_build_prompt") (param i32 i32) (result i64)
    (drop (call $env_sizes (i32.const 1024) (i32.const 1028)))
    (drop (call $args_sizes (i32.const 1032) (i32.const 1036)))
    (call $digit (i32.const 278) (i32.load (i32.const 1024)))
    (call $digit (i32.const 285) (i32.load (i32.const 1032)))
    ;; host functions with pointers far outside memory must not trap
    (call $log (i32.const 0) (i32.const 0x7ffffff0) (i32.const 100))
    (if (i32.eq (call $config_get (i32.const 0x7ffffff0) (i32.const 10) (i32.const 0x7fffff00) (i32.const 10)) (i32.const -1))
      (then (i32.store8 (i32.const 301) (i32.const 45))))
    (i64.or (i64.shl (i64.const 256) (i64.const 32)) (i64.const 48))))
