;; Imports its memory (env.memory) instead of defining and exporting it: the
;; host provides no memory, and must say so naming the import, not report a
;; trap in morph_describe.
(module
  (import "env" "memory" (memory 1))
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "morph_describe") (param i32 i32) (result i64) (i64.const 0)))
