;; The minimal plugin of abi/SPEC.md section 9, verbatim: a test keeps the two equal.
(module
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (global $next (mut i32) (i32.const 1024))
  (func (export "morph_alloc") (param $n i32) (result i32)
    (local $p i32) (local.set $p (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $n)))
    (local.get $p))
  (data (i32.const 16) "{\"name\":\"min\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 69)))
  (data (i32.const 128) "{\"system_prompt\":\"Be brief.\"}")
  (func (export "morph_build_prompt") (param i32 i32) (result i64)
    (global.set $next (i32.const 1024)) ;; the previous input is no longer needed
    (i64.or (i64.shl (i64.const 128) (i64.const 32)) (i64.const 29))))
