;; A plugin instrumented for Dylibso's Observe SDK: its instrumenting
;; compiler's dylibso_observe and dylibso:observe/instrument imports and the
;; observe-api bindings' dylibso:observe/api.
(module
  (import "dylibso_observe" "instrument_enter" (func (param i32)))
  (import "dylibso_observe" "instrument_exit" (func (param i32)))
  (import "dylibso:observe/instrument" "memory-grow" (func (param i32)))
  (import "dylibso:observe/api" "metric" (func (param i32 i64 i32)))
  (memory (export "memory") 1)
  (func (export "run") (result i32) (i32.const 0)))
