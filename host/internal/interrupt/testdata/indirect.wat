;; A call graph whose depth-first search meets the indirect-call node as the
;; head of a cycle: "start" (function 0, the first root) calls through the
;; table, reaching $b, which calls through the table again. The cycle is then
;; checked at the indirect call sites, not at $b's entry, so a direct call of
;; $b that makes no indirect call runs no check.
(module
  (type $unary (func (param i32) (result i32)))
  (table 1 funcref)
  (elem (i32.const 0) $b)
  (func (export "start") (param $n i32) (result i32)
    (call_indirect (type $unary) (local.get $n) (i32.const 0)))
  (func $b (param $n i32) (result i32)
    (if (result i32) (local.get $n)
      (then (call_indirect (type $unary) (i32.sub (local.get $n) (i32.const 1)) (i32.const 0)))
      (else (i32.const 7))))
  (func (export "direct") (result i32) (call $b (i32.const 0)))
)
