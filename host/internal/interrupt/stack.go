package interrupt

import (
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// The stack budget. wazero runs a call on a stack of its own, a Go slice it doubles whenever a frame does
// not fit, up to about 100 MB: memory outside the module's memory cap, per instance running. So Instrument
// gives each instance a second budget, in bytes of that stack, in a second new global: every frame is
// charged to it before it is pushed, and refunded when it is popped, and a charge the budget cannot pay
// for calls the import Module.StackFunc, which ends the call.
//
// Charging every call would cost every call. Instead, charges are made where the interrupt's analysis
// already cut every cycle of calls (graph.go) and where the host enters the module:
//
//   - at the entry of every head of a cycle, every exported function and the start function (charged
//     functions), which refund at each of their exits: return, and the end of the body, which a branch to
//     the body's label reaches too, since the body is wrapped in a block (see appendStackEntry);
//   - around an indirect call, when the node of indirect calls is a head (the interrupt's check is there,
//     not at the entries of the functions it may call).
//
// A charge is a chain's cost C: the most stack any chain of frames may take from the charged frame (or the
// indirect call) down to the next charge, the functions in between being neither charged nor able to
// reach one another in a cycle (every cycle holds a charge). Computed callees first, as the checkpoints'
// weights are: C(f) = F(f) + the largest C of f's uncharged callees (an import's, the frame of wazero's
// call into Go; an indirect call's, the largest C of the functions whose reference is taken), F(f) being
// f's own frame (see frameOf). So a stack never holds more than the budget, plus the frames wazero adds
// at its entry.
//
// A trap leaves the budget charged with the frames it unwound: the host discards an instance that trapped.
// An exception would unwind frames without their refunds, and wazero compiles a tail call into a plain
// call when arguments go on the stack (a frame the refund before the call would not have paid for): in a
// module that throws, catches or tail-calls, nothing is charged (wazero's own ceiling remains). The host
// enables neither feature, so it never runs such a module.

const (
	// frameBase is the part of a frame that does not depend on the function: the return address, the
	// frame pointer or (arm64) the frame's size (32 bytes), the callee-saved registers wazevo may save (23
	// of 16 bytes on arm64, 13 on amd64), alignment and its stack check (32), and the frame of a call
	// into Go from any point (the interrupt's or the stack's import: 64).
	frameBase = 32 + 23*16 + 32 + 64

	// slot is what one value may take on the stack: a spill slot (wazevo gives each virtual register that
	// spills a slot of its own, never reused), or an argument or result in the area of an outgoing call.
	// In a module with v128 values, 16.
	slot = 8

	// importFrame is the frame of wazevo's trampoline into a Go function (an import): it saves registers
	// in the execution context and takes slots for the larger of the parameters and the results.
	importFrame = 64

	// internalVars are the values wazevo reloads after a call (or a memory.grow): the memory's base and
	// length. (It reloads globals only where they are read, which the reads count for.)
	internalVars = 2
)

// frameOf returns F(f), an upper estimate of the frame wazevo compiles the defined function f to,
// decoded in a.insts with locals declared locals, and the largest frame of an import it calls. In slots:
// its parameters, locals and results; every value an instruction may produce (all but local.get,
// local.set, local.tee, drop, nop and control), the results of its calls and the values wazevo reloads
// after them (internalVars); the parameters a merge may take (the block's arity, and one per local set
// within the block, a loop or an if: wazevo keeps locals in SSA variables, and a local redefined within
// a block may differ at its end); and the largest area of an outgoing call's arguments and results.
// Plus frameBase.
//
// Measured with wazero v1.12 on amd64 (a build that reports each function's frame; see
// TestFrameEstimates), the estimate is 1.04 to 4 times the frame on the shapes that make frames large
// (999 parameters, 10 nested loops each redefining 1,000 locals around a call: a frame quadratic in the
// code's size, 1,000 live i64 or v128 locals, 20,000 values on the operand stack across a call), and 3
// to 120 times it (a median of 10 to 26) on the functions of the Rust, TinyGo and Go examples, whose
// values rarely live long.
func (a *analysis) frameOf(f int, body wasmbin.Reader, locals uint64) (own, imports int64) {
	var params, results uint64
	if t, ok := a.funcType(uint32(f) + a.g.funcImports); ok {
		params, results = uint64(t.Params), uint64(t.Results)
	}
	// Every term is at most maxChain, and so is their sum, kept so: nothing overflows.
	vars := min(params+locals, maxChain)
	values := min(vars+results, maxChain)
	add := func(n uint64) { values = min(values+n, maxChain) }
	var outgoing uint64
	sets := append(a.sets[:0], 0) // by open block: the locals set within it; the body's first
	for _, in := range a.insts {
		switch in.kind {
		case kBlock, kLoop, kIf:
			r := body
			r.Pos = in.at + 1
			if t, err := r.BlockType(); err == nil && t >= 0 {
				if ft, ok := a.typeAt(t); ok {
					add(uint64(ft.Params) + uint64(ft.Results))
				}
			} else if t != -64 { // a value type (-64 is 0x40: none)
				add(1)
			}
			sets = append(sets, 0)
		case kEnd:
			if len(sets) > 1 {
				s := sets[len(sets)-1]
				sets = sets[:len(sets)-1]
				sets[len(sets)-1] += s // at most the instructions
				add(min(vars, s))
			}
		case kCall, kReturnCall, kCallIndirect, kReturnCallIndirect:
			if t, ok := a.calleeType(in, body); ok {
				add(uint64(t.Results))
				outgoing = max(outgoing, uint64(t.Params)+uint64(t.Results))
				if (in.kind == kCall || in.kind == kReturnCall) && in.a < a.g.funcImports {
					imports = max(imports, importFrame+slot*int64(max(t.Params, t.Results)))
				}
			}
			add(internalVars)
		case kPlain:
			switch body.Buf[in.at] {
			case opLocalSet, opLocalTee:
				sets[len(sets)-1]++
			case opLocalGet, opDrop, opNop:
			case opMemoryGrow:
				add(1 + internalVars)
			default:
				add(1)
			}
		case kBulk:
			add(1) // table.grow's result, or a scratch value
		}
	}
	a.sets = sets
	s := uint64(slot)
	if a.g.wide || a.fnWide {
		s *= 2
	}
	return saturate(frameBase + s*(values+outgoing)), imports
}

// calleeType is the type of the function the call in calls (its immediate, for an indirect call).
func (a *analysis) calleeType(in inst, body wasmbin.Reader) (wasmbin.FuncType, bool) {
	if in.kind == kCall || in.kind == kReturnCall {
		return a.funcType(in.a)
	}
	body.Pos = in.at + 1 // call_indirect, call_ref and their tail forms: the type index first
	t, err := body.U32()
	if err != nil {
		return wasmbin.FuncType{}, false
	}
	return a.typeAt(int64(t))
}

// saturate is v as an int64, at most maxChain.
func saturate(v uint64) int64 { return int64(min(v, maxChain)) }

// maxChain bounds every estimate: more than any budget, and far from overflowing when summed.
const maxChain = 1 << 40

// chainOf sets C(f) for the defined function f (see the top of this file), once its uncharged callees
// have theirs: they are weighed before it.
func (a *analysis) chainOf(f int) {
	c := a.leaf[f]
	for _, g := range a.g.callees[f] {
		if !a.charged[g] {
			c = max(c, a.chain[g])
		}
	}
	if a.g.indirect[f] && !a.checkIndirect {
		c = max(c, a.chainInd)
	}
	a.chain[f] = min(a.own[f]+c, maxChain)
}

// funcType is the type of the function index idx, if it is in range.
func (a *analysis) funcType(idx uint32) (wasmbin.FuncType, bool) {
	if idx < a.g.funcImports {
		if int64(idx) < int64(len(a.importTypes)) {
			return a.typeAt(int64(a.importTypes[idx]))
		}
		return wasmbin.FuncType{}, false
	}
	if f := idx - a.g.funcImports; int64(f) < int64(len(a.funcTypes)) {
		return a.typeAt(int64(a.funcTypes[f]))
	}
	return wasmbin.FuncType{}, false
}

// typeAt is the type of index t, if it is in range.
func (a *analysis) typeAt(t int64) (wasmbin.FuncType, bool) {
	if t < 0 || t >= int64(len(a.types)) {
		return wasmbin.FuncType{}, false
	}
	return a.types[t], true
}

// appendStackCharge appends the charge of c bytes: the import Module.StackFunc if the budget holds less
// (it ends the call; unreachable, should it return), else the budget less c:
//
//	global.get s  i32.const c  i32.lt_s  if  call stack  unreachable  end
//	global.get s  i32.const c  i32.sub  global.set s
//
// The budget is at most MaxStack and c at most MaxStack+1, so nothing wraps; the sequence leaves the
// operand stack as it found it.
func (w *rewriter) appendStackCharge(out []byte, c int32) []byte {
	out = w.appendBudgetAnd(out, c)
	out = wasmbin.AppendU32(append(out, opI32LtS, opIf, blockEmpty, opCall), w.funcImports+1)
	out = w.appendBudgetAnd(append(out, opUnreachable, opEnd), c)
	return wasmbin.AppendU32(append(out, opI32Sub, opGlobalSet), w.global+1)
}

// appendRefund appends the refund of c bytes: global.get s  i32.const c  i32.add  global.set s.
func (w *rewriter) appendRefund(out []byte, c int32) []byte {
	return wasmbin.AppendU32(append(w.appendBudgetAnd(out, c), opI32Add, opGlobalSet), w.global+1)
}

// appendBudgetAnd appends global.get s  i32.const c.
func (w *rewriter) appendBudgetAnd(out []byte, c int32) []byte {
	return wasmbin.AppendS32(append(wasmbin.AppendU32(append(out, opGlobalGet), w.global+1), opI32Const), c)
}

// appendStackEntry appends, at the entry of a charged function of type t with params parameters, its
// charge of c bytes, then opens the block that wraps its body, so that every exit but return (which
// refunds before it leaves) goes through the refund after it (see appendStackExit): a branch to the
// body's label, from br, br_if or br_table, now targets the block.
//
//	charge  local.get 0 ... local.get params-1  block (type t)  drop × params
//
// A block of the function's type takes its parameters and yields its results; the parameters, read
// back from the locals, are dropped at once, as the body expects an empty operand stack.
func (w *rewriter) appendStackEntry(out []byte, c int32, t, params uint32) []byte {
	out = w.appendStackCharge(out, c)
	for i := range params {
		out = wasmbin.AppendU32(append(out, opLocalGet), i)
	}
	out = wasmbin.AppendS32(append(out, opBlock), int32(t)) // t < the type count < 2^30: a positive s33
	for range params {
		out = append(out, opDrop)
	}
	return out
}

// appendStackExit appends, after the end of the block that wraps a charged function's body, the refund
// of its charge c and the body's end.
func (w *rewriter) appendStackExit(out []byte, c int32) []byte {
	return append(w.appendRefund(out, c), opEnd)
}
