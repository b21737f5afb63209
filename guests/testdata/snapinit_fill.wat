;; A guest whose _initialize grows its memory until growth fails (at the
;; plugin's cap, or at its own maximum of 4 MiB, which keeps it quick where
;; it runs without a cap) and writes a byte into every 4 KiB page, so that the image
;; of a snapshot is as large as an image can be: the whole cap, all of it
;; data. build_prompt answers {"system_prompt":"pages N"}, N the count
;; of 64 KiB pages mod 10 (a fresh instance must start with the filled
;; memory), then writes a page of its own.
(module
  (memory (export "memory") 1 64)
  (func (export "morph_abi_v1"))
  (func (export "morph_alloc") (param i32) (result i32) (i32.const 4096))
  (data (i32.const 16) "{\"name\":\"snapinit_fill\",\"version\":\"1\",\"abi_version\":1,\"hooks\":[\"build_prompt\"]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 79)))
  (func (export "_initialize")
    (local $p i32)
    (block $full (loop $grow
      (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
      (br $grow)))
    (local.set $p (i32.const 8192))
    (block $done (loop $fill
      (br_if $done (i32.ge_u (local.get $p) (i32.mul (memory.size) (i32.const 65536))))
      (i32.store8 (local.get $p) (i32.const 1))
      (local.set $p (i32.add (local.get $p) (i32.const 4096)))
      (br $fill))))
  (data (i32.const 1024) "{\"system_prompt\":\"pages 0\"}")
  (func (export "morph_build_prompt") (param i32 i32) (result i64)
    (i32.store8 (i32.const 1048) (i32.add (i32.const 48) (i32.rem_u (memory.size) (i32.const 10))))
    (i32.store8 (i32.const 12288) (i32.const 2))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 27))))
