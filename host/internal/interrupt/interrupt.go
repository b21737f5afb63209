// Package interrupt rewrites a WebAssembly module so that a running guest calls back into the host at a
// bounded interval, which is how the host stops a guest at its per-call deadline.
//
// Why not wazero's WithCloseOnContextDone: it compiles an exit from native code to Go at every loop
// header, and a JSON parser loops per byte, so a Rust hook call cost 108 us instead of 16 us. Instead,
// like wasmtime's fuel and epochs, Instrument makes every loop header, and enough function entries (or indirect
// call sites) that every cycle of calls holds one (the checkpoints; see graph.go), decrement a counter, and
// every period-th checkpoint call the imported
// function Module.Func, which the host implements: it checks the call's context and panics with the
// context's error, which wazero recovers and returns from the call (wrapped with %w). Because that import
// is a Go call, it is also where the Go runtime can preempt the goroutine: wasm code running in wazero
// cannot be preempted, so without checkpoints a spinning guest stalls every garbage collection. The counter
// lives in a new global, which a function with checkpoints copies into a local of its own for its
// duration (saved before calls that may reach a checkpoint and wherever it leaves), so that a checkpoint
// is a register decrement and a predictable branch, with the call to Module.Func off the loop's path (see
// loopSequence). wazero's exit check costs about 40 ns a loop iteration (BenchmarkLoop); with a period of
// about 10,000 the Go call is amortised to nothing and a stop-the-world waits some tens of microseconds at
// most. No goroutine has to set a flag (a flag setter could not run during a stop-the-world anyway).
//
// These checkpoints suffice: code that reaches none runs straight through its body (there are no other
// backward branches) before it returns or reaches one, and every cycle of calls, tail calls included, holds one.
// A single long instruction (memory.fill or memory.copy over a large range) is not interrupted; the memory
// limit bounds it.
//
// The rewrite follows the WebAssembly 2.0 binary format plus the features wazero v1.12 accepts
// (threads, tail calls, extended constant expressions, exception handling with try_table, typed function
// references). It decodes every instruction, so an opcode it does not know is an error, never a guess.
package interrupt

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Version changes whenever Instrument's output for a given input and period changes, so that a cache of
// instrumented modules keyed by it never serves a stale rewrite.
const Version = 4

// Module and Func name the import the instrumented module gains. The host must provide it, as a function
// of type () -> (), before it instantiates the module.
const (
	Module = "morph:internal"
	Func   = "interrupt_check"
)

// Instrument returns a copy of the binary module wasm in which every checkpoint (every loop header, and function
// entries or indirect call sites enough to cut every cycle of calls) decrements a new mutable i32 global (or
// a function's local copy of it) and,
// every period-th time, calls the import Module.Func (the counter
// starts at period and is reset to it, so on a fresh instance the n-th call happens at the (n*period)-th
// checkpoint; the counter is per instance and carries over from one export call to the next).
//
// The module gains a type () -> () at the end of its types, the import at the end of its imports (every
// defined function's index shifts by one: calls, ref.func, element segments, exports, the start function
// and the function names are renumbered) and the global at the end of its globals; a function with
// checkpoints gains an i32 local after its own, except in a module that throws or catches exceptions (an
// exception would skip the local's save: there every checkpoint uses the global). Custom sections are
// kept, except the DWARF .debug_* sections, whose code offsets the rewrite invalidates.
//
// A failure is an *Error that matches ErrMalformed or ErrUnsupported under errors.Is and names the section
// and the byte offset in wasm.
func Instrument(wasm []byte, period uint32) ([]byte, error) {
	if period == 0 {
		return nil, errors.New("interrupt: period must be at least 1")
	}
	m, err := split(wasm)
	if err != nil {
		return nil, err
	}
	return m.rewrite(period)
}

// Kinds of failure, told apart with errors.Is on an *Error.
var (
	// ErrMalformed: the input does not follow the WebAssembly binary format (a truncated or overlong
	// field, an unknown opcode or section, sections out of order). wazero would refuse it too.
	ErrMalformed = errors.New("malformed module")
	// ErrUnsupported: the input is well formed but cannot be instrumented, e.g. it already imports
	// Module.Func (it was instrumented before, or it tries to supply its own check).
	ErrUnsupported = errors.New("module cannot be instrumented")
)

// Error is an Instrument failure. It names the section and the byte offset in the input where the
// problem was found, so that a report about a third-party module can be checked with wasm-objdump,
// and it matches ErrMalformed or ErrUnsupported under errors.Is.
type Error struct {
	Kind    error  // ErrMalformed or ErrUnsupported
	Section string // "header", "type", "code", ..., "unknown" (an unknown section id)
	Offset  int    // byte offset in the input module
	Msg     string
}

// Error reads "interrupt: <kind>: <section> section at offset <hex>: <message>", the offset in hex as
// wasm-objdump prints it.
func (e *Error) Error() string {
	return fmt.Sprintf("interrupt: %v: %s section at offset %#x: %s", e.Kind, e.Section, e.Offset, e.Msg)
}

// Unwrap returns the kind, so that errors.Is(err, ErrMalformed) works on a wrapped *Error.
func (e *Error) Unwrap() error { return e.Kind }

// Section ids (spec 5.5.2; 13 is exception handling's tag section).
const (
	idCustom    = 0
	idType      = 1
	idImport    = 2
	idFunction  = 3
	idTable     = 4
	idMemory    = 5
	idGlobal    = 6
	idExport    = 7
	idStart     = 8
	idElement   = 9
	idCode      = 10
	idData      = 11
	idDataCount = 12
	idTag       = 13
)

// order is each known non-custom section's place in a module, 0 for an unknown id. The tag section sits
// between memory and global, the data count section between element and code.
var order = [...]int{idType: 1, idImport: 2, idFunction: 3, idTable: 4, idMemory: 5, idTag: 6, idGlobal: 7,
	idExport: 8, idStart: 9, idElement: 10, idDataCount: 11, idCode: 12, idData: 13}

// sectionNames name the sections in errors, as wasm-objdump does.
var sectionNames = [...]string{idCustom: "custom", idType: "type", idImport: "import", idFunction: "function",
	idTable: "table", idMemory: "memory", idGlobal: "global", idExport: "export", idStart: "start",
	idElement: "element", idCode: "code", idData: "data", idDataCount: "data count", idTag: "tag"}

// section is one section of the input.
type section struct {
	id    byte
	start int    // offset of the id byte: a section copied unchanged keeps its original header
	body  reader // the payload
}

// module is what the first pass learns: the sections, and the counts that fix the indices of what the
// rewrite adds. It is needed before rewriting because a custom "name" section may precede the import
// section, and the code section needs the new global's index.
type module struct {
	buf           []byte
	sections      []section
	types         uint32 // types defined by the type section: the index of the added type
	funcImports   uint32 // imported functions: the index of the added import
	globalImports uint32
	funcs         uint32   // defined functions (function section count)
	params        []uint32 // by type index: the number of parameters
	funcTypes     []uint32 // by defined function: its type index
	globals       uint32   // defined globals (global section count)
}

// split checks the header and the section order, and reads the counts.
func split(wasm []byte) (*module, error) {
	r := reader{buf: wasm, end: len(wasm), section: "header"}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, r.malformed(0, "not a WebAssembly binary module (no \\0asm magic)")
	}
	if string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return nil, r.malformed(4, "binary format version %x, want 1", wasm[4:8])
	}
	r.pos = 8
	m := &module{buf: wasm}
	last := 0
	for r.remaining() > 0 {
		start := r.pos
		id, _ := r.readByte() // cannot fail: remaining > 0
		if id != idCustom && (int(id) >= len(order) || order[id] == 0) {
			r.section = "unknown"
			return nil, r.malformed(start, "unknown section id %d", id)
		}
		r.section = sectionNames[id]
		body, err := r.sized()
		if err != nil {
			return nil, err
		}
		if id != idCustom {
			if order[id] <= last {
				return nil, r.malformed(start, "section out of order or repeated")
			}
			last = order[id]
		}
		if err := m.count(id, body); err != nil {
			return nil, err
		}
		m.sections = append(m.sections, section{id: id, start: start, body: body})
	}
	return m, nil
}

// count reads what the rewrite needs to know in advance from a section (body is a copy: the section's
// reader stays at the start for the rewrite).
func (m *module) count(id byte, body reader) error {
	var err error
	switch id {
	case idType:
		err = m.readTypes(&body)
	case idImport:
		err = m.readImports(&body)
	case idFunction:
		err = m.readFunctions(&body)
	case idGlobal:
		m.globals, err = body.u32()
	}
	return err
}

// emptyVec is the payload of an absent type, import or global section: a vector of no entries, which the
// section's rewrite extends like a present one.
var emptyVec = []byte{0}

// added lists the sections the rewrite extends, in module order: each is created if absent.
var added = []byte{idType, idImport, idGlobal}

// rewrite is the second pass: it copies the module section by section, extending the type, import and
// global sections (creating them in their place if absent) and renumbering function indices.
func (m *module) rewrite(period uint32) ([]byte, error) {
	// The type and import counts are of entries read within a section, whose size is a u32, so they stay
	// well below MaxUint32; the global count is only declared.
	global := uint64(m.globalImports) + uint64(m.globals)
	if global >= math.MaxUint32 {
		return nil, &Error{Kind: ErrUnsupported, Section: "global", Msg: "no global index left for the counter"}
	}
	// The function count is only declared too: capped, so that a valid index plus one still fits a u32.
	funcs := min(uint64(m.funcImports)+uint64(m.funcs), math.MaxUint32)
	w := newRewriter(m.funcImports, funcs, uint32(global), m.types, period)
	w.analyse(m)

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
		for s.id != idCustom && len(missing) > 0 && order[missing[0]] < order[s.id] {
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

func (m *module) has(id byte) bool {
	for _, s := range m.sections {
		if s.id == id {
			return true
		}
	}
	return false
}

// empty is an absent section, to be created.
func (m *module) empty(id byte) section {
	return section{id: id, body: reader{buf: emptyVec, end: len(emptyVec), section: sectionNames[id]}}
}

// section appends the rewrite of s to out.
func (w *rewriter) section(out []byte, s section) ([]byte, error) {
	r := s.body
	var payload []byte
	var err error
	switch s.id {
	case idType:
		payload, err = w.typeSection(&r)
	case idImport:
		payload, err = w.importSection(&r)
	case idGlobal:
		payload, err = w.globalSection(&r)
	case idTable:
		payload, err = w.tableSection(&r)
	case idExport:
		payload, err = w.exportSection(&r)
	case idStart:
		payload, err = w.startSection(&r)
	case idElement:
		payload, err = w.elementSection(&r)
	case idCode:
		payload, err = w.codeSection(&r)
	case idCustom:
		return w.customSection(out, s)
	default: // function, memory, tag, data, data count: no function index inside
		return append(out, r.buf[s.start:r.end]...), nil
	}
	if err != nil {
		return nil, err
	}
	if uint64(len(payload)) > math.MaxUint32 { // a 2-byte loop header gains a 20- to 43-byte check
		return nil, &Error{Kind: ErrUnsupported, Section: r.section, Offset: s.start, Msg: "the instrumented section exceeds 4 GiB"}
	}
	return appendSection(out, s.id, payload), nil
}

// customSection keeps a custom section unchanged, renumbers the "name" section, and drops the DWARF
// sections: they map code offsets to source lines, and the rewrite moves the code.
func (w *rewriter) customSection(out []byte, s section) ([]byte, error) {
	r := s.body
	name, err := r.name()
	if err != nil {
		return nil, err
	}
	switch {
	case string(name) == "name":
		return appendSection(out, idCustom, append(appendName(nil, "name"), w.nameSection(&r)...)), nil
	case strings.HasPrefix(string(name), ".debug_"):
		return out, nil
	}
	return append(out, r.buf[s.start:r.end]...), nil
}

func appendSection(out []byte, id byte, payload []byte) []byte {
	out = appendU32(append(out, id), uint32(len(payload)))
	return append(out, payload...)
}
