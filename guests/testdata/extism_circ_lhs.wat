;; js-sdk's circular modules (wasm/corpus/00-circular-lhs.wat), linked as
;; "lhs" beside extism_circ_rhs and extism_circ_main
;; (TestExtismLinkedSharedMemory): mul_two(n) answers n past 100, else
;; rhs's add_one(2n). It has no memory.
(module
  (import "rhs" "add_one" (func $add_one (param i32) (result i32)))
  (func (export "mul_two") (param $in i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $in) (i32.const 100))
      (then (local.get $in))
      (else (call $add_one (i32.mul (local.get $in) (i32.const 2)))))))
