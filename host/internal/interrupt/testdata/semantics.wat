;; Everything the rewrite renumbers or must keep intact, each observable through an export: imports ahead
;; of the added one (a function, a global and a table), a start function, exported functions and globals, a global
;; initialised with ref.func, two tables filled by element segments in all eight encodings, call_indirect,
;; ref.func, table instructions, recursion, nested loops, loops and blocks with parameters, br_table,
;; bulk memory, SIMD (with two-byte sub-opcodes), sign extension, saturating truncation, typed select.
;; Built with wat2wasm --debug-names, so the name section's function and local names are renumbered too.
(module
  (import "env" "add" (func $host_add (param i32 i32) (result i32)))
  (import "env" "base" (global $base i32))
  (import "env" "table" (table $t 8 funcref)) ;; filled by this module's active segments at instantiation
  (type $bin (func (param i32 i32) (result i32)))
  (type $un (func (param i32) (result i32)))

  (memory (export "memory") 1)
  (data $hello "hello, world")

  (table $t2 8 funcref)
  (elem (i32.const 0) $add $sub)                                               ;; flags 0: active, table 0, indices
  (elem $p1 func $mul $square)                                                 ;; flags 1: passive, indices
  (elem (table $t2) (i32.const 0) func $sub $add)                              ;; flags 2: active, table 1, indices
  (elem declare func $neg)                                                     ;; flags 3: declarative, indices
  (elem (i32.const 2) funcref (ref.func $mul) (ref.null func))                 ;; flags 4: active, table 0, expressions
  (elem $p5 funcref (ref.func $square) (ref.func $neg) (ref.null func))        ;; flags 5: passive, expressions
  (elem (table $t2) (i32.const 2) funcref (ref.func $mul) (ref.null func))     ;; flags 6: active, table 1, expressions
  (elem declare funcref (ref.func $twice) (ref.null func))                     ;; flags 7: declarative, expressions

  (global $started (mut i32) (i32.const 0))
  (global $fref funcref (ref.func $twice))
  (global $wide (export "wide") i64 (i64.const 0x0803)) ;; immediate bytes 0x83 0x10: 0x10 is also call

  (start $init)
  (func $init (global.set $started (i32.add (global.get $base) (i32.const 100))))
  (func (export "started") (result i32) (global.get $started))

  (func $add (type $bin) (i32.add (local.get 0) (local.get 1)))
  (func $sub (type $bin) (i32.sub (local.get 0) (local.get 1)))
  (func $mul (type $bin) (i32.mul (local.get 0) (local.get 1)))
  (func $square (type $un) (i32.mul (local.get 0) (local.get 0)))
  (func $neg (type $un) (i32.sub (i32.const 0) (local.get 0)))
  (func $twice (type $un) (i32.shl (local.get 0) (i32.const 1)))

  (func (export "host") (param $a i32) (param $b i32) (result i32)
    (call $host_add (local.get $a) (local.get $b)))

  (func (export "apply") (param $slot i32) (param $a i32) (param $b i32) (result i32)
    (call_indirect $t (type $bin) (local.get $a) (local.get $b) (local.get $slot)))
  (func (export "apply2") (param $slot i32) (param $a i32) (param $b i32) (result i32)
    (call_indirect $t2 (type $bin) (local.get $a) (local.get $b) (local.get $slot)))

  ;; Copies the passive segments into $t's slots 4 to 7, then calls slot $slot as a unary function.
  (func (export "unary") (param $slot i32) (param $x i32) (result i32)
    (table.init $t $p1 (i32.const 4) (i32.const 0) (i32.const 2))
    (table.init $t $p5 (i32.const 6) (i32.const 0) (i32.const 2))
    (elem.drop $p1)
    (call_indirect $t (type $un) (local.get $x) (local.get $slot)))

  (func (export "via_ref") (param $x i32) (result i32)
    (table.set $t (i32.const 3) (ref.func $neg))
    (call_indirect $t (type $un) (local.get $x) (i32.const 3)))
  (func (export "via_global") (param $x i32) (result i32)
    (table.set $t (i32.const 3) (global.get $fref))
    (call_indirect $t (type $un) (local.get $x) (i32.const 3)))

  ;; table.copy, table.fill, table.grow, table.size, table.get, ref.is_null.
  (func (export "tables") (result i32)
    (table.copy $t2 $t (i32.const 4) (i32.const 0) (i32.const 2))
    (table.fill $t2 (i32.const 6) (ref.func $twice) (i32.const 2))
    (drop (table.grow $t2 (ref.null func) (i32.const 1)))
    (i32.add
      (i32.add
        (i32.mul (table.size $t2) (i32.const 100))
        (call_indirect $t2 (type $un) (i32.const 9) (i32.const 7)))
      (i32.add
        (i32.mul (ref.is_null (table.get $t2 (i32.const 8))) (i32.const 10000))
        (call_indirect $t2 (type $bin) (i32.const 9) (i32.const 4) (i32.const 5)))))

  (func $fact (export "fact") (param $n i64) (result i64)
    (if (result i64) (i64.eqz (local.get $n))
      (then (i64.const 1))
      (else (i64.mul (local.get $n) (call $fact (i64.sub (local.get $n) (i64.const 1)))))))

  (func $fib (export "fib") (param $n i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
      (then (local.get $n))
      (else (i32.add
        (call $fib (i32.sub (local.get $n) (i32.const 1)))
        (call $fib (i32.sub (local.get $n) (i32.const 2)))))))

  ;; The sum over i < n, j < i of i xor j.
  (func $nested (export "nested") (param $n i32) (result i32)
    (local $i i32) (local $j i32) (local $acc i32) (local $unused f64) (local $unused2 v128)
    (block $done
      (loop $outer
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $j (i32.const 0))
        (block $inner_done
          (loop $inner
            (br_if $inner_done (i32.ge_u (local.get $j) (local.get $i)))
            (local.set $acc (i32.add (local.get $acc) (i32.xor (local.get $i) (local.get $j))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $inner)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $outer)))
    (local.get $acc))

  ;; 1 + 2 + ... + n, with the accumulator and the counter as the loop's parameters.
  (func (export "triangle") (param $n i32) (result i32)
    (local $k i32)
    i32.const 0
    local.get $n
    loop $l (param i32 i32) (result i32)
      local.tee $k
      i32.add
      local.get $k
      i32.const 1
      i32.sub
      local.tee $k
      local.get $k
      br_if $l
      drop
    end)

  ;; n * (n + 1) / 2 again, from a loop with a result and no parameters (the loop form of the check, whose
  ;; slow path restarts the iteration), with a value on the operand stack beneath it.
  (func (export "triangle2") (param $n i32) (result i32)
    (local $acc i32)
    i32.const 1000
    loop $l (result i32)
      (local.set $acc (i32.add (local.get $acc) (local.get $n)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n))
      local.get $acc
    end
    i32.sub)

  ;; 10, 20 or 30 as x is 0, 1 or anything else.
  (func (export "classify") (param $x i32) (result i32)
    (block $d (result i32)
      (block $c
        (block $b
          (block $a
            (br_table $a $b $c (local.get $x)))
          (br $d (i32.const 10)))
        (br $d (i32.const 20)))
      (i32.const 30)))

  (func (export "swap") (param i32 i32) (result i32 i32)
    (local.get 1) (local.get 0))

  (func (export "diff") (param i32 i32) (result i32)
    local.get 0
    local.get 1
    block (param i32 i32) (result i32)
      i32.sub
    end)

  ;; memory.init, data.drop, memory.copy, memory.fill: memory[32..40) is "hello!!!".
  (func (export "bulk") (result i32)
    (memory.init $hello (i32.const 16) (i32.const 0) (i32.const 12))
    (data.drop $hello)
    (memory.copy (i32.const 32) (i32.const 16) (i32.const 5))
    (memory.fill (i32.const 37) (i32.const 33) (i32.const 3))
    (i32.load offset=2 (i32.const 32)))

  ;; (x + 3) + 1000 * (x + 1).
  (func (export "simd") (param $x i32) (result i32)
    (v128.store (i32.const 64) (i32x4.add (v128.const i32x4 1 2 3 4) (i32x4.splat (local.get $x))))
    (i32.add
      (i32x4.extract_lane 2
        (i8x16.shuffle 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
          (v128.load (i32.const 64)) (v128.const i32x4 0 0 0 0)))
      (i32.mul (i32.const 1000)
        (i32x4.extract_lane 1
          (v128.load32_lane 1 (i32.const 64) (i32x4.abs (v128.const i32x4 0 0 0 0)))))))

  (func (export "misc") (param $x i32) (result i32)
    (i32.add
      (i32.extend8_s (local.get $x))
      (select (result i32)
        (i32.trunc_sat_f32_s (f32.const 1e10))
        (i32.const 0)
        (ref.is_null (ref.null func)))))
)
