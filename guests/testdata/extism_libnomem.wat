;; A linked module with no imports and no memory, for extism_sevenmain.
(module
  (func (export "seven") (result i32) (i32.const 7)))
