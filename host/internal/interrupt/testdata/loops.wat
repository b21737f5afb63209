;; Deterministic checkpoint counts, guests to interrupt, and the benchmark's loop.
(module
  ;; A do-while loop of n iterations: n checkpoints (the loop headers; no entry check, as it calls nothing).
  (func (export "spin") (param $n i32)
    (loop $l
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n))))

  ;; A binary call tree of depth n and no loop: 2^(n+1) - 1 checkpoints, all function entries.
  (func $tree (export "tree") (param $n i32)
    (if (local.get $n)
      (then
        (call $tree (i32.sub (local.get $n) (i32.const 1)))
        (call $tree (i32.sub (local.get $n) (i32.const 1))))))

  (func (export "forever") (loop $l (br $l)))

  (func (export "answer") (result i32) (i32.const 42))

  ;; The benchmark's tight counted loop: 1 + 2 + ... + n (mod 2^32).
  (func (export "sum") (param $n i32) (result i32)
    (local $acc i32)
    (loop $l
      (local.set $acc (i32.add (local.get $acc) (local.get $n)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n)))
    (local.get $acc))
)
