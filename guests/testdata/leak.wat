;; Writes into its memory and tells whether it found it written: build_prompt
;; answers {"system_prompt":"seen N"}, N = 1 when a word it writes (one in a
;; data page, one in a page no data segment touches, one in a page it grows)
;; was already nonzero, 0 when all three were zero; then writes all three. A
;; fresh instance must answer 0 (the no-leak tests of the isolation modes).
(module
  (memory (export "memory") 2)
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param $n i32) (result i32)
    (if (i32.gt_u (i32.add (i32.const 4096) (local.get $n)) (i32.const 65536))
      (then (return (i32.const 0))))
    (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"leak\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 70)))
  ;; the answer at 1024; its digit at 1047
  (data (i32.const 1024) "{\"system_prompt\":\"seen 0\"}")
  (func (export "morph_build_prompt") (param i32 i32) (result i64)
    (local $seen i64)
    (if (i32.lt_u (memory.size) (i32.const 3))
      (then (drop (memory.grow (i32.const 1)))))
    (local.set $seen (i64.or (i64.load (i32.const 1080))
      (i64.or (i64.load (i32.const 65544)) (i64.load (i32.const 131080)))))
    (i32.store8 (i32.const 1047) (i32.add (i32.const 48) (i64.ne (local.get $seen) (i64.const 0))))
    (i64.store (i32.const 1080) (i64.const 0x5a5a5a5a5a5a5a5a))
    (i64.store (i32.const 65544) (i64.const 0x5a5a5a5a5a5a5a5a))
    (i64.store (i32.const 131080) (i64.const 0x5a5a5a5a5a5a5a5a))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 26))))
