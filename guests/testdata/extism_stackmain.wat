;; The main module of the linked-module stack test (see extism_stacklib):
;; run has lib recurse as deep as its input is long, and returns 0.
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "lib" "recurse" (func $recurse (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (drop (call $recurse (i32.wrap_i64 (call $input_length))))
    (i32.const 0)))
