;; Recursions the stack budget bounds (stack_test.go). Each export recurses n deep and returns n.
(module
  (type $unary (func (param i32) (result i32)))
  (table 1 funcref)
  (elem (i32.const 0) $inner)

  ;; Direct recursion, leaving every activation by the exit $how names: 0 return, 1 br to the body's
  ;; label, 2 br_if to it, 3 br_table through it, 4 the body's end.
  (func $direct (export "direct") (param $n i32) (param $how i32) (result i32)
    (if (local.get $n)
      (then (drop (call $direct (i32.sub (local.get $n) (i32.const 1)) (local.get $how)))))
    (if (i32.eqz (local.get $how)) (then (return (local.get $n))))
    (if (i32.eq (local.get $how) (i32.const 1)) (then (br 1 (local.get $n))))
    (drop (br_if 0 (local.get $n) (i32.eq (local.get $how) (i32.const 2))))
    (drop (block $stay (result i32)
      (br_table $stay 1 (local.get $n) (i32.eq (local.get $how) (i32.const 3)))))
    (local.get $n))

  ;; A cycle of two functions.
  (func $even (export "even") (param $n i32) (result i32)
    (if (result i32) (local.get $n)
      (then (i32.add (call $odd (i32.sub (local.get $n) (i32.const 1))) (i32.const 1)))
      (else (i32.const 0))))
  (func $odd (param $n i32) (result i32)
    (if (result i32) (local.get $n)
      (then (i32.add (call $even (i32.sub (local.get $n) (i32.const 1))) (i32.const 1)))
      (else (i32.const 0))))

  ;; Recursion through the table, entered through it too (so that the search of graph.go finds the
  ;; cycle at the indirect calls): they are charged, not $inner's entry.
  (func (export "indirect") (param $n i32) (result i32) (call_indirect (type $unary) (local.get $n) (i32.const 0)))
  (func $inner (param $n i32) (result i32)
    (if (result i32) (local.get $n)
      (then (i32.add
        (call_indirect (type $unary) (i32.sub (local.get $n) (i32.const 1)) (i32.const 0))
        (i32.const 1)))
      (else (i32.const 0))))
)
