package interrupt

import "slices"

// The code walker: it decodes every instruction of every function body (and of every constant expression)
// to find the loop headers and the function indices, and copies the rest byte for byte. Decoding all of
// them, immediates included, is what makes it safe: an immediate byte that happens to equal the loop or
// call opcode is never mistaken for one, and an opcode it does not know stops it.

// Opcodes the walker acts on or emits.
const (
	opIf            = 0x04
	opLoop          = 0x03
	opEnd           = 0x0B
	opCall          = 0x10
	opReturnCall    = 0x12 // tail calls
	opReturnCallRef = 0x15 // typed function references: the last call opcode
	opGlobalGet     = 0x23
	opGlobalSet     = 0x24
	opI32Const      = 0x41
	opI32Eqz        = 0x45
	opI32Sub        = 0x6B
	opRefFunc       = 0xD2
	blockEmpty      = 0x40
)

// rewriter holds what the second pass writes into the module.
type rewriter struct {
	funcImports uint32 // the added import's index: function indices from here on shift by one
	funcs       uint64 // functions before instrumentation, at most MaxUint32: every function index must be below
	checkType   uint32 // index of the added type () -> ()
	period      uint32
	check       []byte // the sequence injected at every checkpoint
	body        []byte // scratch for one function body, reused

	graph *callGraph // set during the analysis pass, which records calls instead of keeping the output
	cur   uint32     // the defined function being walked in the code section
	entry []bool     // by defined function: needs a check at its entry (from the analysis; nil: every caller)
	// checkIndirect: every indirect call gets a check before it (from the
	// analysis; with no analysis, the entry checks of every caller cover them).
	checkIndirect bool
}

func newRewriter(funcImports uint32, funcs uint64, global, checkType, period uint32) *rewriter {
	return &rewriter{funcImports: funcImports, funcs: funcs, checkType: checkType, period: period,
		check: checkSequence(global, funcImports, period)}
}

// checkSequence is the code injected at a checkpoint, with the counter global c and the import f:
//
//	global.get c  i32.const 1  i32.sub  global.set c
//	global.get c  i32.eqz  if  i32.const period  global.set c  call f  end
//
// Decrementing first makes every period-th checkpoint call f. The sequence leaves the operand stack as it
// found it and uses no local, so it is valid at a function's start and at a loop's start whatever the loop
// parameters beneath.
func checkSequence(c, f, period uint32) []byte {
	b := appendU32([]byte{opGlobalGet}, c)
	b = append(b, opI32Const, 1, opI32Sub, opGlobalSet)
	b = appendU32(b, c)
	b = appendU32(append(b, opGlobalGet), c)
	b = append(b, opI32Eqz, opIf, blockEmpty, opI32Const)
	b = appendU32(append(appendS32(b, int32(period)), opGlobalSet), c) // period above MaxInt32 wraps: c is used as unsigned
	b = appendU32(append(b, opCall), f)
	return append(b, opEnd)
}

// funcIdx copies a function index, renumbered: the added import takes index funcImports.
func (w *rewriter) funcIdx(r *reader, out []byte) ([]byte, error) {
	start := r.pos
	idx, err := r.u32()
	if err != nil {
		return nil, err
	}
	if uint64(idx) >= w.funcs {
		return nil, r.malformed(start, "function index %d out of range (%d functions)", idx, w.funcs)
	}
	if idx >= w.funcImports {
		idx++ // idx < funcs <= MaxUint32: no overflow
	}
	return appendU32(out, idx), nil
}

// codeSection rewrites every function body: the check after the locals, another at the start of every
// loop, function indices renumbered. Body sizes change, so they are re-encoded.
func (w *rewriter) codeSection(r *reader) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(make([]byte, 0, r.remaining()+r.remaining()/4), n)
	for i := uint32(0); i < n; i++ {
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		body, err := r.sub(size)
		if err != nil {
			return nil, err
		}
		w.cur = i
		if w.body, err = w.function(&body, w.body[:0]); err != nil {
			return nil, err
		}
		out = append(appendU32(out, uint32(len(w.body))), w.body...)
	}
	return out, r.expectEnd()
}

// function rewrites one body: the locals, then the instructions up to the end of the body.
func (w *rewriter) function(r *reader, out []byte) ([]byte, error) {
	mark := r.pos
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	for i := uint32(0); i < n; i++ {
		if _, err := r.u32(); err != nil {
			return nil, err
		}
		if err := r.valType(); err != nil {
			return nil, err
		}
	}
	out = append(out, r.buf[mark:r.pos]...)
	entry, calls := len(out), false
	for r.remaining() > 0 {
		var op byte
		if out, op, err = w.instr(r, out, true); err != nil {
			return nil, err
		}
		calls = calls || isCall(op)
	}
	// Without the analysis (the pass that makes it), a function that calls
	// nothing needs no entry check: with its loops checked, it ends in a
	// bounded number of steps.
	if w.entry != nil && int(w.cur) < len(w.entry) && w.entry[w.cur] || w.entry == nil && calls {
		out = slices.Insert(out, entry, w.check...)
	}
	return out, nil
}

// isCall tells the opcodes that enter another function: call,
// call_indirect, return_call, return_call_indirect, call_ref, return_call_ref.
func isCall(op byte) bool { return op >= opCall && op <= opReturnCallRef }

// isIndirect tells the calls whose target is a value: call_indirect,
// return_call_indirect, call_ref, return_call_ref.
func isIndirect(op byte) bool { return isCall(op) && op != opCall && op != opReturnCall }

// constExpr rewrites a constant expression (global and table initialisers, element offsets and items): the
// same instructions, with no checkpoint, up to the first end (a constant expression has no block).
func (w *rewriter) constExpr(r *reader, out []byte) ([]byte, error) {
	for {
		var op byte
		var err error
		if out, op, err = w.instr(r, out, false); err != nil {
			return nil, err
		}
		if op == opEnd {
			return out, nil
		}
	}
}

// instr copies one instruction to out, renumbering a function index, and after a loop's block type
// appends the check if checkpoints is set. It returns the opcode.
func (w *rewriter) instr(r *reader, out []byte, checkpoints bool) ([]byte, byte, error) {
	start := r.pos
	op, err := r.readByte()
	if err != nil {
		return nil, 0, err
	}
	switch op {
	case opCall, opReturnCall, opRefFunc:
		if w.graph != nil {
			peek := *r
			idx, _ := peek.u32() // funcIdx reports a bad one
			w.graph.note(op, w.cur, idx)
		}
		out, err = w.funcIdx(r, append(out, op))
		return out, op, err
	case opLoop:
		if err := r.blockType(); err != nil {
			return nil, 0, err
		}
		out = append(out, r.buf[start:r.pos]...)
		if checkpoints {
			out = append(out, w.check...)
		}
		return out, op, nil
	}
	if err := r.immediates(op, start); err != nil {
		return nil, 0, err
	}
	if isIndirect(op) {
		if w.graph != nil {
			w.graph.note(op, w.cur, 0)
		}
		if checkpoints && w.checkIndirect { // the sequence is stack-neutral: valid before the call's operands are taken
			out = append(out, w.check...)
		}
	}
	return append(out, r.buf[start:r.pos]...), op, nil
}

// blockType skips a block type: 0x40 (empty), a value type, or an s33 type index. wazero reads it as one
// s33, and so does this, so that a (ref null ht) or (ref ht) type is followed by its heap type whichever
// way the prefix is encoded.
func (r *reader) blockType() error {
	v, err := r.s33()
	if err != nil {
		return err
	}
	if v == refNullPrefix-0x80 || v == refPrefix-0x80 { // the prefixes as s33: -29 and -28
		return r.skipLEB(5)
	}
	return nil
}

// memarg skips a memory argument: alignment and offset.
func (r *reader) memarg() error {
	if _, err := r.u32(); err != nil {
		return err
	}
	_, err := r.u32()
	return err
}

// u32s skips n u32 immediates.
func (r *reader) u32s(n int) error {
	for i := 0; i < n; i++ {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}

// immediates skips the immediates of op, other than the loop and the function-index opcodes (see instr).
// start is the opcode's offset, for errors.
func (r *reader) immediates(op byte, start int) error {
	switch {
	case op >= 0x45 && op <= 0xC4: // numeric, sign extension
		return nil
	case op >= 0x28 && op <= 0x3E: // loads and stores
		return r.memarg()
	case op >= 0x20 && op <= 0x26: // local.get/set/tee, global.get/set, table.get/set
		return r.u32s(1)
	}
	switch op {
	case 0x00, 0x01, 0x05, 0x0A, 0x0B, 0x0F, 0x1A, 0x1B, 0xD1, 0xD4:
		// unreachable nop else throw_ref end return drop select ref.is_null ref.as_non_null
		return nil
	case 0x02, opIf: // block if
		return r.blockType()
	case 0x08, 0x0C, 0x0D, 0x14, 0x15, 0xD5, 0xD6:
		// throw tag, br label, br_if label, call_ref type, return_call_ref type, br_on_null, br_on_non_null
		return r.u32s(1)
	case 0x11, 0x13: // call_indirect, return_call_indirect: type, table
		return r.u32s(2)
	case 0x3F, 0x40: // memory.size, memory.grow: memory index (a 0x00 byte)
		return r.u32s(1)
	case 0x0E: // br_table: vec(label), default label
		n, err := r.u32()
		if err != nil {
			return err
		}
		for i := uint32(0); i <= n; i++ {
			if _, err := r.u32(); err != nil {
				return err
			}
		}
		return nil
	case 0x1C: // select t*
		return r.valTypes()
	case 0x1F: // try_table: block type, vec(catch)
		return r.tryTable()
	case opI32Const:
		return r.skipLEB(5)
	case 0x42: // i64.const
		return r.skipLEB(10)
	case 0x43: // f32.const
		return r.skip(4)
	case 0x44: // f64.const
		return r.skip(8)
	case 0xD0: // ref.null: heap type
		return r.skipLEB(5)
	case 0xFC:
		return r.misc(start)
	case 0xFD:
		return r.simd(start)
	case 0xFE:
		return r.atomic(start)
	}
	return r.malformed(start, "unknown opcode %#x", op)
}

// tryTable skips try_table's immediates: a block type and catch clauses, each a kind (0 catch, 1 catch_ref:
// tag and label; 2 catch_all, 3 catch_all_ref: label).
func (r *reader) tryTable() error {
	if err := r.blockType(); err != nil {
		return err
	}
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		at := r.pos
		kind, err := r.readByte()
		if err != nil {
			return err
		}
		switch kind {
		case 0, 1:
			err = r.u32s(2)
		case 2, 3:
			err = r.u32s(1)
		default:
			return r.malformed(at, "unknown catch clause kind %#x", kind)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// miscU32s is the number of u32 immediates of each 0xFC instruction: 0-7 the saturating truncations,
// 8 memory.init (data, memory), 9 data.drop, 10 memory.copy (memory, memory), 11 memory.fill, 12 table.init
// (element, table), 13 elem.drop, 14 table.copy (table, table), 15 table.grow, 16 table.size, 17 table.fill.
var miscU32s = [...]int{0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 2, 1, 2, 1, 2, 1, 1, 1}

func (r *reader) misc(start int) error {
	op, err := r.u32()
	if err != nil {
		return err
	}
	if op >= uint32(len(miscU32s)) {
		return r.malformed(start, "unknown opcode 0xfc %d", op)
	}
	return r.u32s(miscU32s[op])
}

// simd skips the immediates of a 0xFD instruction (fixed-width SIMD).
func (r *reader) simd(start int) error {
	op, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case op <= 0x0B || op == 0x5C || op == 0x5D: // v128.load*, v128.store, v128.load32/64_zero
		return r.memarg()
	case op == 0x0C || op == 0x0D: // v128.const, i8x16.shuffle
		return r.skip(16)
	case op >= 0x15 && op <= 0x22: // extract_lane, replace_lane: lane index
		return r.skip(1)
	case op >= 0x54 && op <= 0x5B: // v128.load/store*_lane: memarg, lane index
		if err := r.memarg(); err != nil {
			return err
		}
		return r.skip(1)
	case op > 0xFF:
		return r.malformed(start, "unknown opcode 0xfd %d", op)
	}
	switch op { // the opcodes the SIMD proposal left unassigned
	case 0x9A, 0xA2, 0xA5, 0xA6, 0xAF, 0xB0, 0xB2, 0xB3, 0xB4, 0xBB, 0xC2, 0xC5, 0xC6, 0xCF, 0xD0, 0xD2, 0xD3, 0xD4, 0xE2, 0xEE:
		return r.malformed(start, "unknown opcode 0xfd %d", op)
	}
	return nil
}

// atomic skips the immediates of a 0xFE instruction (threads): a memarg, except atomic.fence's 0x00 byte.
func (r *reader) atomic(start int) error {
	op, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case op == 0x03:
		return r.skip(1)
	case op <= 0x02 || (op >= 0x10 && op <= 0x4E):
		return r.memarg()
	}
	return r.malformed(start, "unknown opcode 0xfe %d", op)
}
