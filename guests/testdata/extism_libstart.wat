;; A linked module with no memory whose start function sets the global
;; seven answers: 7 only if the start function ran in the caller's instance.
(module
  (global $g (mut i32) (i32.const 0))
  (func $init (global.set $g (i32.const 7)))
  (func (export "seven") (result i32) (global.get $g))
  (start $init))
