package interrupt

import (
	"math"
	"slices"
)

// The code walker: it decodes every instruction of every function body (and of every constant expression)
// to find the loop headers and the function indices, and copies the rest byte for byte. Decoding all of
// them, immediates included, is what makes it safe: an immediate byte that happens to equal the loop or
// call opcode is never mistaken for one, and an opcode it does not know stops it.

// Opcodes the walker acts on or emits.
const (
	opBlock              = 0x02
	opLoop               = 0x03
	opIf                 = 0x04
	opThrow              = 0x08
	opThrowRef           = 0x0A
	opEnd                = 0x0B
	opBr                 = 0x0C
	opBrIf               = 0x0D
	opBrTable            = 0x0E
	opReturn             = 0x0F
	opCall               = 0x10
	opCallIndirect       = 0x11
	opReturnCall         = 0x12 // tail calls
	opReturnCallIndirect = 0x13
	opCallRef            = 0x14 // typed function references
	opReturnCallRef      = 0x15 // the last call opcode
	opTryTable           = 0x1F
	opLocalGet           = 0x20
	opLocalSet           = 0x21
	opLocalTee           = 0x22
	opGlobalGet          = 0x23
	opGlobalSet          = 0x24
	opI32Const           = 0x41
	opI32Eqz             = 0x45
	opI32Sub             = 0x6B
	opRefFunc            = 0xD2
	opBrOnNull           = 0xD5
	opBrOnNonNull        = 0xD6
	blockEmpty           = 0x40
	typeI32              = 0x7F
)

// rewriter holds what the second pass writes into the module.
type rewriter struct {
	funcImports uint32 // the added import's index: function indices from here on shift by one
	funcs       uint64 // functions before instrumentation, at most MaxUint32: every function index must be below
	checkType   uint32 // index of the added type () -> ()
	global      uint32 // the counter's index
	period      uint32
	check       []byte // the sequence injected at every checkpoint of a function that does not cache the counter
	body        []byte // scratch for one function body, reused

	graph *callGraph // set during the analysis pass, which records calls instead of keeping the output
	cur   uint32     // the defined function being walked in the code section
	entry []bool     // by defined function: needs a check at its entry (from the analysis; nil: every caller)
	// checkIndirect: every indirect call gets a check before it (from the
	// analysis; with no analysis, the entry checks of every caller cover them).
	checkIndirect bool
	cache         []bool   // by defined function: keeps the counter in a local (from the analysis; see cached)
	reach         []bool   // by defined function: may run a checkpoint, so a caller that caches the counter saves it first
	params        []uint32 // by defined function: its parameter count, where its locals start
	typeParams    []uint32 // by type index: the parameter count, which a loop's block type may have
	fn            cached   // the function being rewritten
}

// cached is how the function being rewritten reaches the counter. One that
// has checkpoints keeps the counter in a local of its own (a register once
// compiled), loaded at its entry and after calls, saved before calls and
// wherever it leaves: decrementing a global at every loop header made each
// iteration wait on the previous one's store, which doubled the time of a
// JSON parser's byte loops. The others use the global directly, or not at all.
type cached struct {
	on                       bool
	check, loop, load, store []byte // the checkpoints (see loopSequence), global to local, local to global
	depth                    int    // blocks open around the instruction: a branch to label depth leaves the function
}

func newRewriter(funcImports uint32, funcs uint64, global, checkType, period uint32) *rewriter {
	return &rewriter{funcImports: funcImports, funcs: funcs, checkType: checkType, global: global, period: period,
		check: checkSequence(opGlobalGet, opGlobalSet, global, funcImports, period)}
}

// checkSequence is the code injected at a checkpoint, with the counter c
// (get and set are global.get and global.set, or local.get and local.set)
// and the import f:
//
//	get c  i32.const 1  i32.sub  set c
//	get c  i32.eqz  if  i32.const period  set c  call f  end
//
// Decrementing first makes every period-th checkpoint call f. The sequence leaves the operand stack as it
// found it, so it is valid at a function's start and at a loop's start whatever the loop parameters beneath.
func checkSequence(get, set byte, c, f, period uint32) []byte {
	b := appendU32([]byte{get}, c)
	b = append(b, opI32Const, 1, opI32Sub, set)
	b = appendU32(b, c)
	b = appendU32(append(b, get), c)
	b = append(b, opI32Eqz, opIf, blockEmpty, opI32Const)
	b = appendU32(append(appendS32(b, int32(period)), set), c) // period above MaxInt32 wraps: c is used as unsigned
	b = appendU32(append(b, opCall), f)
	return append(b, opEnd)
}

// loopSequence is the checkpoint at the header of a loop without parameters
// in a function that caches the counter in the local c:
//
//	block  local.get c  i32.const 1  i32.sub  local.tee c  br_if 0
//	       i32.const period+1  local.set c  call f  br 1  end
//
// The call to f is off the loop's path: it starts the iteration over rather
// than rejoining it, which is why the counter restarts one higher. Rejoining
// (checkSequence's if) made wazero's register allocator reload every value
// live across the call on every iteration, which cost as much as the loop.
// A loop's parameters could not be passed again from inside the block.
func loopSequence(c, f, period uint32) []byte {
	b := appendU32([]byte{opBlock, blockEmpty, opLocalGet}, c)
	b = append(b, opI32Const, 1, opI32Sub, opLocalTee)
	b = append(appendU32(b, c), opBrIf, 0, opI32Const)
	b = appendU32(append(appendS32(b, int32(period+1)), opLocalSet), c) // period+1 wraps to 0 at MaxUint32: the decrement wraps back
	b = appendU32(append(b, opCall), f)
	return append(b, opBr, 1, opEnd)
}

// begin readies w.fn for the function w.cur, which declares the local
// entries declared, locals in all: it caches the counter if the analysis
// chose it and one more local fits.
func (w *rewriter) begin(declared uint32, locals uint64) {
	w.fn = cached{}
	f := w.cur
	if int(f) >= len(w.cache) || !w.cache[f] || declared == math.MaxUint32 || locals >= math.MaxUint32 ||
		uint64(w.params[f])+locals >= math.MaxUint32 {
		return
	}
	l := uint32(uint64(w.params[f]) + locals)
	w.fn = cached{on: true,
		check: checkSequence(opLocalGet, opLocalSet, l, w.funcImports, w.period),
		loop:  loopSequence(l, w.funcImports, w.period),
		load:  appendU32(append(appendU32([]byte{opGlobalGet}, w.global), opLocalSet), l),
		store: appendU32(append(appendU32([]byte{opLocalGet}, l), opGlobalSet), w.global)}
}

// checkpoint is the check of the function being rewritten.
func (w *rewriter) checkpoint() []byte {
	if w.fn.on {
		return w.fn.check
	}
	return w.check
}

// leaves tells whether op, whose immediates r is at, leaves the function
// being rewritten: a return, a tail call, the body's last end, or a branch
// to the body's label.
func (w *rewriter) leaves(op byte, r reader) bool {
	switch op {
	case opReturn, opReturnCall, opReturnCallIndirect, opReturnCallRef:
		return true
	case opEnd:
		return w.fn.depth == 0
	case opBr, opBrIf, opBrOnNull, opBrOnNonNull:
		l, err := r.u32()
		return err == nil && int64(l) == int64(w.fn.depth)
	case opBrTable:
		n, err := r.u32()
		for i := uint64(0); err == nil && i <= uint64(n); i++ {
			var l uint32
			if l, err = r.u32(); err == nil && int64(l) == int64(w.fn.depth) {
				return true
			}
		}
	}
	return false
}

// reaches tells whether a call to the function index idx may run a
// checkpoint: then a caller that caches the counter saves it before the call
// and reloads it after. A host function may call back into the guest.
func (w *rewriter) reaches(idx uint32) bool {
	if idx < w.funcImports {
		return true
	}
	f := idx - w.funcImports
	return int64(f) >= int64(len(w.reach)) || w.reach[f]
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
		body, err := r.sized()
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

// function rewrites one body: the locals (one more when it caches the counter), then the instructions up
// to the end of the body, then its prologue at the start.
func (w *rewriter) function(r *reader, out []byte) ([]byte, error) {
	mark := r.pos
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	decls, locals := r.pos, uint64(0)
	for i := uint32(0); i < n; i++ {
		c, err := r.u32()
		if err != nil {
			return nil, err
		}
		locals += uint64(c)
		if err := r.valType(); err != nil {
			return nil, err
		}
	}
	w.begin(n, locals)
	if w.fn.on {
		out = append(append(appendU32(out, n+1), r.buf[decls:r.pos]...), 1, typeI32)
	} else {
		out = append(out, r.buf[mark:r.pos]...)
	}
	entry, calls := len(out), false
	for r.remaining() > 0 {
		var op byte
		if out, op, err = w.instr(r, out, true); err != nil {
			return nil, err
		}
		calls = calls || isCall(op)
	}
	checked := w.entry != nil && int(w.cur) < len(w.entry) && w.entry[w.cur]
	switch {
	case w.fn.on:
		out = slices.Insert(out, entry, w.fn.load...)
		if checked {
			out = slices.Insert(out, entry+len(w.fn.load), w.fn.check...)
		}
	// Without the analysis (the pass that makes it), a function that calls
	// nothing needs no entry check: with its loops checked, it ends in a
	// bounded number of steps.
	case checked || w.entry == nil && calls:
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

// instr copies one instruction to out, renumbering a function index. In a function body (checkpoints
// set) it adds the check after a loop's block type and, if the analysis asks, before an indirect call, and
// in a function that caches the counter, the saves and loads around calls and exits. It returns the opcode.
func (w *rewriter) instr(r *reader, out []byte, checkpoints bool) ([]byte, byte, error) {
	start := r.pos
	op, err := r.readByte()
	if err != nil {
		return nil, 0, err
	}
	on := checkpoints && w.fn.on
	leaving := on && w.leaves(op, *r)
	switch op {
	case opCall, opReturnCall, opRefFunc:
		peek := *r
		idx, _ := peek.u32() // funcIdx reports a bad one
		if w.graph != nil {
			w.graph.note(op, w.cur, idx)
		}
		save := on && op == opCall && w.reaches(idx)
		if save || leaving {
			out = append(out, w.fn.store...)
		}
		if out, err = w.funcIdx(r, append(out, op)); err == nil && save {
			out = append(out, w.fn.load...)
		}
		return out, op, err
	case opLoop:
		t, err := r.blockType()
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r.buf[start:r.pos]...)
		if checkpoints {
			if w.graph != nil {
				w.graph.loop(w.cur)
			}
			if w.fn.on && (t < 0 || t < int64(len(w.typeParams)) && w.typeParams[t] == 0) {
				out = append(out, w.fn.loop...)
			} else {
				out = append(out, w.checkpoint()...)
			}
			w.fn.depth++
		}
		return out, op, nil
	}
	if err := r.immediates(op, start); err != nil {
		return nil, 0, err
	}
	if w.graph != nil && (op == opThrow || op == opThrowRef || op == opTryTable) {
		w.graph.eh = true
	}
	save := false
	if isIndirect(op) {
		if w.graph != nil {
			w.graph.note(op, w.cur, 0)
		}
		if checkpoints && w.checkIndirect { // the sequence is stack-neutral: valid before the call's operands are taken
			out = append(out, w.checkpoint()...)
		}
		save = on && (op == opCallIndirect || op == opCallRef)
	}
	if save || leaving { // after the check: a save before it would miss its decrement
		out = append(out, w.fn.store...)
	}
	out = append(out, r.buf[start:r.pos]...)
	if save {
		out = append(out, w.fn.load...)
	}
	if checkpoints {
		switch op {
		case opBlock, opIf, opTryTable:
			w.fn.depth++
		case opEnd:
			w.fn.depth--
		}
	}
	return out, op, nil
}

// blockType skips a block type: 0x40 (empty), a value type, or an s33 type index, which it returns (-1
// for the others). wazero reads it as one s33, and so does this, so that a (ref null ht) or (ref ht) type
// is followed by its heap type whichever way the prefix is encoded.
func (r *reader) blockType() (int64, error) {
	v, err := r.s33()
	if err != nil {
		return 0, err
	}
	if v == refNullPrefix-0x80 || v == refPrefix-0x80 { // the prefixes as s33: -29 and -28
		return -1, r.skipLEB(5)
	}
	return max(v, -1), nil
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
		_, err := r.blockType()
		return err
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
		_, err := r.valTypes()
		return err
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
	if _, err := r.blockType(); err != nil {
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
