;; A stateful counting middleware, for session isolation's promise: before_run
;; answers {"system_prompt":"calls: N"}, N counting the instance's before_run
;; calls, so a test sees whether a session's turns ran on one instance of its
;; own (1, 2, 3, ...). morph_instance_replaced (SPEC 10.6) adds 1000 to the
;; count, so the first call on an instance told it replaces a lost one answers
;; "calls: 1001"; morph_destroy logs one line through the host's log function,
;; so a test can count the instances the host released.
(module
  (import "morph:host/v1" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  (global $calls (mut i32) (i32.const 0))
  (func (export "morph_alloc") (param $n i32) (result i32)
    ;; one input at a time: always at 4096, growing memory to fit
    (if (i32.gt_u (i32.add (i32.const 4096) (local.get $n)) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.div_u (local.get $n) (i32.const 65536)) (i32.const 1))) (i32.const -1))
        (then (return (i32.const 0))))))
    (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"mw-counter\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"before_run\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 74)))
  (func (export "morph_instance_replaced") (param i32 i32) (result i64)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1000)))
    (i64.const 0))
  (data (i32.const 512) "mw_counter: instance destroyed")
  (func (export "morph_destroy") (param i32 i32) (result i64)
    (call $log (i32.const 0) (i32.const 512) (i32.const 30))
    (i64.const 0))
  ;; the output: this 25-byte prefix at 1024, the decimal digits, then "}
  (data (i32.const 1024) "{\"system_prompt\":\"calls: ")
  (func (export "morph_before_run") (param i32 i32) (result i64)
    (local $n i32) (local $digits i32) (local $t i32) (local $p i32)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (local.set $n (global.get $calls))
    (local.set $digits (i32.const 1))
    (local.set $t (local.get $n))
    (block $done (loop $count
      (br_if $done (i32.lt_u (local.get $t) (i32.const 10)))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (local.set $digits (i32.add (local.get $digits) (i32.const 1)))
      (br $count)))
    (local.set $p (i32.add (i32.const 1049) (local.get $digits)))
    (i32.store8 (local.get $p) (i32.const 34))                     ;; "
    (i32.store8 (i32.add (local.get $p) (i32.const 1)) (i32.const 125)) ;; }
    (local.set $t (local.get $n))
    (loop $write ;; digits, right to left
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.rem_u (local.get $t) (i32.const 10))))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (br_if $write (i32.ne (local.get $t) (i32.const 0))))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.extend_i32_u (i32.add (i32.const 27) (local.get $digits))))))
