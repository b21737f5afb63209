;; An Extism plugin whose morph_build_prompt has ABI v1's native signature
;; instead of Extism's `() -> i32`: refused at load (ErrABIMismatch).
(module
  (import "extism:host/env" "output_set" (func (param i64 i64)))
  (memory (export "memory") 1)
  (func (export "morph_describe") (result i32) (i32.const 1))
  (func (export "morph_build_prompt") (param i32 i32) (result i64) (i64.const 0)))
