;; Echoes its input as its output: the guest side of the call-path benchmarks.
(module
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (global $next (mut i32) (i32.const 4096))
  (func (export "morph_alloc") (param $n i32) (result i32)
    (local $need i32)
    ;; one input at a time: always at 4096, growing memory to fit
    (local.set $need (i32.add (i32.const 4096) (local.get $n)))
    (if (i32.gt_u (local.get $need) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.div_u (local.get $n) (i32.const 65536)) (i32.const 1))) (i32.const -1))
        (then (return (i32.const 0))))))
    (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"echo\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 70)))
  (func (export "morph_build_prompt") (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) (i64.extend_i32_u (local.get $len)))))
