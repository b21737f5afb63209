;; A tool that spins until its deadline or an interrupt stops it: a call a
;; test can leave in flight (package mcp: a client that goes away while its
;; call runs).
(module
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  ;; every input goes at 1024, consumed by the next call
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 1024))
  (data (i32.const 16) "{\"name\":\"spin_tool\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[],\"tools\":[{\"name\":\"spin\",\"description\":\"Spins until its deadline or an interrupt stops it.\",\"parameters\":{\"type\":\"object\"}}]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 185)))
  (func (export "morph_call_tool") (param i32 i32) (result i64)
    (loop $l (br $l))
    (i64.const 0)))
