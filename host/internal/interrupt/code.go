package interrupt

import (
	"math"
	"slices"

	"github.com/morphhost/morph/host/internal/wasmbin"
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
	b := wasmbin.AppendU32([]byte{get}, c)
	b = append(b, opI32Const, 1, opI32Sub, set)
	b = wasmbin.AppendU32(b, c)
	b = wasmbin.AppendU32(append(b, get), c)
	b = append(b, opI32Eqz, opIf, blockEmpty, opI32Const)
	b = wasmbin.AppendU32(append(wasmbin.AppendS32(b, int32(period)), set), c) // period above MaxInt32 wraps: c is used as unsigned
	b = wasmbin.AppendU32(append(b, opCall), f)
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
	b := wasmbin.AppendU32([]byte{opBlock, blockEmpty, opLocalGet}, c)
	b = append(b, opI32Const, 1, opI32Sub, opLocalTee)
	b = append(wasmbin.AppendU32(b, c), opBrIf, 0, opI32Const)
	b = wasmbin.AppendU32(append(wasmbin.AppendS32(b, int32(period+1)), opLocalSet), c) // period+1 wraps to 0 at MaxUint32: the decrement wraps back
	b = wasmbin.AppendU32(append(b, opCall), f)
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
		load:  wasmbin.AppendU32(append(wasmbin.AppendU32([]byte{opGlobalGet}, w.global), opLocalSet), l),
		store: wasmbin.AppendU32(append(wasmbin.AppendU32([]byte{opLocalGet}, l), opGlobalSet), w.global)}
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
func (w *rewriter) leaves(op byte, r wasmbin.Reader) bool {
	switch op {
	case opReturn, opReturnCall, opReturnCallIndirect, opReturnCallRef:
		return true
	case opEnd:
		return w.fn.depth == 0
	case opBr, opBrIf, opBrOnNull, opBrOnNonNull:
		l, err := r.U32()
		return err == nil && int64(l) == int64(w.fn.depth)
	case opBrTable:
		n, err := r.U32()
		for i := uint64(0); err == nil && i <= uint64(n); i++ {
			var l uint32
			if l, err = r.U32(); err == nil && int64(l) == int64(w.fn.depth) {
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
func (w *rewriter) funcIdx(r *wasmbin.Reader, out []byte) ([]byte, error) {
	start := r.Pos
	idx, err := r.U32()
	if err != nil {
		return nil, err
	}
	if uint64(idx) >= w.funcs {
		return nil, r.Malformed(start, "function index %d out of range (%d functions)", idx, w.funcs)
	}
	if idx >= w.funcImports {
		idx++ // idx < funcs <= MaxUint32: no overflow
	}
	return wasmbin.AppendU32(out, idx), nil
}

// codeSection rewrites every function body: the check after the locals, another at the start of every
// loop, function indices renumbered. Body sizes change, so they are re-encoded.
func (w *rewriter) codeSection(r *wasmbin.Reader) ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(make([]byte, 0, r.Remaining()+r.Remaining()/4), n)
	for i := uint32(0); i < n; i++ {
		body, err := r.Sized()
		if err != nil {
			return nil, err
		}
		w.cur = i
		if w.body, err = w.function(&body, w.body[:0]); err != nil {
			return nil, err
		}
		out = append(wasmbin.AppendU32(out, uint32(len(w.body))), w.body...)
	}
	return out, r.ExpectEnd()
}

// function rewrites one body: the locals (one more when it caches the counter), then the instructions up
// to the end of the body, then its prologue at the start.
func (w *rewriter) function(r *wasmbin.Reader, out []byte) ([]byte, error) {
	mark := r.Pos
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	decls, locals := r.Pos, uint64(0)
	for i := uint32(0); i < n; i++ {
		c, err := r.U32()
		if err != nil {
			return nil, err
		}
		locals += uint64(c)
		if err := r.ValType(); err != nil {
			return nil, err
		}
	}
	w.begin(n, locals)
	if w.fn.on {
		out = append(append(wasmbin.AppendU32(out, n+1), r.Buf[decls:r.Pos]...), 1, typeI32)
	} else {
		out = append(out, r.Buf[mark:r.Pos]...)
	}
	entry, calls := len(out), false
	for r.Remaining() > 0 {
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
func (w *rewriter) constExpr(r *wasmbin.Reader, out []byte) ([]byte, error) {
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
func (w *rewriter) instr(r *wasmbin.Reader, out []byte, checkpoints bool) ([]byte, byte, error) {
	start := r.Pos
	op, err := r.Byte()
	if err != nil {
		return nil, 0, err
	}
	on := checkpoints && w.fn.on
	leaving := on && w.leaves(op, *r)
	switch op {
	case opCall, opReturnCall, opRefFunc:
		peek := *r
		idx, _ := peek.U32() // funcIdx reports a bad one
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
		t, err := r.BlockType()
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r.Buf[start:r.Pos]...)
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
	if err := r.Immediates(op, start); err != nil {
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
	out = append(out, r.Buf[start:r.Pos]...)
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
