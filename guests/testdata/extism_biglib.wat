;; A module to link that declares 40 pages (2.5 MiB) of memory
;; (TestExtismLinkedMemory); recurse as extism_stacklib's.
(module
  (memory (export "memory") 40)
  (func $recurse (export "recurse") (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 0))
      (else (i32.add (call $recurse (i32.sub (local.get $n) (i32.const 1))) (i32.const 1))))))
