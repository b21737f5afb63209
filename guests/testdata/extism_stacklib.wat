;; The linked-module stack test's modules (TestExtismLinkedStackShare):
;; this one alone, or as the module "lib" that extism_stackmain links.
;;   recurse(n) recurses n deep;
;;   run recurses as deep as its input is long, and returns 0.
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (memory (export "memory") 1)
  (func $recurse (export "recurse") (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 0))
      (else (i32.add (call $recurse (i32.sub (local.get $n) (i32.const 1))) (i32.const 1)))))
  (func (export "run") (result i32)
    (drop (call $recurse (i32.wrap_i64 (call $input_length))))
    (i32.const 0)))
