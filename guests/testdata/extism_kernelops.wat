;; Replays a script of extism:host/env calls from its input and outputs
;; their results, to run the same script through go-sdk's kernel and
;; morph's (host/internal/extism TestKernelMatchesGoSDK).
;;
;; The input is records of 24 bytes: op (u8, an index into the table in
;; run), refA and refB (u8: the index of an earlier record whose result
;; is added to the argument, 255 for none), 5 bytes of padding, then the
;; arguments a and b (u64, little-endian). At most 255 records are run;
;; the output is each record's result (u64, 0 for calls with none).
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "free" (func $free (param i64)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "length_unsafe" (func $length_unsafe (param i64) (result i64)))
  (import "extism:host/env" "load_u8" (func $load_u8 (param i64) (result i32)))
  (import "extism:host/env" "load_u64" (func $load_u64 (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "input_load_u64" (func $input_load_u64 (param i64) (result i64)))
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_offset" (func $input_offset (result i64)))
  (import "extism:host/env" "input_set" (func $input_set (param i64 i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "output_length" (func $output_length (result i64)))
  (import "extism:host/env" "output_offset" (func $output_offset (result i64)))
  (import "extism:host/env" "error_set" (func $error_set (param i64)))
  (import "extism:host/env" "error_get" (func $error_get (result i64)))
  (import "extism:host/env" "memory_bytes" (func $memory_bytes (result i64)))
  (import "extism:host/env" "reset" (func $reset))
  (import "extism:host/env" "config_get" (func $config_get (param i64) (result i64)))
  (import "extism:host/env" "var_get" (func $var_get (param i64) (result i64)))
  (import "extism:host/env" "var_set" (func $var_set (param i64 i64)))
  (memory (export "memory") 1)
  ;; The script is copied to 0 (at most 255 * 24 bytes), the results go
  ;; at 8192.
  (func $ref (param $i i32) (result i64)
    (if (result i64) (i32.eq (local.get $i) (i32.const 255))
      (then (i64.const 0))
      (else (i64.load offset=8192 (i32.shl (local.get $i) (i32.const 3))))))
  (func (export "run") (result i32)
    (local $n i64) (local $i i64) (local $steps i32) (local $s i32) (local $rec i32)
    (local $a i64) (local $b i64) (local $r i64) (local $out i64)
    (local.set $n (call $input_length))
    (if (i64.gt_u (local.get $n) (i64.const 6120)) (then (local.set $n (i64.const 6120))))
    (block $copied (loop $copy
      (br_if $copied (i64.ge_u (local.get $i) (local.get $n)))
      (i32.store8 (i32.wrap_i64 (local.get $i)) (call $input_load_u8 (local.get $i)))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $copy)))
    (local.set $steps (i32.wrap_i64 (i64.div_u (local.get $n) (i64.const 24))))
    (block $end (loop $step
      (br_if $end (i32.ge_u (local.get $s) (local.get $steps)))
      (local.set $rec (i32.mul (local.get $s) (i32.const 24)))
      (local.set $a (i64.add (i64.load offset=8 (local.get $rec)) (call $ref (i32.load8_u offset=1 (local.get $rec)))))
      (local.set $b (i64.add (i64.load offset=16 (local.get $rec)) (call $ref (i32.load8_u offset=2 (local.get $rec)))))
      (local.set $r (i64.const 0))
      (block $next
      (block $op22
      (block $op21
      (block $op20
      (block $op19
      (block $op18
      (block $op17
      (block $op16
      (block $op15
      (block $op14
      (block $op13
      (block $op12
      (block $op11
      (block $op10
      (block $op9
      (block $op8
      (block $op7
      (block $op6
      (block $op5
      (block $op4
      (block $op3
      (block $op2
      (block $op1
      (block $op0
        (br_table $op0 $op1 $op2 $op3 $op4 $op5 $op6 $op7 $op8 $op9 $op10 $op11 $op12 $op13 $op14 $op15 $op16 $op17 $op18 $op19 $op20 $op21 $op22 $next (i32.load8_u (local.get $rec))))
        (local.set $r (call $alloc (local.get $a))) (br $next))
        (call $free (local.get $a)) (br $next))
        (local.set $r (call $length (local.get $a))) (br $next))
        (local.set $r (call $length_unsafe (local.get $a))) (br $next))
        (local.set $r (i64.extend_i32_u (call $load_u8 (local.get $a)))) (br $next))
        (local.set $r (call $load_u64 (local.get $a))) (br $next))
        (call $store_u8 (local.get $a) (i32.wrap_i64 (local.get $b))) (br $next))
        (call $store_u64 (local.get $a) (local.get $b)) (br $next))
        (local.set $r (i64.extend_i32_u (call $input_load_u8 (local.get $a)))) (br $next))
        (local.set $r (call $input_load_u64 (local.get $a))) (br $next))
        (local.set $r (call $input_length)) (br $next))
        (local.set $r (call $input_offset)) (br $next))
        (call $input_set (local.get $a) (local.get $b)) (br $next))
        (call $output_set (local.get $a) (local.get $b)) (br $next))
        (local.set $r (call $output_length)) (br $next))
        (local.set $r (call $output_offset)) (br $next))
        (call $error_set (local.get $a)) (br $next))
        (local.set $r (call $error_get)) (br $next))
        (local.set $r (call $memory_bytes)) (br $next))
        (call $reset) (br $next))
        (local.set $r (call $config_get (local.get $a))) (br $next))
        (local.set $r (call $var_get (local.get $a))) (br $next))
        (call $var_set (local.get $a) (local.get $b)) (br $next))
      (i64.store offset=8192 (i32.shl (local.get $s) (i32.const 3)) (local.get $r))
      (local.set $s (i32.add (local.get $s) (i32.const 1)))
      (br $step)))
    (local.set $out (call $alloc (i64.extend_i32_u (i32.shl (local.get $steps) (i32.const 3)))))
    (local.set $s (i32.const 0))
    (block $written (loop $write
      (br_if $written (i32.ge_u (local.get $s) (local.get $steps)))
      (call $store_u64 (i64.add (local.get $out) (i64.extend_i32_u (i32.shl (local.get $s) (i32.const 3))))
        (i64.load offset=8192 (i32.shl (local.get $s) (i32.const 3))))
      (local.set $s (i32.add (local.get $s) (i32.const 1)))
      (br $write)))
    (call $output_set (local.get $out) (i64.extend_i32_u (i32.shl (local.get $steps) (i32.const 3))))
    (i32.const 0)))
