;; js-sdk's circular modules (wasm/corpus/01-circular-rhs.wat), linked as
;; "rhs": add_one(n) is lhs's mul_two(n+1). It defines the memory that
;; extism_circ_main imports; unlike js-sdk's (0 pages), one of 40 pages
;; (2.5 MiB), to tell it counted once from twice within memory_mb, and two
;; more exports that extism_circ_main calls: peek(a) answers the byte at a
;; of the shared memory; deep(n) recurses n deep.
(module
  (import "lhs" "mul_two" (func $mul_two (param i32) (result i32)))
  (memory (export "memory") 40)
  (func (export "add_one") (param $in i32) (result i32)
    (call $mul_two (i32.add (local.get $in) (i32.const 1))))
  (func (export "peek") (param $a i32) (result i32)
    (i32.load8_u (local.get $a)))
  (func $deep (export "deep") (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 0))
      (else (i32.add (call $deep (i32.sub (local.get $n) (i32.const 1))) (i32.const 1))))))
