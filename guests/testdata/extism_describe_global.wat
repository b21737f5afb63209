;; An Extism plugin (it imports Extism's kernel) that exports morph_describe
;; as a global: the host must name the export and its kind.
(module
  (import "extism:host/env" "input_length" (func (result i64)))
  (memory (export "memory") 1)
  (global (export "morph_describe") i32 (i32.const 0)))
