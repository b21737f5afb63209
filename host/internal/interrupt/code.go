package interrupt

import (
	"math"

	"github.com/morphhost/morph/host/internal/wasmbin"
)

// The code walker: it decodes every instruction of every function body (and of every constant expression)
// to find the loop headers and the function indices, and copies the rest byte for byte. Decoding all of
// them, immediates included, is what makes it safe: an immediate byte that happens to equal the loop or
// call opcode is never mistaken for one, and an opcode it does not know stops it.

// Opcodes the walker acts on or emits.
const (
	opUnreachable        = 0x00
	opNop                = 0x01
	opBlock              = 0x02
	opLoop               = 0x03
	opIf                 = 0x04
	opElse               = 0x05
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
	opDrop               = 0x1A
	opTryTable           = 0x1F
	opLocalGet           = 0x20
	opLocalSet           = 0x21
	opLocalTee           = 0x22
	opGlobalGet          = 0x23
	opGlobalSet          = 0x24
	opI32Const           = 0x41
	opMemoryGrow         = 0x40
	opI32LtS             = 0x48
	opI32LeS             = 0x4C
	opI32GtS             = 0x4A
	opI32GeU             = 0x4F
	opI32Add             = 0x6A
	opI32Sub             = 0x6B
	opI32ShrU            = 0x76
	opRefFunc            = 0xD2
	opBrOnNull           = 0xD5
	opBrOnNonNull        = 0xD6
	opMisc               = 0xFC
	opSIMD               = 0xFD
	blockEmpty           = 0x40
	typeI32              = 0x7F
)

// rewriter holds what the second pass writes into the module.
type rewriter struct {
	funcImports uint32 // the added imports' first index: function indices from here on shift by addedFuncs
	funcs       uint64 // functions before instrumentation, below MaxUint32: every function index must be below
	checkType   uint32 // index of the added type () -> ()
	global      uint32 // the counter's index; the stack budget's is the next
	budget      uint32
	stack       uint32 // the stack budget's cap, 0 for none
	body        []byte // scratch for one function body, reused

	graph     *callGraph         // set during the analysis pass, which records function references
	plan      *analysis          // the checkpoints, from the analysis pass
	cur       uint32             // the defined function being walked in the code section
	cache     []bool             // by defined function: keeps the counter in a local (see cached; nil: none does)
	reach     []bool             // by defined function: may run a checkpoint, so a caller that caches the counter saves it first
	params    []uint32           // by defined function: its parameter count, where its locals start
	funcTypes []uint32           // by defined function: its type index
	types     []wasmbin.FuncType // by type index, which a loop's block type may be
	charges   []int32            // by defined function: what its entry charges the stack budget, 0 if nothing (stack.go)
	chargeInd int32              // what an indirect call charges, 0 if nothing
	fn        cached             // the function being rewritten
	data      []byte             // the data section's payload with its segments merged, nil if unchanged (data.go)
	dataCount uint32             // the number of merged segments, for the data count section
}

// addedFuncs is how many imports the rewrite adds (Func, StackFunc): a defined function's index shifts
// by as many.
const addedFuncs = 2

// cached is how the function being rewritten reaches the counter. One that
// has checkpoints keeps the counter in a local of its own (a register once
// compiled), loaded at its entry and after calls, saved before calls and
// wherever it leaves: decrementing a global at every loop header made each
// iteration wait on the previous one's store, which doubled the time of a
// JSON parser's byte loops. The others use the global directly, or not at all.
type cached struct {
	on          bool
	get, set    byte   // how the counter is read and written: local.get and local.set c, or the global's
	c           uint32 // the counter: the local, or the global
	scratch     uint32 // a local for the count of a bulk instruction, if it has any
	load, store []byte // global to local, local to global
	header      bool   // the instruction just copied is the header of a loop that appendLoopCheck suits
	depth       int    // blocks open around the instruction: a branch to label depth leaves the function
	charge      int32  // what its entry charged the stack budget, refunded where it returns
}

func newRewriter(funcImports uint32, funcs uint64, global, checkType, budget, stack uint32) *rewriter {
	return &rewriter{funcImports: funcImports, funcs: funcs, checkType: checkType, global: global, budget: budget, stack: stack}
}

// appendCheck appends the checkpoint of weight w: it subtracts w from the counter c (through get and set,
// local.get and local.set or global.get and global.set), and calls the import f once that leaves 0 or less:
//
//	get c  i32.const w  i32.sub  set c  get c  i32.const 0  i32.le_s
//	if  i32.const budget  set c  call f  end
//
// (local.tee for the set and get of a local). The sequence leaves the operand stack as it found it, so
// it is valid between any two instructions whatever the stack beneath. The counter is reset before the
// call: if the call ends the guest, the counter left behind is still positive.
func (w *rewriter) appendCheck(out []byte, weight int) []byte {
	fn := &w.fn
	out = fn.appendSub(append(wasmbin.AppendU32(append(out, fn.get), fn.c), opI32Const), weight)
	out = append(out, opI32Const, 0, opI32LeS, opIf, blockEmpty)
	return append(w.appendReset(out, w.budget), opEnd)
}

// appendSub appends, after the operands c and n, the subtraction c - n left on the stack and in c.
func (fn *cached) appendSub(out []byte, n int) []byte {
	out = append(wasmbin.AppendS32(out, int32(n)), opI32Sub)
	return fn.appendTee(out)
}

// appendTee stores the top of the stack in the counter and leaves it there.
func (fn *cached) appendTee(out []byte) []byte {
	if fn.get == opLocalGet {
		return wasmbin.AppendU32(append(out, opLocalTee), fn.c)
	}
	return wasmbin.AppendU32(append(wasmbin.AppendU32(append(out, fn.set), fn.c), fn.get), fn.c)
}

// appendReset appends the slow path of a check: set the counter to v, call the import.
func (w *rewriter) appendReset(out []byte, v uint32) []byte {
	out = append(wasmbin.AppendS32(append(out, opI32Const), int32(v)), w.fn.set) // v <= 2^30 + maxWeight: no wrap
	return wasmbin.AppendU32(append(wasmbin.AppendU32(out, w.fn.c), opCall), w.funcImports)
}

// appendLoopCheck is the checkpoint of weight w at the header of a loop without parameters in a function
// that caches the counter in the local c:
//
//	block  local.get c  i32.const w  i32.sub  local.tee c  i32.const 0  i32.gt_s  br_if 0
//	       i32.const budget+w  local.set c  call f  br 1  end
//
// The call to f is off the loop's path: it starts the iteration over rather
// than rejoining it, which is why the counter restarts w higher. Rejoining
// (appendCheck's if) made wazero's register allocator reload every value
// live across the call on every iteration, which cost as much as the loop.
// A loop's parameters could not be passed again from inside the block.
func (w *rewriter) appendLoopCheck(out []byte, weight int) []byte {
	fn := &w.fn
	out = fn.appendSub(append(wasmbin.AppendU32(append(out, opBlock, blockEmpty, opLocalGet), fn.c), opI32Const), weight)
	out = append(out, opI32Const, 0, opI32GtS, opBrIf, 0)
	return append(w.appendReset(out, w.budget+uint32(weight)), opBr, 1, opEnd)
}

// appendCharge appends the charge of a bulk instruction whose count n is on top of the stack: n >>
// shift units, taken from the counter, or, if they are at least what it holds, a call to the import f
// first (the counter is positive outside a check: the unsigned comparison cannot wrap), with the
// scratch local s:
//
//	local.tee s  local.get s  i32.const shift  i32.shr_u  local.tee s  get c  i32.ge_u
//	if  i32.const budget  set c  call f  else  get c  local.get s  i32.sub  set c  end
//
// (without the shift when it is 0). So the host sees a long bulk instruction coming before it runs, and
// a loop of them is checked at every iteration.
func (w *rewriter) appendCharge(out []byte, shift int8) []byte {
	fn := &w.fn
	out = wasmbin.AppendU32(append(wasmbin.AppendU32(append(out, opLocalTee), fn.scratch), opLocalGet), fn.scratch)
	if shift > 0 {
		out = wasmbin.AppendU32(append(out, opI32Const, byte(shift), opI32ShrU, opLocalTee), fn.scratch)
	}
	out = append(wasmbin.AppendU32(append(out, fn.get), fn.c), opI32GeU, opIf, blockEmpty)
	out = w.appendReset(out, w.budget)
	out = wasmbin.AppendU32(append(wasmbin.AppendU32(append(out, opElse, fn.get), fn.c), opLocalGet), fn.scratch)
	out = wasmbin.AppendU32(append(out, opI32Sub, fn.set), fn.c)
	return append(out, opEnd)
}

// begin readies w.fn for the function w.cur, which declares the local entries declared, locals in all:
// it caches the counter if the analysis chose it, and takes a scratch local if it has bulk
// instructions. It returns the number of locals it adds.
func (w *rewriter) begin(r *wasmbin.Reader, declared uint32, locals uint64) (uint32, error) {
	f := w.cur
	var p fnPlan
	if int64(f) < int64(len(w.plan.plans)) {
		p = w.plan.plans[f]
	}
	w.fn = cached{get: opGlobalGet, set: opGlobalSet, c: w.global}
	on := int64(f) < int64(len(w.cache)) && w.cache[f]
	if !on && !p.bulk {
		return 0, nil
	}
	if int64(f) >= int64(len(w.params)) {
		return 0, r.Malformed(r.Pos, "function %d has no type", f)
	}
	first := uint64(w.params[f]) + locals
	added := uint32(0)
	if on {
		added++
	}
	if p.bulk {
		added++
	}
	if declared == math.MaxUint32 || first+uint64(added) > math.MaxUint32 {
		return 0, &wasmbin.Error{Kind: ErrUnsupported, Section: r.Section, Offset: r.Pos, Msg: "no local index left for the counter"}
	}
	l := uint32(first)
	if on {
		w.fn = cached{on: true, get: opLocalGet, set: opLocalSet, c: l,
			load:  wasmbin.AppendU32(append(wasmbin.AppendU32([]byte{opGlobalGet}, w.global), opLocalSet), l),
			store: wasmbin.AppendU32(append(wasmbin.AppendU32([]byte{opLocalGet}, l), opGlobalSet), w.global)}
		l++
	}
	w.fn.scratch = l
	return added, nil
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

// funcIdx copies a function index, renumbered: the added imports take indices funcImports and after.
func (w *rewriter) funcIdx(r *wasmbin.Reader, out []byte) ([]byte, error) {
	start := r.Pos
	idx, err := r.U32()
	if err != nil {
		return nil, err
	}
	if err := checkFunc(r, start, idx, w.funcs); err != nil {
		return nil, err
	}
	if idx >= w.funcImports {
		idx += addedFuncs // idx < funcs < MaxUint32-1: no overflow
	}
	return wasmbin.AppendU32(out, idx), nil
}

// checkFunc fails if the function index idx, read at start, is not below funcs.
func checkFunc(r *wasmbin.Reader, start int, idx uint32, funcs uint64) error {
	if uint64(idx) >= funcs {
		return r.Malformed(start, "function index %d out of range (%d functions)", idx, funcs)
	}
	return nil
}

// codeSection rewrites every function body: the checkpoints of the plan, function indices renumbered.
// Body sizes change, so they are re-encoded.
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

// function rewrites one body: the locals (one or two more when it caches the counter or charges bulk
// instructions), the load of a cached counter, then the instructions, with the checkpoints of the plan
// before the instructions they precede.
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
	added, err := w.begin(r, n, locals)
	if err != nil {
		return nil, err
	}
	if added > 0 {
		out = append(append(wasmbin.AppendU32(out, n+1), r.Buf[decls:r.Pos]...), byte(added), typeI32)
	} else {
		out = append(out, r.Buf[mark:r.Pos]...)
	}
	out = append(out, w.fn.load...)
	if int64(w.cur) < int64(len(w.charges)) {
		w.fn.charge = w.charges[w.cur]
	}
	if w.fn.charge > 0 { // the analysis charges only functions with a type: w.params has it
		out = w.appendStackEntry(out, w.fn.charge, w.funcTypes[w.cur], w.params[w.cur])
	}
	points := w.plan.pointsOf(w.cur)
	for r.Remaining() > 0 {
		if len(points) > 0 && points[0].at == r.Pos {
			if w.fn.header {
				out = w.appendLoopCheck(out, points[0].weight)
			} else {
				out = w.appendCheck(out, points[0].weight)
			}
			points = points[1:]
		}
		w.fn.header = false
		if out, _, err = w.instr(r, out, true); err != nil {
			return nil, err
		}
	}
	if len(points) > 0 { // the analysis decoded this body otherwise: never leave a checkpoint out
		return nil, &wasmbin.Error{Kind: ErrUnsupported, Section: r.Section, Offset: points[0].at, Msg: "internal error: a checkpoint falls inside an instruction"}
	}
	if w.fn.charge > 0 { // the body's end closed the block around it
		out = w.appendStackExit(out, w.fn.charge)
	}
	return out, nil
}

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
// set) it charges a bulk instruction before it runs and, in a function that caches the counter, adds the
// saves and loads around calls and exits. It returns the opcode.
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
		if w.graph != nil && op == opRefFunc {
			w.graph.note(op, 0, idx) // in a constant expression (the code's are noted by the analysis)
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
		if checkpoints { // its header's checkpoint comes next
			w.fn.header = w.fn.on && (t < 0 || t < int64(len(w.types)) && w.types[t].Params == 0)
			w.fn.depth++
		}
		return append(out, r.Buf[start:r.Pos]...), op, nil
	case opMisc:
		if sub := misc(*r); checkpoints && sub >= 0 && bulkShift[sub] >= 0 {
			out = w.appendCharge(out, bulkShift[sub])
		}
	}
	if err := r.Immediates(op, start); err != nil {
		return nil, 0, err
	}
	indirect := op == opCallIndirect || op == opCallRef
	charge := checkpoints && indirect && w.chargeInd > 0
	if charge {
		out = w.appendStackCharge(out, w.chargeInd)
	} else if checkpoints && op == opReturn && w.fn.charge > 0 {
		out = w.appendRefund(out, w.fn.charge)
	}
	save := on && indirect
	if save || leaving { // after a checkpoint before the call: a save before it would miss its decrement
		out = append(out, w.fn.store...)
	}
	out = append(out, r.Buf[start:r.Pos]...)
	if save {
		out = append(out, w.fn.load...)
	}
	if charge {
		out = w.appendRefund(out, w.chargeInd)
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
