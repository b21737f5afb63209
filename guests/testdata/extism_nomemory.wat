;; An Extism plugin without a memory (js-sdk's loop-forever.wasm, plain
;; exports): wazero answers Memory() for it with a typed nil, on which
;; issue 28's loader panicked while instantiating and Load hung.
;;   answer returns 0 without an output;
;;   loop never ends.
(module
  (func (export "answer") (result i32) (i32.const 0))
  (func (export "loop") (result i32)
    (loop $forever (br $forever))
    (i32.const 0)))
