;; Faulty session middleware: on_action traps, before_tool_call reports a
;; guest error, after_tool_call answers empty output (unchanged), and
;; morph_destroy traps, which the host must log without failing its close.
(module
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"mw-trap\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"on_action\",\"before_tool_call\",\"after_tool_call\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 107)))
  (func (export "morph_on_action") (param i32 i32) (result i64)
    unreachable)
  (data (i32.const 512) "policy store unavailable")
  (func (export "morph_before_tool_call") (param i32 i32) (result i64)
    ;; bit 31: the bytes are an error message
    (i64.or (i64.shl (i64.const 512) (i64.const 32)) (i64.or (i64.const 0x80000000) (i64.const 24))))
  (func (export "morph_after_tool_call") (param i32 i32) (result i64)
    (i64.const 0))
  (func (export "morph_destroy") (param i32 i32) (result i64)
    unreachable))
