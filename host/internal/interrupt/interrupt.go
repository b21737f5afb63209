// Package interrupt rewrites a WebAssembly module so that a running guest calls back into the host after a
// bounded amount of work, which is how the host stops a guest at its per-call deadline.
//
// Why not wazero's WithCloseOnContextDone: it compiles an exit from native code to Go at every loop
// header, and a JSON parser loops per byte, so a Rust hook call cost 108 us instead of 16 us. Instead,
// like wasmtime's fuel, Instrument gives each instance a budget of work, in units of about one
// instruction, and places checkpoints that take work from it: every loop header, enough function entries
// (or indirect call sites) that every cycle of calls holds one (see graph.go), and wherever the work
// until the next checkpoint would otherwise be long (see plan.go). A checkpoint takes the work that any
// path from it may run before the next checkpoint (its weight, a constant), so a loop whose body is a
// hundred thousand instructions long, or calls a function that long, pays for it at every iteration.
// When the budget is spent, the checkpoint calls the imported function Module.Func, which the host
// implements: it checks the call's context and panics with the context's error, which wazero recovers
// and returns from the call (wrapped with %w). Because that import is a Go call, it is also where the Go
// runtime can preempt the goroutine: wasm code running in wazero cannot be preempted, so without
// checkpoints a spinning guest stalls every garbage collection. A bulk instruction whose work is an
// operand (memory.fill, memory.copy, memory.init, table.fill, table.copy, table.init, table.grow) is
// charged its count before it runs, and calls the host first if the budget cannot pay for it.
//
// The counter lives in a new global, which a function with checkpoints copies into a local of its own for
// its duration (saved before calls that may reach a checkpoint and wherever it leaves), so that a
// checkpoint is a register subtraction and a predictable branch, with the call to Module.Func off the
// loop's path (see appendLoopCheck). wazero's exit check costs about 40 ns a loop iteration
// (BenchmarkLoop); with a budget of about 100,000 units the Go call is amortised to nothing.
//
// The bound: between two calls to Module.Func a guest runs at most budget + maxWeight units of work (see
// plan.go; maxWeight is 10,001), plus one bulk instruction (at most its memory or table). No goroutine
// has to set a flag (a flag setter could not run during a stop-the-world anyway).
//
// A second budget bounds the instance's call stack, which wazero keeps outside the module's memory: see
// stack.go.
//
// The rewrite reads the module with package wasmbin, which decodes every instruction, so an opcode it does
// not know is an error, never a guess.
package interrupt

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/morphhost/morph/host/internal/wasmbin"
)

// Version changes whenever Instrument's output for a given input, budget and stack changes, so that a
// cache of instrumented modules keyed by it never serves a stale rewrite.
const Version = 7

// MaxBudget is the largest budget Instrument accepts: the counter is a signed 32-bit integer, which a
// budget plus a checkpoint's weight must not overflow.
const MaxBudget = 1 << 30

// MaxStack is the largest stack budget Instrument accepts, in bytes: the budget is a signed 32-bit
// integer too.
const MaxStack = 1 << 30

// Module, Func and StackFunc name the imports the instrumented module gains. The host must provide them,
// as functions of type () -> (), before it instantiates the module. Func checks the call's deadline;
// StackFunc is called when a frame would take the call's stack past its budget, and must end the call
// (by a panic, which wazero returns as the call's error): should it return, the guest traps.
const (
	Module    = "morph:internal"
	Func      = "interrupt_check"
	StackFunc = "stack_exhausted"
)

// Instrument returns a copy of the binary module wasm in which every checkpoint subtracts its weight from a
// new mutable i32 global (or a function's local copy of it), the counter, and, when the counter reaches 0
// or less, sets it back to budget and calls the import Module.Func. The counter starts at budget and is
// per instance: it carries over from one export call to the next. A bulk instruction subtracts its count
// (shifted: see bulkShift), or, if the counter does not exceed that, sets it to budget and calls the
// import before it runs. A checkpoint's weight is at least 1, so with a budget of 1 every checkpoint calls
// the import, and with a budget of n and checkpoints of weight 1 every n-th does. budget must be between 1
// and MaxBudget.
//
// stack is the stack budget, in bytes, between 1 and MaxStack, or 0 for none: the estimated frames of
// an instance's calls (all its stacks together, for a host that calls it re-entrantly) never take more,
// as a frame that would take more calls the import Module.StackFunc first (see stack.go). The budget is a second
// new global, per instance, balanced whenever no call runs (unless one trapped).
//
// The module gains a type () -> () at the end of its types, the two imports at the end of its imports
// (every defined function's index shifts by two: calls, ref.func, element segments, exports, the start
// function and the function names are renumbered) and the two globals at the end of its globals; a
// function with checkpoints gains an i32 local after its own, except in a module that throws or catches
// exceptions (an exception would skip the local's save: there every checkpoint uses the global), and one
// with bulk instructions another. A function charged for the stack has its body wrapped in a block.
// Custom sections are kept, except the DWARF .debug_* sections, whose code offsets the rewrite
// invalidates.
//
// The rewrite also merges the module's active data segments where no instance can tell (see data.go):
// wazero's cost of instantiating a module grows with its segments, of which a standard Go module has tens
// of thousands. The name section's data names are dropped when it does.
//
// A failure is a *wasmbin.Error that matches wasmbin.ErrMalformed or ErrUnsupported under errors.Is and
// names the section and the byte offset in wasm.
func Instrument(wasm []byte, budget, stack uint32) ([]byte, error) {
	if budget == 0 || budget > MaxBudget {
		return nil, fmt.Errorf("interrupt: budget %d, want 1 to %d", budget, MaxBudget)
	}
	if stack > MaxStack {
		return nil, fmt.Errorf("interrupt: stack budget %d, want at most %d", stack, MaxStack)
	}
	m, err := split(wasm)
	if err != nil {
		return nil, err
	}
	return m.rewrite(budget, stack)
}

// ErrUnsupported is the kind of a wasmbin.Error for a well-formed module that cannot be instrumented, e.g.
// one that already imports Module.Func or Module.StackFunc (it was instrumented before, or it tries to
// supply its own check).
// Malformed input is a wasmbin.ErrMalformed.
var ErrUnsupported = errors.New("module cannot be instrumented")

// module is what the first pass learns: the sections, and the counts that fix the indices of what the
// rewrite adds. It is needed before rewriting because a custom "name" section may precede the import
// section, and the code section needs the new global's index.
type module struct {
	buf           []byte
	sections      []wasmbin.Section
	types         uint32 // types defined by the type section: the index of the added type
	funcImports   uint32 // imported functions: the index of the first added import
	globalImports uint32
	funcs         uint32             // defined functions (function section count)
	sigs          []wasmbin.FuncType // by type index
	funcTypes     []uint32           // by defined function: its type index
	importTypes   []uint32           // by imported function: its type index
	globals       uint32             // defined globals (global section count)
	v128          bool               // a type or an imported global holds a v128
	memories      uint32             // defined memories (memory section count)
	memImports    uint32             // imported memories
	dataCount     int64              // the data count section's count, -1 without one
}

// split reads the sections and the counts.
func split(wasm []byte) (*module, error) {
	m := &module{buf: wasm, dataCount: -1}
	err := wasmbin.Walk(wasm, func(s wasmbin.Section) error {
		m.sections = append(m.sections, s)
		return m.count(s.ID, s.Body)
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// count reads what the rewrite needs to know in advance from a section (body is a copy: the section's
// wasmbin.Reader stays at the start for the rewrite).
func (m *module) count(id byte, body wasmbin.Reader) error {
	var err error
	switch id {
	case wasmbin.IDType:
		err = m.readTypes(&body)
	case wasmbin.IDImport:
		err = m.readImports(&body)
	case wasmbin.IDFunction:
		err = m.readFunctions(&body)
	case wasmbin.IDGlobal:
		m.globals, err = body.U32()
	case wasmbin.IDMemory:
		m.memories, err = body.U32()
	case wasmbin.IDDataCount:
		var n uint32
		n, err = body.U32()
		m.dataCount = int64(n)
	}
	return err
}

// emptyVec is the payload of an absent type, import or global section: a vector of no entries, which the
// section's rewrite extends like a present one.
var emptyVec = []byte{0}

// added lists the sections the rewrite extends, in module order: each is created if absent.
var added = []byte{wasmbin.IDType, wasmbin.IDImport, wasmbin.IDGlobal}

// rewrite analyses the module (see analyse), then copies it section by section, extending the type, import and
// global sections (creating them in their place if absent) and renumbering function indices.
func (m *module) rewrite(budget, stack uint32) ([]byte, error) {
	// The type and import counts are of entries read within a section, whose size is a u32, so they stay
	// well below MaxUint32; the global count is only declared.
	global := uint64(m.globalImports) + uint64(m.globals)
	if global >= math.MaxUint32-1 {
		return nil, &wasmbin.Error{Kind: ErrUnsupported, Section: "global", Msg: "no global index left for the counters"}
	}
	// The function count is only declared too: capped, so that a valid index plus addedFuncs still fits
	// a u32.
	funcs := min(uint64(m.funcImports)+uint64(m.funcs), math.MaxUint32-addedFuncs)
	w := newRewriter(m.funcImports, funcs, uint32(global), m.types, budget, stack)
	if err := w.analyse(m); err != nil {
		return nil, err
	}
	if data := m.section(wasmbin.IDData); data != nil && m.mergeable(w.plan.dataRefs) {
		w.data, w.dataCount = mergeData(data.Body, m.dataCount, max(len(m.buf), minZeros))
	}

	missing := make([]byte, 0, len(added))
	for _, id := range added {
		if !m.has(id) {
			missing = append(missing, id)
		}
	}
	out := make([]byte, 0, len(m.buf)+len(m.buf)/4)
	out = append(out, m.buf[:8]...)
	var err error
	for _, s := range m.sections {
		for s.ID != wasmbin.IDCustom && len(missing) > 0 && wasmbin.Order[missing[0]] < wasmbin.Order[s.ID] {
			if out, err = w.section(out, m.empty(missing[0])); err != nil {
				return nil, err
			}
			missing = missing[1:]
		}
		if out, err = w.section(out, s); err != nil {
			return nil, err
		}
	}
	for _, id := range missing {
		if out, err = w.section(out, m.empty(id)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (m *module) has(id byte) bool { return m.section(id) != nil }

// section is the section id of m, or nil if it has none.
func (m *module) section(id byte) *wasmbin.Section {
	for i := range m.sections {
		if m.sections[i].ID == id {
			return &m.sections[i]
		}
	}
	return nil
}

// empty is an absent section, to be created.
func (m *module) empty(id byte) wasmbin.Section {
	return wasmbin.Section{ID: id, Body: wasmbin.NewReader(emptyVec, wasmbin.SectionNames[id])}
}

// section appends the rewrite of s to out.
func (w *rewriter) section(out []byte, s wasmbin.Section) ([]byte, error) {
	r := s.Body
	var payload []byte
	var err error
	switch s.ID {
	case wasmbin.IDType:
		payload, err = w.typeSection(&r)
	case wasmbin.IDImport:
		payload, err = w.importSection(&r)
	case wasmbin.IDGlobal:
		payload, err = w.globalSection(&r)
	case wasmbin.IDTable:
		payload, err = w.tableSection(&r)
	case wasmbin.IDExport:
		payload, err = w.exportSection(&r)
	case wasmbin.IDStart:
		payload, err = w.startSection(&r)
	case wasmbin.IDElement:
		payload, err = w.elementSection(&r)
	case wasmbin.IDCode:
		payload, err = w.codeSection(&r)
	case wasmbin.IDCustom:
		return w.customSection(out, s)
	case wasmbin.IDData, wasmbin.IDDataCount:
		if w.data == nil { // not merged
			return append(out, r.Buf[s.Start:r.End]...), nil
		}
		payload = w.data
		if s.ID == wasmbin.IDDataCount {
			payload = wasmbin.AppendU32(nil, w.dataCount)
		}
	default: // function, memory, tag: no function index inside
		return append(out, r.Buf[s.Start:r.End]...), nil
	}
	if err != nil {
		return nil, err
	}
	if uint64(len(payload)) > math.MaxUint32 { // a 2-byte loop header gains a 20- to 43-byte check
		return nil, &wasmbin.Error{Kind: ErrUnsupported, Section: r.Section, Offset: s.Start, Msg: "the instrumented section exceeds 4 GiB"}
	}
	return appendSection(out, s.ID, payload), nil
}

// customSection keeps a custom section unchanged, renumbers the "name" section, and drops the DWARF
// sections: they map code offsets to source lines, and the rewrite moves the code.
func (w *rewriter) customSection(out []byte, s wasmbin.Section) ([]byte, error) {
	r := s.Body
	name, err := r.Name()
	if err != nil {
		return nil, err
	}
	switch {
	case string(name) == "name":
		return appendSection(out, wasmbin.IDCustom, append(wasmbin.AppendName(nil, "name"), w.nameSection(&r)...)), nil
	case strings.HasPrefix(string(name), ".debug_"):
		return out, nil
	}
	return append(out, r.Buf[s.Start:r.End]...), nil
}

func appendSection(out []byte, id byte, payload []byte) []byte {
	out = wasmbin.AppendU32(append(out, id), uint32(len(payload)))
	return append(out, payload...)
}
