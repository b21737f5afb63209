package interrupt

import (
	"slices"

	"github.com/morphhost/morph/host/internal/wasmbin"
)

// The plan: where each function's checkpoints go and what each weighs, decided before the rewrite.
//
// Work is counted in units of about one WebAssembly instruction. A checkpoint's weight is the work it
// pays for in advance: the most that any path from it can run before the next checkpoint or the
// function's return (its pending work), calls included (a call to f costs 1 plus f's unpaid work, the
// pending work at f's entry, 0 if f's entry holds a checkpoint). weigh computes the pending work at every
// instruction boundary of a function by one pass over its code from the end, over the structured control
// flow (a branch to a block goes after its end, already passed; a branch to a loop goes to the loop's
// header, a checkpoint: nothing pending). Checkpoints go at:
//
//   - every loop header, and the entries (or indirect call sites) that cut every cycle of calls (graph.go);
//   - wherever the pending work would exceed maxSegment: after the instruction that would make it, or
//     before it if the instruction alone is that long (a call); at a function's entry, this is how an
//     exponential tree of calls without loop or recursion gets checked;
//   - after a call that may run a checkpoint (see below);
//   - where a loop exits (after its end, and after the end of a block around it that a branch inside it
//     targets), when more than maxExit is pending there (see maxExit);
//   - where an exception may land (after the end of a block a catch clause targets).
//
// So no path from a checkpoint runs more than its weight before the next one (or its return), every
// weight is at most maxWeight, and every function's unpaid work is at most maxSegment.
//
// The work after a call that may run a checkpoint is not paid for before the call, but by a checkpoint
// after it. Paid before, it would be owed to the frame while the callee runs checks, and returns unwind
// frames without any checkpoint: a recursion two million frames deep (wazero's 400 MB stack allows
// that) returning through a few cache-missing loads each would run for seconds unchecked. This way a
// suspended frame never holds prepaid work, and the checkpoints after calls are off the hot paths (on the
// Rust example, 15 more checkpoints run in a call, for 1,400 to 74,000).
//
// The functions are weighed callees first (in the depth-first search's finishing order, see entries), so
// that a call's cost is known: the only callees weighed later are the heads of cycles, whose entries are
// checked (unpaid work 0). An indirect call costs 1 plus the largest unpaid work of the functions whose
// reference is taken; when the indirect-call node is a head, the indirect call sites are checked and
// their weights get that cost once every function is weighed (the taken functions' unpaid work cannot
// depend on it: their paths stop at those checked call sites).

const (
	// maxSegment is the most work a path may run from a checkpoint (or a function's entry) before the
	// next checkpoint, except for one instruction that alone costs more (a call: 1 plus up to maxSegment).
	// From 0.1 ns a unit (arithmetic) to 200 ns (loads that miss every cache): 1 us to 2 ms.
	maxSegment = 10_000

	// maxExit is the most work left pending where a loop exits. Every iteration pays for the longest
	// path from its header, and that would include the code after the loop, up to the function's next
	// checkpoint: on the Rust example the median checkpoint weighed 610 units for loop bodies of tens, and
	// the host was called 70 times more often than the work required. A checkpoint at the exit runs once
	// for the loop, not once an iteration.
	maxExit = 16

	// maxWeight is the largest weight of a checkpoint: a call's own cost (1 + up to maxSegment).
	maxWeight = maxSegment + 1

	// Costs of the instructions that cost more than one unit (measured on wazero v1.12, amd64): a call
	// to an imported function (a Go function: 50 to 500 ns), memory.grow and table.grow (an exit to Go,
	// about 30 ns) and the fixed part of a bulk memory or table instruction. The variable part of the
	// bulk instructions is charged when they run (see bulkShift).
	costImport = 256
	costGrow   = 64
	costBulk   = 16
)

// bulkShift is, for each 0xFC instruction, how the count on top of the stack becomes units (count >>
// shift), or -1 for the instructions whose work does not depend on an operand. memory.fill, copy and
// init move about 14 to 30 bytes a nanosecond, 4 bytes a unit; table.fill, copy, init and grow about one
// 8-byte element a nanosecond (grow, with its allocation, one every 15 to 35 ns), one element a unit.
var bulkShift = [...]int8{-1, -1, -1, -1, -1, -1, -1, -1, 2, -1, 2, 2, 0, -1, 0, 0, -1, 0}

// Opcodes after 0xFC: memory.init and data.drop, which name a data segment, and table.grow.
const (
	miscMemoryInit = 8
	miscDataDrop   = 9
	miscTableGrow  = 15
)

// misc returns the 0xFC instruction whose opcode r is after, if it is one of bulkShift's, else -1.
func misc(r wasmbin.Reader) int {
	sub, err := r.U32()
	if err != nil || int64(sub) >= int64(len(bulkShift)) {
		return -1
	}
	return int(sub)
}

// point is a checkpoint of the plan.
type point struct {
	at       int // offset in the module of the instruction it goes before
	weight   int
	indirect bool // an indirect call site's: its weight gets the indirect call's cost when known
}

// fnPlan is the plan of one defined function.
type fnPlan struct {
	lo, hi int  // its points: analysis.points[lo:hi], in code order
	bulk   bool // it has bulk instructions, charged when they run: they need a scratch local
}

// Kinds of instruction, as weigh tells them apart.
const (
	kPlain              = iota // one successor, the next instruction; flag: ref.func, a: its function index
	kBlock                     // block, try_table: opens a block
	kLoop                      // opens a loop
	kIf                        // opens an if; b: 1 once its else is decoded
	kElse                      //
	kEnd                       // a: the kind of the block it closes; flag, exit: the opener's
	kBr                        // a: label
	kBrIf                      // br_if, br_on_null, br_on_non_null; a: label
	kBrTable                   // labels[a:b]
	kExit                      // return, unreachable, throw, throw_ref
	kCall                      // a: function index
	kReturnCall                // a: function index
	kCallIndirect              // call_indirect, call_ref
	kReturnCallIndirect        // return_call_indirect, return_call_ref
	kBulk                      // a bulk memory or table instruction, charged when it runs
)

// inst is one decoded instruction.
type inst struct {
	at   int // offset of its opcode in the module
	kind uint8
	flag bool // kPlain: ref.func; a block's opener and end: a catch clause lands after the end
	exit bool // a block's opener and end: a loop exits after the end (a loop's own end, or a branch out of one)
	cost int  // kPlain, kBulk: the cost in units
	a, b uint32
}

// frame is a block open around the instructions weigh is at.
type frame struct {
	target    int // pending work where a branch to its label goes
	elseStart int // an if's: pending work at the start of its else arm
	hasElse   bool
}

// analysis is the state of the analysis pass: the call graph, then the plan.
type analysis struct {
	g             *callGraph
	funcs         uint64 // functions, imports included, at most MaxUint32
	head          []bool // entry checked to cut cycles
	checkIndirect bool   // indirect call sites checked to cut cycles
	bodies        []wasmbin.Reader
	unpaid        []int  // by defined function: its unpaid work
	reach         []bool // by defined function: may run a checkpoint or charge the budget
	unpaidInd     int    // the most unpaid work of a function whose reference is taken
	plans         []fnPlan
	points        []point

	// the stack budget's (see stack.go)
	types       []wasmbin.FuncType // by type index
	funcTypes   []uint32           // by defined function: its type index
	importTypes []uint32           // by imported function: its type index
	own         []int64            // by defined function: its frame, F
	leaf        []int64            // by defined function: the largest frame of an import it calls
	chain       []int64            // by defined function: C, the most stack from its entry to the next charge
	charged     []bool             // by defined function: its entry charges C
	chainInd    int64              // the largest C of an uncharged function whose reference is taken
	locals      uint64             // decode: the locals the function declares
	fnWide      bool               // decode: the function has a v128 local or a SIMD instruction
	sets        []uint64           // scratch of frameOf

	dataRefs bool // the code has memory.init or data.drop, which name data segments (see data.go)

	// scratch, reused from one function to the next
	insts  []inst
	labels []uint32
	open   []int // decode: the instructions that opened the blocks around, -1 for the body
	loops  []int // decode: by open block, the depth of the innermost loop open there, 0 if none
	frames []frame
}

// analyse records the call graph (the sections with function references, and every function body) and
// plans every function's checkpoints, which it leaves in w. A malformed body is an error.
func (w *rewriter) analyse(m *module) error {
	n := int(min(m.funcs, uint32(len(m.buf)))) // a body takes at least a byte: the count cannot exceed that
	g := &callGraph{funcImports: m.funcImports, callees: make([][]uint32, n), indirect: make([]bool, n),
		taken: make([]bool, n), roots: make([]bool, n), wide: m.v128}
	a := &analysis{g: g, funcs: w.funcs, types: m.sigs, funcTypes: m.funcTypes, importTypes: m.importTypes,
		own: make([]int64, n), leaf: make([]int64, n), chain: make([]int64, n)}
	w.graph = g
	defer func() { w.graph = nil }()
	for _, s := range m.sections {
		var err error
		switch s.ID {
		case wasmbin.IDGlobal, wasmbin.IDTable, wasmbin.IDElement, wasmbin.IDExport, wasmbin.IDStart:
			_, err = w.section(nil, s) // ref.func, element function indices, the functions the host calls
		case wasmbin.IDCode:
			err = a.code(s.Body)
		}
		if err != nil {
			return err
		}
	}
	var order []int
	a.head, a.checkIndirect, order = g.entries()
	a.charged = make([]bool, n)
	for f := range n {
		a.charged[f] = a.head[f] || g.roots[f]
	}
	a.unpaid, a.reach, a.plans = make([]int, n), make([]bool, n), make([]fnPlan, n)
	for _, f := range order {
		if f == n {
			a.indirectNode()
			continue
		}
		if f >= len(a.bodies) {
			continue // declared without a body: wazero refuses the module
		}
		if err := a.decode(a.bodies[f]); err != nil {
			return err
		}
		a.weigh(f)
		a.chainOf(f)
	}
	for i := range a.points {
		if a.points[i].indirect {
			a.points[i].weight += 1 + a.unpaidInd
		}
	}
	w.plan = a
	w.params, w.funcTypes, w.types = make([]uint32, min(n, len(m.funcTypes))), m.funcTypes, m.sigs
	for f := range w.params {
		if t := m.funcTypes[f]; int64(t) < int64(len(m.sigs)) {
			w.params[f] = m.sigs[t].Params
		} else {
			w.params = w.params[:f] // a type out of range: wazero refuses the module
			break
		}
	}
	if w.stack > 0 && !g.eh && !g.tail { // see stack.go on exceptions and tail calls
		w.charges = make([]int32, len(w.params))
		for f := range w.charges {
			if a.charged[f] {
				w.charges[f] = int32(min(a.chain[f], MaxStack+1))
			}
		}
		if a.checkIndirect {
			w.chargeInd = int32(min(a.chainInd, MaxStack+1))
		}
	}
	if !g.eh { // a caught exception would skip the save of a cached counter: such modules use the global
		w.cache = make([]bool, n)
		for f := range n {
			p := a.plans[f]
			w.cache[f] = (p.hi > p.lo || p.bulk) && f < len(w.params)
		}
		w.reach = a.reach
	}
	return nil
}

// code reads the code section: each body is decoded for its calls, and kept for weigh.
func (a *analysis) code(r wasmbin.Reader) error {
	n, err := r.U32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		body, err := r.Sized()
		if err != nil {
			return err
		}
		a.bodies = append(a.bodies, body)
		if err := a.decode(body); err != nil {
			return err
		}
		if int64(i) < int64(len(a.own)) {
			a.own[i], a.leaf[i] = a.frameOf(int(i), body, a.locals)
		}
		for _, in := range a.insts {
			switch {
			case in.kind == kCall || in.kind == kReturnCall:
				a.g.note(opCall, i, in.a)
			case in.kind == kCallIndirect || in.kind == kReturnCallIndirect:
				a.g.note(opCallIndirect, i, 0)
			case in.kind == kPlain && in.flag: // ref.func
				a.g.note(opRefFunc, i, in.a)
			}
		}
	}
	return r.ExpectEnd()
}

// decode reads a function body (locals, then code) into a.insts, matching every block with its end.
func (a *analysis) decode(r wasmbin.Reader) error {
	a.insts, a.labels, a.open, a.loops = a.insts[:0], a.labels[:0], append(a.open[:0], -1), append(a.loops[:0], 0)
	a.locals, a.fnWide = 0, false
	n, err := r.U32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		c, err := r.U32()
		if err != nil {
			return err
		}
		a.locals += uint64(c) // at most 2^32 entries of 2^32: no overflow
		a.fnWide = a.fnWide || r.Remaining() > 0 && r.Buf[r.Pos] == wasmbin.V128
		if err := r.ValType(); err != nil {
			return err
		}
	}
	for r.Remaining() > 0 {
		start := r.Pos
		if len(a.open) == 0 {
			return r.Malformed(start, "%d bytes after the end of the function body", r.Remaining())
		}
		op, _ := r.Byte() // cannot fail: remaining > 0
		in := inst{at: start, kind: kPlain, cost: 1}
		switch op {
		case opBlock, opLoop, opIf:
			in.kind = kBlock + op - opBlock // kBlock, kLoop, kIf
			in.exit = op == opLoop
			_, err = r.BlockType()
			a.push(op == opLoop)
		case opTryTable:
			in.kind = kBlock
			a.g.eh = true
			err = a.catches(&r)
			a.push(false)
		case opElse:
			o := a.open[len(a.open)-1]
			if o < 0 || a.insts[o].kind != kIf || a.insts[o].b != 0 {
				return r.Malformed(start, "else outside an if")
			}
			a.insts[o].b = 1 // has an else: a second one is malformed
			in.kind = kElse
		case opEnd:
			o := a.open[len(a.open)-1]
			a.open, a.loops = a.open[:len(a.open)-1], a.loops[:len(a.loops)-1]
			in.kind = kEnd
			if o >= 0 {
				in.a, in.flag, in.exit = uint32(a.insts[o].kind), a.insts[o].flag, a.insts[o].exit
			}
		case opBr, opBrIf, opBrOnNull, opBrOnNonNull:
			in.kind = kBrIf
			if op == opBr {
				in.kind = kBr
			}
			in.a, err = a.label(&r)
		case opBrTable:
			var count uint32
			if count, err = r.U32(); err != nil {
				return err
			}
			in.kind, in.a = kBrTable, uint32(len(a.labels))
			for i := uint64(0); i <= uint64(count) && err == nil; i++ {
				var l uint32
				l, err = a.label(&r)
				a.labels = append(a.labels, l)
			}
			in.b = uint32(len(a.labels))
		case opCall:
			in.kind = kCall
			in.a, err = a.funcIdx(&r)
		case opReturnCall:
			in.kind = kReturnCall
			a.g.tail = true
			in.a, err = a.funcIdx(&r)
		case opRefFunc:
			in.flag = true
			in.a, err = a.funcIdx(&r)
		case opReturn, opUnreachable:
			in.kind = kExit
		case opThrow, opThrowRef:
			in.kind = kExit
			a.g.eh = true
			err = r.Immediates(op, start)
		case opCallIndirect, opCallRef:
			in.kind = kCallIndirect
			err = r.Immediates(op, start)
		case opReturnCallIndirect, opReturnCallRef:
			in.kind = kReturnCallIndirect
			a.g.tail = true
			err = r.Immediates(op, start)
		case opSIMD:
			a.fnWide = true
			err = r.Immediates(op, start)
		case opMemoryGrow:
			in.cost = costGrow
			err = r.Immediates(op, start)
		case opMisc:
			sub := misc(r)
			a.dataRefs = a.dataRefs || sub == miscMemoryInit || sub == miscDataDrop
			if sub >= 0 && bulkShift[sub] >= 0 {
				in.kind, in.cost = kBulk, costBulk
				if sub == miscTableGrow {
					in.cost = costGrow
				}
			}
			err = r.Immediates(op, start)
		default:
			err = r.Immediates(op, start)
		}
		if err != nil {
			return err
		}
		a.insts = append(a.insts, in)
	}
	if len(a.open) != 0 {
		return r.Malformed(r.End, "the function body ends inside %d blocks", len(a.open))
	}
	return nil
}

// catches reads try_table's immediates and marks the blocks its catch clauses land after.
func (a *analysis) catches(r *wasmbin.Reader) error {
	start := len(a.labels)
	var err error
	if a.labels, err = r.TryTable(a.labels); err != nil {
		return err
	}
	for _, l := range a.labels[start:] {
		if int64(l) >= int64(len(a.open)) {
			return r.Malformed(r.Pos, "catch to label %d, %d labels in scope", l, len(a.open))
		}
		if o := a.open[len(a.open)-1-int(l)]; o >= 0 {
			a.insts[o].flag = true
		}
	}
	a.labels = a.labels[:start]
	return nil
}

// push opens a block (a loop if loop) at the instruction being decoded.
func (a *analysis) push(loop bool) {
	inner := a.loops[len(a.loops)-1]
	if loop {
		inner = len(a.open)
	}
	a.open, a.loops = append(a.open, len(a.insts)), append(a.loops, inner)
}

// label reads a branch's label, which must name a block around it, and marks that block's end as a
// loop's exit if the branch leaves a loop for it.
func (a *analysis) label(r *wasmbin.Reader) (uint32, error) {
	at := r.Pos
	l, err := r.U32()
	if err != nil {
		return 0, err
	}
	if int64(l) >= int64(len(a.open)) {
		return 0, r.Malformed(at, "branch to label %d, %d labels in scope", l, len(a.open))
	}
	d := len(a.open) - 1 - int(l) // the target's depth
	if o := a.open[d]; o >= 0 && a.loops[len(a.loops)-1] > d {
		a.insts[o].exit = true
	}
	return l, nil
}

// funcIdx reads a function index, which must be in range.
func (a *analysis) funcIdx(r *wasmbin.Reader) (uint32, error) {
	start := r.Pos
	idx, err := r.U32()
	if err == nil {
		err = checkFunc(r, start, idx, a.funcs)
	}
	return idx, err
}

// pointsOf returns the points of the defined function f, in code order.
func (a *analysis) pointsOf(f uint32) []point {
	if int64(f) >= int64(len(a.plans)) {
		return nil
	}
	return a.points[a.plans[f].lo:a.plans[f].hi]
}

// indirectNode is weigh and chainOf for the indirect-call node, once every function whose reference is
// taken has been weighed (or is a head).
func (a *analysis) indirectNode() {
	for f, t := range a.g.taken {
		if t && !a.head[f] {
			a.unpaidInd = max(a.unpaidInd, a.unpaid[f])
		}
		if t && !a.charged[f] {
			a.chainInd = max(a.chainInd, a.chain[f])
		}
	}
}

// call is the cost of the call in, and whether the callee may run a checkpoint (or charge the budget),
// which an imported function may, by calling back into the guest.
func (a *analysis) call(in inst) (cost int, reach bool) {
	if in.kind == kCallIndirect || in.kind == kReturnCallIndirect {
		return 1 + a.unpaidInd, true
	}
	if in.a < a.g.funcImports {
		return costImport, true
	}
	f := in.a - a.g.funcImports
	if int64(f) >= int64(len(a.unpaid)) || a.head[f] {
		return 1, true
	}
	return 1 + a.unpaid[f], a.reach[f]
}

// weigh plans the checkpoints of the defined function f, decoded in a.insts (see the top of this file).
// It walks the code from the end, p being the pending work at the boundary after the instruction at
// hand, and places points at boundaries (boundary i is before instruction i).
func (a *analysis) weigh(f int) {
	ins := a.insts
	lo, last := len(a.points), -1 // last: the boundary of the latest point (they come from the end)
	place := func(b, weight int, indirect bool) {
		a.points = append(a.points, point{at: ins[b].at, weight: weight, indirect: indirect})
		last = b
	}
	frames := append(a.frames[:0], frame{}) // the body's label: a branch to it returns
	target := func(l uint32) int { return frames[len(frames)-1-int(l)].target }
	reach, bulk := false, false
	p := 0
	for i := len(ins) - 1; i >= 0; i-- {
		in := ins[i]
		// cut places a point after the instruction, unless nothing is pending there or one is already.
		cut := func() {
			if p > 0 && last != i+1 {
				place(i+1, p, false)
				p = 0
			}
		}
		var q int // the pending work at boundary i
		switch in.kind {
		case kEnd:
			if i == len(ins)-1 { // the body's: the function returns
				q = 1
				break
			}
			if in.flag || in.exit && p > maxExit || 1+p > maxSegment {
				cut()
			}
			t := p
			if in.a == kLoop {
				t = 0 // a branch to a loop goes to its header's checkpoint
			}
			frames = append(frames, frame{target: t})
			q = 1 + p
		case kElse:
			fr := &frames[len(frames)-1]
			fr.elseStart, fr.hasElse = p, true
			q = 1 + fr.target
		case kIf:
			fr := frames[len(frames)-1]
			frames = frames[:len(frames)-1]
			if !fr.hasElse {
				fr.elseStart = fr.target
			}
			q = 1 + max(p, fr.elseStart)
		case kBlock, kLoop:
			frames = frames[:len(frames)-1]
			if in.kind == kLoop {
				cut() // the header
				q = 1
				break
			}
			if 1+p > maxSegment {
				cut()
			}
			q = 1 + p
		case kBr:
			q = 1 + target(in.a)
		case kBrIf:
			q = 1 + max(p, target(in.a))
		case kBrTable:
			m := 0
			for _, l := range a.labels[in.a:in.b] {
				m = max(m, target(l))
			}
			q = 1 + m
		case kExit:
			q = 1
		case kReturnCall, kReturnCallIndirect:
			c, r := a.call(in)
			reach = reach || r
			q = c
			if in.kind == kReturnCallIndirect && a.checkIndirect {
				place(i, 0, true)
				q = 0
			}
		case kCall, kCallIndirect:
			c, r := a.call(in)
			reach = reach || r
			if r || c+p > maxSegment {
				cut()
			}
			q = c + p
			if in.kind == kCallIndirect && a.checkIndirect {
				place(i, p, true)
				q = 0
			}
		default: // kPlain, kBulk
			bulk = bulk || in.kind == kBulk
			if in.cost+p > maxSegment {
				cut()
			}
			q = in.cost + p
		}
		if q > maxSegment {
			place(i, q, false)
			q = 0
		}
		p = q
	}
	if a.head[f] && last != 0 {
		place(0, p, false)
	}
	if last == 0 {
		p = 0
	}
	slices.Reverse(a.points[lo:])
	a.unpaid[f] = p
	a.reach[f] = reach || bulk || len(a.points) > lo
	a.plans[f] = fnPlan{lo: lo, hi: len(a.points), bulk: bulk}
	a.frames = frames
}
