;; A guest whose morph_alloc calls http_request: the host's answer to the
;; first http_request is written through morph_alloc, which would call
;; http_request again, and so on, a recursion through the host that the
;; guest's own checkpoints never see. The host refuses the inner call.
;;   build_prompt: http_request with a request outside memory (an error the
;;   host must write into the guest), answered as the hook's result.
(module
  (import "morph:host/v1" "http_request" (func $http (param i32 i32) (result i64)))
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (global $inner (mut i64) (i64.const 0))
  (func (export "morph_alloc") (param $n i32) (result i32)
    (global.set $inner (call $http (i32.const 0x7ffffff0) (i32.const 64)))
    (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"cap_reenter\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"],\"capabilities\":[\"http\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 101)))
  (func (export "morph_build_prompt") (param i32 i32) (result i64)
    (call $http (i32.const 0x7ffffff0) (i32.const 64))))
