;; echo_tool's next build, for the replay tests: the same manifest, but its
;; tool echo_input fails with its input uppercased (ASCII letters), so that
;; every recorded call of echo_tool answers differently.
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
  (func (export "morph_call_tool") (param $ptr i32) (param $len i32) (result i64)
    (local $i i32) (local $c i32)
    (global.set $next (i32.const 1024))
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (local.set $c (i32.load8_u (i32.add (local.get $ptr) (local.get $i))))
        (if (i32.and (i32.ge_u (local.get $c) (i32.const 97)) (i32.le_u (local.get $c) (i32.const 122)))
          (then (i32.store8 (i32.add (local.get $ptr) (local.get $i)) (i32.sub (local.get $c) (i32.const 32)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32))
      (i64.or (i64.const 0x80000000) (i64.extend_i32_u (local.get $len))))))
