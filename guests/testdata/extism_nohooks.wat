;; An Extism plugin that is neither a morph plugin (no morph_describe) nor an
;; Extism tool plugin (no describe and call): refused at load (ErrABIMismatch).
(module
  (import "extism:host/env" "output_set" (func (param i64 i64)))
  (memory (export "memory") 1)
  (func (export "count_vowels") (result i32) (i32.const 0)))
