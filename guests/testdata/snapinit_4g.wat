;; A guest that initializes itself (it logs "initializing" in _initialize)
;; and whose memory is 4 GiB (65,536 pages, reserved, not touched): more
;; than an image holds (wazero's sizes in bytes are 32 bits), so the host
;; takes no snapshot of it and every instance runs _initialize.
(module
  (import "morph:host/v1" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 65536)
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"snapinit_4g\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 77)))
  (data (i32.const 512) "initializing")
  (func (export "_initialize") (call $log (i32.const 0) (i32.const 512) (i32.const 12)))
  (data (i32.const 1024) "{\"system_prompt\":\"ok\"}")
  (func (export "morph_build_prompt") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 22))))
