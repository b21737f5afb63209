;; A raw http_request guest for the host's HTTP capability tests. Each hook
;; treats its input as an HTTPRequest and answers what http_request answered,
;; unchanged: its result is packed like an export's, so the host's answer
;; (the response JSON, or the error flag and the host's message) is exactly
;; what the test's Call returns.
;;   build_prompt:   http_request(input)
;;   build_params:   the same, with morph_alloc failing (answers 0)
;;   fallback_final: http_request with a request pointer outside memory
(module
  (import "morph:host/v1" "http_request" (func $http (param i32 i32) (result i64)))
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (global $next (mut i32) (i32.const 4096))
  (global $oom (mut i32) (i32.const 0))
  ;; bump allocator, reset at each hook call; 0 while $oom is set, or when
  ;; memory cannot grow (memory_mb), which leaves the next allocation's place
  (func (export "morph_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local $end i32)
    (if (global.get $oom) (then (return (i32.const 0))))
    (local.set $p (global.get $next))
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.div_u (local.get $n) (i32.const 65536)) (i32.const 1))) (i32.const -1))
        (then (return (i32.const 0))))))
    (global.set $next (local.get $end))
    (local.get $p))
  (data (i32.const 16) "{\"name\":\"cap_http\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\",\"build_params\",\"fallback_final\"],\"capabilities\":[\"http\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (global.set $next (i32.const 4096))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 130)))
  (func (export "morph_build_prompt") (param $p i32) (param $n i32) (result i64)
    (global.set $oom (i32.const 0))
    (call $http (local.get $p) (local.get $n)))
  (func (export "morph_build_params") (param $p i32) (param $n i32) (result i64)
    (local $r i64)
    (global.set $oom (i32.const 1))
    (local.set $r (call $http (local.get $p) (local.get $n)))
    (global.set $oom (i32.const 0))
    (local.get $r))
  (func (export "morph_fallback_final") (param i32 i32) (result i64)
    (global.set $oom (i32.const 0))
    (call $http (i32.const 0x7ffffff0) (i32.const 64))))
