;; Threads (wat2wasm --enable-threads): atomic memargs and atomic.fence's reserved byte.
(module
  (memory 1 1 shared)
  (func (export "atomics") (param $n i32) (result i32)
    (local $i i32)
    (loop $l
      (drop (i32.atomic.rmw.add (i32.const 0) (i32.const 2)))
      (atomic.fence)
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (local.get $n))))
    (i32.add (i32.atomic.load (i32.const 0)) (memory.atomic.notify (i32.const 0) (i32.const 1)))))
