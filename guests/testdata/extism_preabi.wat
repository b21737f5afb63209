;; A plugin built for Extism's pre-1.0 ABI (host functions env.extism_*,
;; before Extism 1.0 moved them to extism:host/env), and one import of no
;; convention (other.thing), which each loader refuses in its own words.
;; Configured ([[plugins.tools]]) it reaches the Extism loader; unconfigured,
;; the native one (it does not import extism:host/env).
(module
  (import "env" "extism_input_length" (func (result i64)))
  (import "env" "extism_input_load_u8" (func (param i64) (result i32)))
  (import "env" "extism_alloc" (func (param i64) (result i64)))
  (import "env" "extism_output_set" (func (param i64 i64)))
  (import "env" "extism_error_set" (func (param i64)))
  (import "other" "thing" (func))
  (memory (export "memory") 1)
  (func (export "run") (result i32) (i32.const 0)))
