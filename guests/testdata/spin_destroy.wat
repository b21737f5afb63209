;; Middleware whose morph_destroy spins forever, for the shutdown of
;; `morph run`: with a long timeout, only the CLI's shutdown bound or a signal
;; stops it. on_turn_start answers at once.
(module
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  ;; every input goes to 4096; each call consumes its input before the next
  (func (export "morph_alloc") (param i32) (result i32)
    (local $need i32)
    (local.set $need (i32.add (i32.const 4096) (local.get 0)))
    (if (i32.gt_u (local.get $need) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.div_u (local.get 0) (i32.const 65536)) (i32.const 1))) (i32.const -1))
        (then (return (i32.const 0))))))
    (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"spin-destroy\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"on_turn_start\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 79)))
  (func (export "morph_on_turn_start") (param i32 i32) (result i64)
    (i64.const 0))
  (func (export "morph_destroy") (param i32 i32) (result i64)
    (loop $l (br $l))
    (i64.const 0)))
