;; Entry checks go to the functions on a cycle of calls only.
(module
  (type $unary (func (param i32) (result i32)))
  (table 2 funcref)
  (elem (i32.const 0) $self_indirect $leaf)

  ;; A chain of calls with no cycle: no checkpoint at all.
  (func $leaf (param $n i32) (result i32) (i32.add (local.get $n) (i32.const 1)))
  (func $middle (param $n i32) (result i32) (call $leaf (local.get $n)))
  (func (export "chain") (param $n i32) (result i32) (call $middle (local.get $n)))

  ;; Mutual recursion by direct calls: both on the cycle, n + 1 entries for n.
  (func $even (export "even") (param $n i32) (result i32)
    (if (result i32) (local.get $n)
      (then (call $odd (i32.sub (local.get $n) (i32.const 1))))
      (else (i32.const 1))))
  (func $odd (param $n i32) (result i32)
    (if (result i32) (local.get $n)
      (then (call $even (i32.sub (local.get $n) (i32.const 1))))
      (else (i32.const 0))))

  ;; Recursion through the table: n + 1 entries for n.
  (func $self_indirect (export "self_indirect") (param $n i32) (result i32)
    (if (result i32) (local.get $n)
      (then (call_indirect (type $unary) (i32.sub (local.get $n) (i32.const 1)) (i32.const 0)))
      (else (i32.const 0))))

  ;; An indirect call to a function whose reference is taken but that calls
  ;; nothing: no cycle, no checkpoint.
  (func (export "via_table") (param $n i32) (result i32)
    (call_indirect (type $unary) (local.get $n) (i32.const 1)))
)
