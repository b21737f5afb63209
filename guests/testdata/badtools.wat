;; A plugin whose manifest declares two tools the engine refuses: one named
;; with a space, one whose schema is no JSON Schema ("type": "bool"). Every
;; path that checks a plugin (plugin check, plugin test, run) refuses both,
;; with the same words (internal/doccheck is not involved: cmd/morph's
;; TestOneToolValidation).
(module
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (global $next (mut i32) (i32.const 1024))
  (func (export "morph_alloc") (param $n i32) (result i32)
    (local $p i32) (local.set $p (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $n)))
    (local.get $p))
  (data (i32.const 16) "{\"name\":\"badtools\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[],\"tools\":[{\"name\":\"char count\",\"description\":\"Counts characters.\",\"parameters\":{\"type\":\"object\"}},{\"name\":\"count\",\"description\":\"Counts.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"bool\"}}}}]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 265)))
  (func (export "morph_call_tool") (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) (i64.extend_i32_u (local.get $len)))))
