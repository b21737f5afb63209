;; snapinit.wat as an Extism plugin (TestSnapshot, both loaders): its
;; _initialize logs "initializing", counts the runs in $inits, sets $g64 and
;; $f, grows its memory by a page, writes a marker there, and sets the var
;; "v" to "I" (a var is the kernel's, in Go: the snapshot must carry it
;; beside the image). build_prompt answers
;; {"system_prompt":"i1 kY s0 vI"}: snapinit's "i1 kY s0", then v and the
;; var's first byte ("-" when unset); then it writes over all of them, the
;; var to "C". A fresh instance must answer "i1 kY s0 vI".
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "load_u8" (func $load_u8 (param i64) (result i32)))
  (import "extism:host/env" "var_get" (func $var_get (param i64) (result i64)))
  (import "extism:host/env" "var_set" (func $var_set (param i64 i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "log_info" (func $log_info (param i64)))
  (memory (export "memory") 1)
  (global $inits (mut i32) (i32.const 0))
  (global $g64 (mut i64) (i64.const 0))
  (global $f (mut f64) (f64.const 0))
  (data (i32.const 16) "{\"name\":\"snapinit\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"]}")
  (data (i32.const 512) "initializing")
  ;; the var's key "v" and its values "I" (init) and "C" (a call)
  (data (i32.const 600) "vIC")
  ;; the answer at 1024: "i" at 1042, its digit 1043, k 1045, marker 1046, seen digit 1049, var 1052
  (data (i32.const 1024) "{\"system_prompt\":\"i0 xx s0 v-\"}")
  ;; $block copies [ptr, ptr+len) of this memory to a new kernel block.
  (func $block (param $ptr i32) (param $len i32) (result i64)
    (local $k i64) (local $i i32)
    (local.set $k (call $alloc (i64.extend_i32_u (local.get $len))))
    (block $done (loop $copy
      (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
      (call $store_u8 (i64.add (local.get $k) (i64.extend_i32_u (local.get $i)))
        (i32.load8_u (i32.add (local.get $ptr) (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $copy)))
    (local.get $k))
  (func $out (param $ptr i32) (param $len i32)
    (call $output_set (call $block (local.get $ptr) (local.get $len)) (i64.extend_i32_u (local.get $len))))
  (func (export "morph_describe") (result i32)
    (call $out (i32.const 16) (i32.const 74))
    (i32.const 0))
  (func (export "_initialize")
    (call $log_info (call $block (i32.const 512) (i32.const 12)))
    (global.set $inits (i32.add (global.get $inits) (i32.const 1)))
    (global.set $g64 (i64.const 0x1122334455667788))
    (global.set $f (f64.const 2.5))
    (drop (memory.grow (i32.const 1)))
    (i32.store8 (i32.const 70000) (i32.const 89)) ;; Y
    (call $var_set (call $block (i32.const 600) (i32.const 1)) (call $block (i32.const 601) (i32.const 1))))
  (func (export "morph_build_prompt") (result i32)
    (local $v i64)
    (i32.store8 (i32.const 1043) (i32.add (i32.const 48) (global.get $inits)))
    (i32.store8 (i32.const 1045) (select (i32.const 107) (i32.const 120)
      (i32.and (i64.eq (global.get $g64) (i64.const 0x1122334455667788)) (f64.eq (global.get $f) (f64.const 2.5)))))
    (i32.store8 (i32.const 1046) (i32.load8_u (i32.const 70000)))
    (i32.store8 (i32.const 1049) (i32.add (i32.const 48) (i64.ne (i64.load (i32.const 70008)) (i64.const 0))))
    (local.set $v (call $var_get (call $block (i32.const 600) (i32.const 1))))
    (if (i64.ne (local.get $v) (i64.const 0))
      (then (i32.store8 (i32.const 1052) (call $load_u8 (local.get $v))))
      (else (i32.store8 (i32.const 1052) (i32.const 45))))
    (i64.store (i32.const 70008) (i64.const 0x5a5a5a5a5a5a5a5a))
    (i32.store8 (i32.const 70000) (i32.const 90)) ;; Z
    (global.set $inits (i32.const 7))
    (global.set $g64 (i64.const 0))
    (call $var_set (call $block (i32.const 600) (i32.const 1)) (call $block (i32.const 602) (i32.const 1)))
    (call $out (i32.const 1024) (i32.const 31))
    (i32.const 0)))
