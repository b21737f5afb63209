;; A morph ABI v1 plugin without a memory: the native loader refuses it at
;; load (it must export its memory), where a memoryless Extism plugin is
;; served (extism_nomemory).
(module
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "morph_describe") (param i32 i32) (result i64) (i64.const 0)))
