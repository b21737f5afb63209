;; An Extism plugin the loader refuses for its imports, each for a reason of
;; its own: a function extism:host/env does not have, an Extism user host
;; function (morph provides none), a morph:host/v1 function (not for Extism
;; plugins), and Extism's http_request with the wrong signature.
(module
  (import "extism:host/env" "alloc" (func (param i64) (result i64)))
  (import "extism:host/env" "no_such_function" (func))
  (import "extism:host/user" "my_function" (func (param i64) (result i64)))
  (import "morph:host/v1" "log" (func (param i32 i32 i32)))
  (import "extism:host/env" "http_request" (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "morph_describe") (result i32) (i32.const 1)))
