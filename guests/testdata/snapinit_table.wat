;; A guest that initializes itself (it logs "initializing" in _initialize)
;; and whose code can change a table (table.set, never called): its state
;; is not all in its memory and globals, so the host takes no snapshot of it
;; and every instance runs _initialize.
(module
  (import "morph:host/v1" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (table 1 funcref)
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"snapinit_table\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 80)))
  (data (i32.const 512) "initializing")
  (func (export "_initialize") (call $log (i32.const 0) (i32.const 512) (i32.const 12)))
  (func $unused (table.set 0 (i32.const 0) (ref.null func)))
  (data (i32.const 1024) "{\"system_prompt\":\"ok\"}")
  (func (export "morph_build_prompt") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 22))))
