;; A main module importing a table and a global from the linked module
;; "rhs", and a memory from "nolib", which is not linked
;; (TestExtismLinkedSharedMemory): each refused at load, saying why.
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "rhs" "table" (table 1 funcref))
  (import "rhs" "counter" (global i32))
  (import "nolib" "memory" (memory 1))
  (func (export "run") (result i32) (i32.const 0)))
