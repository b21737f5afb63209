;; A linked module that recurses through its own proxy
;; (TestExtismLinkedRecursion): loaded as "lib" beside extism_stackmain, it
;; imports lib.recurse, its own export. recurse(n) calls recurse(n-1) through
;; the proxy and traps (unreachable) unless it answers n-1: a call whose
;; state a re-entered call corrupted fails instead of answering wrong.
(module
  (import "lib" "recurse" (func $proxied (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "recurse") (param $n i32) (result i32)
    (local $r i32)
    (if (i32.eqz (local.get $n)) (then (return (i32.const 0))))
    (local.set $r (call $proxied (i32.sub (local.get $n) (i32.const 1))))
    (if (i32.ne (local.get $r) (i32.sub (local.get $n) (i32.const 1))) (then unreachable))
    (i32.add (local.get $r) (i32.const 1))))
