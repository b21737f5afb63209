;; An Extism tool plugin in WAT (the describe/call convention, no morph
;; exports) that imports extism:host/env http_request (never called): the
;; fixture of `morph plugin inspect` showing an Extism module's HTTP
;; capability, and of the text a failing tool sends the model. Its tools:
;;   fail:  answers isError with the text "division by zero";
;;   crash: traps (unreachable) inside the module's function $deep_inside.
;; call tells them apart by the first letter of the tool's name, byte 41 of
;; {"method":"tools/call","params":{"name":"...
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "http_request" (func $http (param i64 i64) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"tools\":[{\"name\":\"fail\",\"description\":\"fails\",\"inputSchema\":{\"type\":\"object\"}},{\"name\":\"crash\",\"description\":\"traps\",\"inputSchema\":{\"type\":\"object\"}}]}")
  (data (i32.const 512) "{\"isError\":true,\"content\":[{\"type\":\"text\",\"text\":\"division by zero\"}]}")
  ;; $out sets [ptr, ptr+len) of this memory as the output.
  (func $out (param $ptr i32) (param $len i32)
    (local $k i64) (local $i i32)
    (local.set $k (call $alloc (i64.extend_i32_u (local.get $len))))
    (block $done (loop $copy
      (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
      (call $store_u8 (i64.add (local.get $k) (i64.extend_i32_u (local.get $i)))
        (i32.load8_u (i32.add (local.get $ptr) (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $copy)))
    (call $output_set (local.get $k) (i64.extend_i32_u (local.get $len))))
  (func $deep_inside unreachable)
  (func (export "describe") (result i32)
    (call $out (i32.const 0) (i32.const 152))
    (i32.const 0))
  (func (export "call") (result i32)
    (if (i32.eq (call $input_load_u8 (i64.const 41)) (i32.const 99)) ;; 'c'
      (then (call $deep_inside)))
    (call $out (i32.const 512) (i32.const 70))
    (i32.const 0)))
