;; A module to link as "peer" that imports peer's memory, its own, and
;; exports it (TestExtismLinkedSharedMemory): a cycle of memory imports,
;; refused at load.
(module
  (import "peer" "memory" (memory 1))
  (export "memory" (memory 0))
  (func (export "run") (result i32) (i32.const 0)))
