;; A middleware whose on_turn_start spins forever: the engine's deadline
;; for the hook (engine.MiddlewareConfig.Timeout), shorter than the plugin's
;; own timeout, must stop it (host.TestEngineDeadlineBoundsHook).
(module
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param $n i32) (result i32)
    (if (i32.gt_u (i32.add (i32.const 4096) (local.get $n)) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.div_u (local.get $n) (i32.const 65536)) (i32.const 1))) (i32.const -1))
        (then (return (i32.const 0))))))
    (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"mw_spin\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"on_turn_start\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 74)))
  (func (export "morph_on_turn_start") (param i32 i32) (result i64)
    (loop $l (br $l))
    (i64.const 0)))
