;; The "env" module semantics.wat imports from: a function, a global and a table.
(module
  (table (export "table") 8 funcref)
  (global (export "base") i32 (i32.const 7))
  (func (export "add") (param i32 i32) (result i32) (i32.add (local.get 0) (local.get 1))))
