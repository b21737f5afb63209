;; The main module of an Extism plugin with a linked module "lib", neither
;; with a memory (issue 28: a memoryless linked module hung Load).
;;   run returns 0 when lib.seven answers 7, else 1.
(module
  (import "lib" "seven" (func $seven (result i32)))
  (func (export "run") (result i32)
    (if (result i32) (i32.eq (call $seven) (i32.const 7))
      (then (i32.const 0))
      (else (i32.const 1)))))
