;; An Extism plugin whose initialization sends an HTTP request
;; (TestExtismInitHTTPNoSnapshot): _initialize sends the request that its
;; config value "req" holds (Extism's JSON request, {"url": ...}); run
;; returns 0 without an output.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "config_get" (func $config_get (param i64) (result i64)))
  (import "extism:host/env" "http_request" (func $http_request (param i64 i64) (result i64)))
  (memory (export "memory") 1)
  (func (export "_initialize")
    (local $key i64)
    (local.set $key (call $alloc (i64.const 3)))
    (call $store_u8 (local.get $key) (i32.const 114))                      ;; r
    (call $store_u8 (i64.add (local.get $key) (i64.const 1)) (i32.const 101)) ;; e
    (call $store_u8 (i64.add (local.get $key) (i64.const 2)) (i32.const 113)) ;; q
    (drop (call $http_request (call $config_get (local.get $key)) (i64.const 0))))
  (func (export "run") (result i32) (i32.const 0)))
