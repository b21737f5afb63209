;; A plugin whose tool echo_input fails with its whole input (the
;; ToolCallInput the host sent) as its guest error's message: the tests
;; read what a tool is given, call_id included.
(module
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (global $next (mut i32) (i32.const 1024))
  (func (export "morph_alloc") (param $n i32) (result i32)
    (local $p i32) (local.set $p (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $n)))
    (local.get $p))
  (data (i32.const 16) "{\"name\":\"echo_tool\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[],\"tools\":[{\"name\":\"echo_input\",\"description\":\"Fails with its input as the message.\",\"parameters\":{\"type\":\"object\"}}]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 177)))
  ;; bit 31 of the result marks a guest-reported error
  (func (export "morph_call_tool") (param $ptr i32) (param $len i32) (result i64)
    (global.set $next (i32.const 1024))
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32))
      (i64.or (i64.const 0x80000000) (i64.extend_i32_u (local.get $len))))))
