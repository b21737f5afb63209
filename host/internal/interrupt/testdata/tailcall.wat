;; Tail calls (wat2wasm --enable-tail-call): return_call's function index is renumbered, and a million
;; tail calls deep does not grow the stack.
(module
  (type $t (func (param i64 i64) (result i64)))
  (table funcref (elem $sum))
  (func $sum (export "sum") (type $t)
    (if (result i64) (i64.eqz (local.get 0))
      (then (local.get 1))
      (else (return_call $sum (i64.sub (local.get 0) (i64.const 1)) (i64.add (local.get 1) (local.get 0))))))
  (func (export "sum_indirect") (type $t)
    (return_call_indirect (type $t) (local.get 0) (local.get 1) (i32.const 0))))
