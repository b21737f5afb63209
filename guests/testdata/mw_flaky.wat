;; Session middleware for the load test (host/load_test.go): every middleware
;; hook, misbehaving on a configured share of its calls. One module plays the
;; test's three roles (an observer, a rewriter, the flaky one), so that one
;; compiled module backs them all; its config values (config_get) say which:
;;
;;   fault_percent     decimal 0-100 (absent: 0). A call misbehaves when the
;;                     FNV-1a hash of its input, mod 100, is below it: a hash
;;                     and not a random source, so that the same inputs
;;                     misbehave in every run. (hash / 100) mod 4 says how:
;;                     0 traps (unreachable), 1 spins until the deadline,
;;                     2 answers bytes that are not JSON, 3 answers its whole
;;                     first page (64 KiB), over a MaxOutputBytes below that.
;;   log               present: each call that behaves logs
;;                     "<hook> <n> <input>" at info, n counting this
;;                     instance's calls, and morph_destroy logs "destroy <n> ".
;;   before_tool_call  a JSON document (up to 1 KiB) that before_tool_call
;;                     answers: a rewrite or a denial. Absent: empty output,
;;                     no change.
;;
;; Every other hook answers empty output. Config.Hooks picks a role's hooks.
(module
  (import "morph:host/v1" "log" (func $log (param i32 i32 i32)))
  (import "morph:host/v1" "config_get" (func $config_get (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))

  ;; Memory: 16 the manifest; 512-655 hook names; 656-675 config keys; 1024
  ;; the config value buffer (1 KiB), which ends up holding the rewrite; 3072
  ;; the bad output; 4096-4159 a log line's prefix, written right to left
  ;; before the input; 4160 the input.
  (data (i32.const 16) "{\"name\":\"mw_flaky\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"on_turn_start\",\"before_run\",\"on_action\",\"before_tool_call\",\"after_tool_call\",\"on_observation\",\"on_final\",\"after_run\"]}")
  (data (i32.const 512) "on_turn_start")
  (data (i32.const 528) "before_run")
  (data (i32.const 544) "on_action")
  (data (i32.const 560) "before_tool_call") ;; also the config key of the rewrite
  (data (i32.const 576) "after_tool_call")
  (data (i32.const 592) "on_observation")
  (data (i32.const 608) "on_final")
  (data (i32.const 624) "after_run")
  (data (i32.const 640) "destroy")
  (data (i32.const 656) "fault_percent")
  (data (i32.const 672) "log")
  (data (i32.const 3072) "this is not json")

  (global $ready (mut i32) (i32.const 0))        ;; config read
  (global $percent (mut i32) (i32.const 0))
  (global $logging (mut i32) (i32.const 0))
  (global $rewrite_len (mut i32) (i32.const -1)) ;; -1: no rewrite
  (global $calls (mut i32) (i32.const 0))        ;; this instance's hook calls

  ;; one input at a time: always at 4160, growing memory to fit
  (func (export "morph_alloc") (param $n i32) (result i32)
    (if (i32.gt_u (i32.add (i32.const 4160) (local.get $n)) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.div_u (local.get $n) (i32.const 65536)) (i32.const 1))) (i32.const -1))
        (then (return (i32.const 0))))))
    (i32.const 4160))

  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 177)))

  ;; reads the config once per instance; the rewrite is read last, so that it
  ;; stays in the buffer at 1024
  (func $setup
    (local $n i32) (local $i i32)
    (global.set $ready (i32.const 1))
    (local.set $n (call $config_get (i32.const 656) (i32.const 13) (i32.const 1024) (i32.const 1024)))
    (if (i32.and (i32.gt_s (local.get $n) (i32.const 0)) (i32.le_s (local.get $n) (i32.const 1024)))
      (then (loop $digit
        (global.set $percent (i32.add (i32.mul (global.get $percent) (i32.const 10))
          (i32.sub (i32.load8_u (i32.add (i32.const 1024) (local.get $i))) (i32.const 48))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $digit (i32.lt_u (local.get $i) (local.get $n))))))
    (global.set $logging (i32.ge_s (call $config_get (i32.const 672) (i32.const 3) (i32.const 1024) (i32.const 0)) (i32.const 0)))
    (local.set $n (call $config_get (i32.const 560) (i32.const 16) (i32.const 1024) (i32.const 1024)))
    (if (i32.le_s (local.get $n) (i32.const 1024))
      (then (global.set $rewrite_len (local.get $n)))))

  ;; FNV-1a, 32 bits
  (func $hash (param $p i32) (param $n i32) (result i32)
    (local $h i32) (local $end i32)
    (local.set $h (i32.const 0x811c9dc5))
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (block $done (loop $byte
      (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
      (local.set $h (i32.mul (i32.xor (local.get $h) (i32.load8_u (local.get $p))) (i32.const 16777619)))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (br $byte)))
    (local.get $h))

  ;; logs "<name> <calls> " followed by the n input bytes at p (at 4160, or
  ;; none), writing the prefix right to left into the bytes before the input
  (func $logline (param $name i32) (param $len i32) (param $p i32) (param $n i32)
    (local $q i32) (local $c i32)
    (if (i32.eqz (local.get $n)) (then (local.set $p (i32.const 4160))))
    (local.set $q (i32.sub (local.get $p) (i32.const 1)))
    (i32.store8 (local.get $q) (i32.const 32))
    (local.set $c (global.get $calls))
    (loop $digit
      (local.set $q (i32.sub (local.get $q) (i32.const 1)))
      (i32.store8 (local.get $q) (i32.add (i32.const 48) (i32.rem_u (local.get $c) (i32.const 10))))
      (local.set $c (i32.div_u (local.get $c) (i32.const 10)))
      (br_if $digit (local.get $c)))
    (local.set $q (i32.sub (local.get $q) (i32.const 1)))
    (i32.store8 (local.get $q) (i32.const 32))
    (local.set $q (i32.sub (local.get $q) (local.get $len)))
    (memory.copy (local.get $q) (local.get $name) (local.get $len))
    (call $log (i32.const 0) (local.get $q) (i32.sub (i32.add (local.get $p) (local.get $n)) (local.get $q))))

  ;; what every hook does first: count the call, misbehave if the hash says
  ;; so, log. 0 means the call behaves (empty output so far); otherwise the
  ;; packed bad result to return.
  (func $enter (param $name i32) (param $len i32) (param $p i32) (param $n i32) (result i64)
    (local $h i32)
    (if (i32.eqz (global.get $ready)) (then (call $setup)))
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (local.set $h (call $hash (local.get $p) (local.get $n)))
    (if (i32.lt_u (i32.rem_u (local.get $h) (i32.const 100)) (global.get $percent))
      (then
        (block $big
          (block $bad
            (block $spin
              (block $trap
                (br_table $trap $spin $bad $big
                  (i32.rem_u (i32.div_u (local.get $h) (i32.const 100)) (i32.const 4))))
              unreachable)
            (loop $forever (br $forever)))
          (return (i64.or (i64.shl (i64.const 3072) (i64.const 32)) (i64.const 16))))
        (return (i64.const 65536))))
    (if (global.get $logging)
      (then (call $logline (local.get $name) (local.get $len) (local.get $p) (local.get $n))))
    (i64.const 0))

  (func (export "morph_on_turn_start") (param $p i32) (param $n i32) (result i64)
    (call $enter (i32.const 512) (i32.const 13) (local.get $p) (local.get $n)))
  (func (export "morph_before_run") (param $p i32) (param $n i32) (result i64)
    (call $enter (i32.const 528) (i32.const 10) (local.get $p) (local.get $n)))
  (func (export "morph_on_action") (param $p i32) (param $n i32) (result i64)
    (call $enter (i32.const 544) (i32.const 9) (local.get $p) (local.get $n)))
  (func (export "morph_before_tool_call") (param $p i32) (param $n i32) (result i64)
    (local $r i64)
    (local.set $r (call $enter (i32.const 560) (i32.const 16) (local.get $p) (local.get $n)))
    (if (result i64) (i32.or (i64.ne (local.get $r) (i64.const 0)) (i32.lt_s (global.get $rewrite_len) (i32.const 0)))
      (then (local.get $r))
      (else (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.extend_i32_u (global.get $rewrite_len))))))
  (func (export "morph_after_tool_call") (param $p i32) (param $n i32) (result i64)
    (call $enter (i32.const 576) (i32.const 15) (local.get $p) (local.get $n)))
  (func (export "morph_on_observation") (param $p i32) (param $n i32) (result i64)
    (call $enter (i32.const 592) (i32.const 14) (local.get $p) (local.get $n)))
  (func (export "morph_on_final") (param $p i32) (param $n i32) (result i64)
    (call $enter (i32.const 608) (i32.const 8) (local.get $p) (local.get $n)))
  (func (export "morph_after_run") (param $p i32) (param $n i32) (result i64)
    (call $enter (i32.const 624) (i32.const 9) (local.get $p) (local.get $n)))

  ;; never misbehaves: the host's close must be able to count instances
  (func (export "morph_destroy") (param i32 i32) (result i64)
    (if (i32.eqz (global.get $ready)) (then (call $setup)))
    (if (global.get $logging)
      (then (call $logline (i32.const 640) (i32.const 7) (i32.const 4160) (i32.const 0))))
    (i64.const 0)))
