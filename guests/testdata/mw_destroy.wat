;; Session middleware lifecycle: an observing on_turn_start that answers empty
;; output, and a morph_destroy that logs one line through the host's log
;; function, so a test can count how often the host destroys an instance.
(module
  (import "morph:host/v1" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  ;; every input goes to 4096; each call consumes its input before the next
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"mw-destroy\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"on_turn_start\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 77)))
  (func (export "morph_on_turn_start") (param i32 i32) (result i64)
    (i64.const 0))
  (data (i32.const 512) "mw_destroy: instance destroyed")
  (func (export "morph_destroy") (param i32 i32) (result i64)
    (call $log (i32.const 0) (i32.const 512) (i32.const 30))
    (i64.const 0)))
