;; Version "b" of the plugin "reload" (host/reload_test.go): one tool more than reload_a.wat, and
;; every tool answers "b".
(module
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (global $next (mut i32) (i32.const 1024))
  (func (export "morph_alloc") (param $n i32) (result i32)
    (local $p i32) (local.set $p (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $n)))
    (local.get $p))
  (data (i32.const 16) "{\"name\":\"reload\",\"version\":\"b\",\"abi_version\":1,\"hooks\":[],\"tools\":[{\"name\":\"version\",\"description\":\"Answers the version of the module.\",\"parameters\":{\"type\":\"object\"}},{\"name\":\"added\",\"description\":\"Answers the version of the module.\",\"parameters\":{\"type\":\"object\"}}]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 268)))
  (data (i32.const 512) "{\"output\":\"b\"}")
  (func (export "morph_call_tool") (param i32 i32) (result i64)
    (global.set $next (i32.const 1024))
    (i64.or (i64.shl (i64.const 512) (i64.const 32)) (i64.const 14))))
