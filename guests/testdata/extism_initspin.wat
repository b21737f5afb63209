;; An Extism plugin whose initialization never ends (TestInstantiateWaitCancel):
;; _initialize spins until its deadline or its caller's cancellation stops it.
(module
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)
  (func (export "_initialize") (loop $spin (br $spin)))
  (func (export "run") (result i32) (i32.const 0)))
