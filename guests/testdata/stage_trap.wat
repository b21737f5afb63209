;; A stage handler that traps: morph_handle_stage runs unreachable. The
;; pipeline's stage fails with the trap's reason, locally and on Temporal.
(module
  (memory (export "memory") 1)
  (global $next (mut i32) (i32.const 4096))
  (func (export "morph_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $n)))
    (local.get $p))
  (data (i32.const 16) "{\"name\":\"stage_trap\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"handle_stage\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (global.set $next (i32.const 4096))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 76)))
  (func (export "morph_abi_v1"))
  (func (export "morph_handle_stage") (param i32 i32) (result i64)
    unreachable))
