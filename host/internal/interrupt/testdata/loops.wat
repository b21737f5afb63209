;; Deterministic checkpoint counts, guests to interrupt, and the benchmark's loop.
(module
  (memory 1)
  ;; A do-while loop of n iterations: n checkpoints (the loop headers; no entry check, as it calls nothing).
  (func (export "spin") (param $n i32)
    (loop $l
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n))))

  ;; A binary call tree of depth n and no loop: 2^(n+1) - 1 function entries, and a checkpoint after each
  ;; recursive call.
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
;; A loop that calls a function with a loop of its own: n + n*m checkpoints, and n after the calls. A
  ;; function with a checkpoint keeps the counter in a local, so outer must save it before each call to inner
  ;; and reload it after (not around the call to leaf, which has no checkpoint), or the counts of inner are lost.
  (func $inner (param $m i32)
    (loop $l
      (local.set $m (i32.sub (local.get $m) (i32.const 1)))
      (br_if $l (local.get $m))))
  (func $leaf)
  (func (export "outer") (param $n i32) (param $m i32)
    (loop $l
      (call $inner (local.get $m))
      (call $leaf)
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n))))

  ;; After a loop of k iterations, leaves by the way $how picks: 0 br to the body's label, 1 br_if to it,
  ;; 2 br_table to it, 3 return, 4 the body's end. Each must save the local copy of the counter.
  (func $exit (param $how i32) (param $k i32) (result i32)
    (loop $l
      (local.set $k (i32.sub (local.get $k) (i32.const 1)))
      (br_if $l (local.get $k)))
    (block $b
      (br_if $b (i32.ne (local.get $how) (i32.const 0)))
      (br 1 (i32.const 7)))
    (block $b
      (br_if $b (i32.ne (local.get $how) (i32.const 1)))
      (br_if 1 (i32.const 7) (i32.const 1))
      (drop))
    (block $b
      (br_if $b (i32.ne (local.get $how) (i32.const 2)))
      (br_table 1 1 (i32.const 7) (i32.const 0)))
    (block $b
      (br_if $b (i32.ne (local.get $how) (i32.const 3)))
      (return (i32.const 7)))
    (i32.const 7))
  ;; n calls of exit(how, k): n + n*k checkpoints; traps if exit answers other than 7.
  (func (export "exits") (param $how i32) (param $n i32) (param $k i32)
    (loop $l
      (if (i32.ne (call $exit (local.get $how) (local.get $k)) (i32.const 7)) (then unreachable))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n))))

  ;; A bulk instruction, charged n/4 units before it runs (no other checkpoint: no loop, no cycle).
  (func (export "fill") (param $n i32)
    (memory.fill (i32.const 0) (i32.const 0) (local.get $n)))
)
