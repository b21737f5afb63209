;; Initializes itself in _initialize, as a guest runtime does, so that the
;; host's snapshots have something to keep: it logs "initializing", counts
;; the runs in $inits, sets $g64 and $f, grows its memory by a page and
;; writes a marker there. build_prompt answers
;; {"system_prompt":"i1 kY s0"}: the instance's $inits (1: initialized
;; once, by itself or in the image), k when $g64 and $f hold what
;; _initialize set (x if not), the marker (Y, or what is at its place), and
;; s1 when the word next to the marker was already written, s0 when not;
;; then it writes that word and overwrites the marker. A fresh instance must
;; answer "i1 kY s0", whichever instance the image was taken of and
;; whatever that one wrote since.
(module
  (import "morph:host/v1" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (global $inits (mut i32) (i32.const 0))
  (global $g64 (mut i64) (i64.const 0))
  (global $f (mut f64) (f64.const 0))
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param $n i32) (result i32)
    (if (i32.gt_u (i32.add (i32.const 4096) (local.get $n)) (i32.const 65536))
      (then (return (i32.const 0))))
    (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"snapinit\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 74)))
  (data (i32.const 512) "initializing")
  (func (export "_initialize")
    (call $log (i32.const 0) (i32.const 512) (i32.const 12))
    (global.set $inits (i32.add (global.get $inits) (i32.const 1)))
    (global.set $g64 (i64.const 0x1122334455667788))
    (global.set $f (f64.const 2.5))
    (drop (memory.grow (i32.const 1)))
    (i32.store8 (i32.const 70000) (i32.const 89))) ;; Y
  ;; the answer at 1024: "i" at 1042, its digit 1043, k 1045, marker 1046, seen digit 1049
  (data (i32.const 1024) "{\"system_prompt\":\"i0 xx s0\"}")
  (func (export "morph_build_prompt") (param i32 i32) (result i64)
    (i32.store8 (i32.const 1043) (i32.add (i32.const 48) (global.get $inits)))
    (i32.store8 (i32.const 1045) (select (i32.const 107) (i32.const 120)
      (i32.and (i64.eq (global.get $g64) (i64.const 0x1122334455667788)) (f64.eq (global.get $f) (f64.const 2.5)))))
    (i32.store8 (i32.const 1046) (i32.load8_u (i32.const 70000)))
    (i32.store8 (i32.const 1049) (i32.add (i32.const 48) (i64.ne (i64.load (i32.const 70008)) (i64.const 0))))
    (i64.store (i32.const 70008) (i64.const 0x5a5a5a5a5a5a5a5a))
    (i32.store8 (i32.const 70000) (i32.const 90)) ;; Z
    (global.set $inits (i32.const 7))
    (global.set $g64 (i64.const 0))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 28))))
