;; A module with no import section at all, made an Extism plugin by its
;; configuration ([[plugins.tools]]): issue 28's loader wrote an import
;; section before such a module's header ("no \0asm magic").
;;   answer returns 0 without an output;
;;   refuse returns 3 without an error message.
(module
  (memory (export "memory") 1)
  (func (export "answer") (result i32) (i32.const 0))
  (func (export "refuse") (result i32) (i32.const 3)))
