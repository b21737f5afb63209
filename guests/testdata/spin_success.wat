;; on_tool_success spins until its deadline stops it: a hook call that
;; holds its worker for the plugin's whole timeout (package temporal kills
;; the worker in it, and another worker takes the call once its activity's
;; timeout, derived from the plugin's, has passed).
(module
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  ;; every input goes at 1024, consumed by the next call
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 1024))
  (data (i32.const 16) "{\"name\":\"spin_success\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"on_tool_success\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 81)))
  (func (export "morph_on_tool_success") (param i32 i32) (result i64)
    (loop $l (br $l))
    (i64.const 0)))
