;; Lists the before_run middleware hook in its manifest but does not export
;; morph_before_run: the host must refuse it at load, naming both.
(module
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"mw-missing\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"on_turn_start\",\"before_run\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 90)))
  (func (export "morph_on_turn_start") (param i32 i32) (result i64)
    (i64.const 0)))
