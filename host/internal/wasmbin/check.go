package wasmbin

import "fmt"

// Limits bound what a module may declare. Check refuses a module over any of
// them before a compiler sees it: wazero's decoder allocates by the counts a
// module declares (a function declaring 2^32 locals made it die of an
// out-of-memory error in a 40-byte module), its compiler takes time
// quadratic in the nesting of blocks (one function of 100,000 nested blocks:
// a minute), and a runtime allocates a table's initial size per instance.
// The defaults are far above what real guests declare (see DefaultLimits)
// and below what costs a host more than about a second and some hundreds of
// MB to compile. A zero field takes its default.
type Limits struct {
	ModuleBytes     int    // the module's size
	CodeBytes       int    // all function bodies together
	FunctionBytes   uint32 // one function body
	Functions       uint32 // imported and defined
	FunctionLocals  uint32 // locals one function declares
	TotalLocals     uint64 // locals all functions declare
	NestingDepth    uint32 // blocks, loops, ifs and try_tables open at once in one function
	NestingCost     uint64 // the sum over functions of their nesting depth squared (the compiler's cost)
	Types           uint32
	TypeArity       uint32 // parameters, or results, of one function type
	Imports         uint32
	Exports         uint32
	Globals         uint32
	Tables          uint32 // imported and defined
	TableEntries    uint32 // the initial sizes of all tables together
	ElementSegments uint32
	ElementItems    uint32 // items of all element segments together
	DataSegments    uint32
	Tags            uint32
	CustomSections  uint32
	Names           uint32 // entries of the name section's function and local maps
	NameBytes       uint32 // the longest name: of an import, an export, a custom section, a function or a local
}

// DefaultLimits are the limits of a zero Limits. For scale, measured on
// this repository's guests: a standard Go guest of 3.5 MB declares 2,300
// functions, 9,400 locals (at most 20 in one function) and a table of 6,400
// entries, nests blocks 549 deep (a nesting cost of 3.8 million), and
// compiles in 1.9 s; the Rust example is a tenth of that in size, nests 53
// deep, and compiles in 0.3 s. At the defaults a module compiles in some
// seconds at worst (about 0.5 s per MB of real code).
func DefaultLimits() Limits {
	return Limits{
		ModuleBytes:     64 << 20,
		CodeBytes:       16 << 20,
		FunctionBytes:   2 << 20,
		Functions:       200_000,
		FunctionLocals:  50_000,
		TotalLocals:     4_000_000,
		NestingDepth:    2_000,
		NestingCost:     100_000_000,
		Types:           100_000,
		TypeArity:       1_000,
		Imports:         10_000,
		Exports:         100_000,
		Globals:         100_000,
		Tables:          100,
		TableEntries:    1 << 20,
		ElementSegments: 100_000,
		ElementItems:    1 << 20,
		DataSegments:    100_000,
		Tags:            10_000,
		CustomSections:  1_000,
		Names:           1 << 20,
		NameBytes:       64 << 10,
	}
}

// WithDefaults returns l with its zero fields set to DefaultLimits'.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	def := func(v *uint32, dv uint32) {
		if *v == 0 {
			*v = dv
		}
	}
	if l.ModuleBytes <= 0 {
		l.ModuleBytes = d.ModuleBytes
	}
	if l.CodeBytes <= 0 {
		l.CodeBytes = d.CodeBytes
	}
	if l.TotalLocals == 0 {
		l.TotalLocals = d.TotalLocals
	}
	if l.NestingCost == 0 {
		l.NestingCost = d.NestingCost
	}
	def(&l.FunctionBytes, d.FunctionBytes)
	def(&l.Functions, d.Functions)
	def(&l.FunctionLocals, d.FunctionLocals)
	def(&l.NestingDepth, d.NestingDepth)
	def(&l.Types, d.Types)
	def(&l.TypeArity, d.TypeArity)
	def(&l.Imports, d.Imports)
	def(&l.Exports, d.Exports)
	def(&l.Globals, d.Globals)
	def(&l.Tables, d.Tables)
	def(&l.TableEntries, d.TableEntries)
	def(&l.ElementSegments, d.ElementSegments)
	def(&l.ElementItems, d.ElementItems)
	def(&l.DataSegments, d.DataSegments)
	def(&l.Tags, d.Tags)
	def(&l.CustomSections, d.CustomSections)
	def(&l.Names, d.Names)
	def(&l.NameBytes, d.NameBytes)
	return l
}

// LimitError is a module over one of its Limits, found at Offset in Section.
// It matches ErrLimit under errors.Is.
type LimitError struct {
	Limit   string // the Limits field
	Value   uint64 // what the module declares (at least: the check stops at the first excess)
	Max     uint64 // the limit
	Section string
	Offset  int
}

// Error reads "module over a limit: <section> section at offset <hex>:
// declares <value> <what>, over the limit of <max>".
func (e *LimitError) Error() string {
	return fmt.Sprintf("%v: %s section at offset %#x: declares %d %s, over the limit of %d",
		ErrLimit, e.Section, e.Offset, e.Value, limitNouns[e.Limit], e.Max)
}

// Is reports whether target is ErrLimit.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// limitNouns say what each limit counts, for LimitError's message.
var limitNouns = map[string]string{
	"ModuleBytes": "bytes of module", "CodeBytes": "bytes of code", "FunctionBytes": "bytes in one function body",
	"Functions": "functions", "FunctionLocals": "locals in one function", "TotalLocals": "locals in all",
	"NestingDepth": "blocks nested in one function", "NestingCost": "units of nesting cost (depth squared, summed over functions)",
	"Types": "types", "TypeArity": "parameters or results in one type", "Imports": "imports", "Exports": "exports",
	"Globals": "globals", "Tables": "tables", "TableEntries": "table entries", "ElementSegments": "element segments",
	"ElementItems": "element items", "DataSegments": "data segments", "Tags": "tags", "CustomSections": "custom sections",
	"Names": "name section entries", "NameBytes": "bytes in one name",
}

// Kinds of imports and exports (the external kind byte).
const (
	KindFunction = 0
	KindTable    = 1
	KindMemory   = 2
	KindGlobal   = 3
	KindTag      = 4
)

// KindNames name the kinds, for messages.
var KindNames = [...]string{KindFunction: "a function", KindTable: "a table", KindMemory: "a memory",
	KindGlobal: "a global", KindTag: "a tag"}

// Import is one entry of the import section.
type Import struct {
	Module, Name string
	Kind         byte
	Type         uint32 // a function's type index; a global's value type (its first byte)
}

// Export is one entry of the export section.
type Export struct {
	Name string
	Kind byte
}

// Shape is what Check learned of a module that passed.
type Shape struct {
	Imports      []Import
	Exports      []Export
	Functions    uint32 // imported and defined
	Tables       []TableLimits
	MaxDepth     uint32 // the deepest nesting of any function
	NestingCost  uint64
	TotalLocals  uint64
	CodeBytes    int
	LargestLocal uint32 // the most locals one function declares
	// StateOp names the first instruction found that changes a table or
	// drops a segment (table.set, table.grow, data.drop, ...): state outside
	// the linear memory and the globals, which a snapshot does not hold
	// (PrepareSnapshot); "" when the module has none.
	StateOp string
}

// TableLimits are a defined table's declared sizes.
type TableLimits struct {
	Min, Max uint32
	HasMax   bool
}

// checker is Check's state.
type checker struct {
	l         Limits
	shape     Shape
	types     uint32
	imported  uint32   // imported functions
	params    []uint32 // by type index: its parameter count
	funcTypes []uint32 // by defined function: its type index
	globals   uint64   // imported and defined
	customs   uint32
	tables    uint32
	entries   uint64
	items     uint64
	body      uint32 // the function body being read
}

// Check reads every section of wasm, every vector in it, every function's
// locals and instructions, and refuses a module that is malformed (an *Error
// of kind ErrMalformed) or declares more than l allows (a *LimitError). It
// allocates nothing by a declared count, so it is safe on any input, and it
// runs in time linear in the module's size.
func Check(wasm []byte, l Limits) (*Shape, error) {
	l = l.WithDefaults()
	c := &checker{l: l}
	if len(wasm) > l.ModuleBytes {
		r := NewReader(wasm, "header")
		return nil, c.over(&r, 0, "ModuleBytes", uint64(len(wasm)), uint64(l.ModuleBytes))
	}
	err := Walk(wasm, func(s Section) error {
		r := s.Body
		switch s.ID {
		case IDCustom:
			return c.custom(&r, s.Start)
		case IDType:
			return c.typeSection(&r)
		case IDImport:
			return c.importSection(&r)
		case IDFunction:
			return c.functionSection(&r)
		case IDTable:
			return c.tableSection(&r)
		case IDMemory:
			at := r.Pos
			n, err := r.U32()
			if err != nil {
				return err
			}
			if n > 1 {
				return r.Malformed(at, "%d memories: a module has at most one", n)
			}
			if n == 1 {
				if _, _, _, err := r.Limits(); err != nil {
					return err
				}
			}
			return r.ExpectEnd()
		case IDTag:
			return c.vector(&r, c.l.Tags, "Tags", func() error {
				if _, err := r.Byte(); err != nil {
					return err
				}
				_, err := r.U32()
				return err
			})
		case IDGlobal:
			return c.vector(&r, c.l.Globals, "Globals", func() error {
				c.globals++
				if err := r.ValType(); err != nil {
					return err
				}
				if _, err := r.Byte(); err != nil {
					return err
				}
				return constExpr(&r)
			})
		case IDExport:
			return c.vector(&r, c.l.Exports, "Exports", func() error {
				name, err := c.name(&r)
				if err != nil {
					return err
				}
				kind, err := r.Byte()
				if err != nil {
					return err
				}
				c.shape.Exports = append(c.shape.Exports, Export{Name: name, Kind: kind}) // at most Exports entries
				_, err = r.U32()
				return err
			})
		case IDStart:
			if _, err := r.U32(); err != nil {
				return err
			}
			return r.ExpectEnd()
		case IDElement:
			return c.elementSection(&r)
		case IDDataCount:
			if _, err := r.U32(); err != nil {
				return err
			}
			return r.ExpectEnd()
		case IDCode:
			return c.codeSection(&r)
		case IDData:
			return c.dataSection(&r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &c.shape, nil
}

// over is the *Error of a limit exceeded at offset off.
func (c *checker) over(r *Reader, off int, limit string, value, max uint64) error {
	return &LimitError{Limit: limit, Value: value, Max: max, Section: r.Section, Offset: off}
}

// name reads a name of at most NameBytes (wazero copies names into every
// error that names a function: a trap's stack trace has 30 frames).
func (c *checker) name(r *Reader) (string, error) {
	at := r.Pos
	n, err := r.Name()
	if err == nil && len(n) > int(c.l.NameBytes) {
		return "", c.over(r, at, "NameBytes", uint64(len(n)), uint64(c.l.NameBytes))
	}
	return string(n), err
}

// vector reads a vector of at most max entries, each by entry, and the end of
// the section.
func (c *checker) vector(r *Reader, max uint32, limit string, entry func() error) error {
	start := r.Pos
	n, err := r.U32()
	if err != nil {
		return err
	}
	if n > max {
		return c.over(r, start, limit, uint64(n), uint64(max))
	}
	for i := uint32(0); i < n; i++ {
		if err := entry(); err != nil {
			return err
		}
	}
	return r.ExpectEnd()
}

func (c *checker) typeSection(r *Reader) error {
	return r.FuncTypes(func(at int, t FuncType) error {
		if c.types++; c.types > c.l.Types {
			return c.over(r, at, "Types", uint64(c.types), uint64(c.l.Types))
		}
		if n := max(t.Params, t.Results); n > c.l.TypeArity {
			return c.over(r, at, "TypeArity", uint64(n), uint64(c.l.TypeArity))
		}
		c.params = append(c.params, t.Params) // at most Types entries
		return nil
	})
}

func (c *checker) importSection(r *Reader) error {
	peek := *r
	if n, err := peek.U32(); err == nil && n > c.l.Imports { // Imports reports a bad count
		return c.over(r, r.Pos, "Imports", uint64(n), uint64(c.l.Imports))
	}
	return r.Imports(func(at int, imp Import, table TableLimits) error {
		if n := max(len(imp.Module), len(imp.Name)); n > int(c.l.NameBytes) {
			return c.over(r, at, "NameBytes", uint64(n), uint64(c.l.NameBytes))
		}
		c.shape.Imports = append(c.shape.Imports, imp) // at most Imports entries
		switch imp.Kind {
		case KindFunction:
			c.imported++
			return c.functions(r, at, 0)
		case KindTable:
			return c.table(r, at, table)
		case KindGlobal:
			c.globals++
		}
		return nil
	})
}

// functions checks the count of imported and defined functions.
func (c *checker) functions(r *Reader, at int, defined uint32) error {
	n := uint64(c.imported) + uint64(defined)
	if n > uint64(c.l.Functions) {
		return c.over(r, at, "Functions", n, uint64(c.l.Functions))
	}
	c.shape.Functions = uint32(n)
	return nil
}

func (c *checker) functionSection(r *Reader) error {
	peek := *r
	if n, err := peek.U32(); err == nil { // TypeIndices reports a bad count
		if err := c.functions(r, r.Pos, n); err != nil {
			return err
		}
	}
	var err error
	c.funcTypes, err = r.TypeIndices()
	return err
}

// table counts a table of limits t, read at offset at.
func (c *checker) table(r *Reader, at int, t TableLimits) error {
	if c.tables++; c.tables > c.l.Tables {
		return c.over(r, at, "Tables", uint64(c.tables), uint64(c.l.Tables))
	}
	if c.entries += uint64(t.Min); c.entries > uint64(c.l.TableEntries) {
		return c.over(r, at, "TableEntries", c.entries, uint64(c.l.TableEntries))
	}
	c.shape.Tables = append(c.shape.Tables, t) // at most Tables entries
	return nil
}

// tableLimits reads a table's limits and counts the table.
func (c *checker) tableLimits(r *Reader, at int) error {
	var t TableLimits
	var err error
	if t.Min, t.Max, t.HasMax, err = r.Limits(); err != nil {
		return err
	}
	return c.table(r, at, t)
}

func (c *checker) tableSection(r *Reader) error {
	return c.vector(r, c.l.Tables, "Tables", func() error {
		at := r.Pos
		if r.Remaining() > 1 && r.Buf[r.Pos] == 0x40 { // a table with an initialiser (typed function references)
			r.Pos++
			if b, err := r.Byte(); err != nil {
				return err
			} else if b != 0 {
				return r.Malformed(r.Pos-1, "table initialiser prefix 0x40 %#x, want 0x40 0x00", b)
			}
			if err := r.ValType(); err != nil {
				return err
			}
			if err := c.tableLimits(r, at); err != nil {
				return err
			}
			return constExpr(r)
		}
		if err := r.ValType(); err != nil {
			return err
		}
		return c.tableLimits(r, at)
	})
}

func (c *checker) elementSection(r *Reader) error {
	return c.vector(r, c.l.ElementSegments, "ElementSegments", func() error {
		at := r.Pos
		flags, err := r.U32()
		if err != nil {
			return err
		}
		if flags > 7 {
			return r.Malformed(at, "element segment flags %d, want 0 to 7", flags)
		}
		if flags&3 == 2 {
			if _, err := r.U32(); err != nil { // table index
				return err
			}
		}
		if flags&1 == 0 {
			if err := constExpr(r); err != nil { // offset
				return err
			}
		}
		if flags&3 != 0 {
			if flags&4 != 0 {
				err = r.ValType() // reference type
			} else {
				_, err = r.Byte() // element kind
			}
			if err != nil {
				return err
			}
		}
		start := r.Pos
		n, err := r.U32()
		if err != nil {
			return err
		}
		if c.items += uint64(n); c.items > uint64(c.l.ElementItems) {
			return c.over(r, start, "ElementItems", c.items, uint64(c.l.ElementItems))
		}
		for i := uint32(0); i < n; i++ {
			if flags&4 != 0 {
				err = constExpr(r)
			} else {
				_, err = r.U32()
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func (c *checker) dataSection(r *Reader) error {
	return c.vector(r, c.l.DataSegments, "DataSegments", func() error {
		at := r.Pos
		flags, err := r.U32()
		if err != nil {
			return err
		}
		switch flags {
		case 0: // active, memory 0
			err = constExpr(r)
		case 1: // passive
		case 2: // active, memory index
			if _, err = r.U32(); err == nil {
				err = constExpr(r)
			}
		default:
			return r.Malformed(at, "data segment flags %d, want 0 to 2", flags)
		}
		if err != nil {
			return err
		}
		_, err = r.Name() // vec(byte): the bytes must be there
		return err
	})
}

// codeSection checks every function body: its size, its locals and the
// nesting of its instructions.
func (c *checker) codeSection(r *Reader) error {
	c.shape.CodeBytes = r.Remaining()
	if c.shape.CodeBytes > c.l.CodeBytes {
		return c.over(r, r.Pos, "CodeBytes", uint64(c.shape.CodeBytes), uint64(c.l.CodeBytes))
	}
	n, err := r.U32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		at := r.Pos
		body, err := r.Sized()
		if err != nil {
			return err
		}
		if size := body.Remaining(); size > int(c.l.FunctionBytes) {
			return c.over(r, at, "FunctionBytes", uint64(size), uint64(c.l.FunctionBytes))
		}
		c.body = i
		if err := c.function(&body); err != nil {
			return err
		}
	}
	return r.ExpectEnd()
}

// function checks one body's locals and nesting.
func (c *checker) function(r *Reader) error {
	start := r.Pos
	n, err := r.U32()
	if err != nil {
		return err
	}
	var locals uint64
	for i := uint32(0); i < n; i++ {
		k, err := r.U32()
		if err != nil {
			return err
		}
		if locals += uint64(k); locals > uint64(c.l.FunctionLocals) {
			return c.over(r, start, "FunctionLocals", locals, uint64(c.l.FunctionLocals))
		}
		if err := r.ValType(); err != nil {
			return err
		}
	}
	if c.shape.TotalLocals += locals; c.shape.TotalLocals > c.l.TotalLocals {
		return c.over(r, start, "TotalLocals", c.shape.TotalLocals, c.l.TotalLocals)
	}
	c.shape.LargestLocal = max(c.shape.LargestLocal, uint32(locals))
	if int64(c.body) < int64(len(c.funcTypes)) { // else wazero refuses the module
		if t := c.funcTypes[c.body]; int64(t) < int64(len(c.params)) {
			locals += uint64(c.params[t]) // the parameters are the first locals
		}
	}
	var depth, deepest uint32
	for r.Remaining() > 0 {
		at := r.Pos
		op, err := r.Byte()
		if err != nil {
			return err
		}
		if op >= 0x20 && op <= 0x24 { // local.get local.set local.tee global.get global.set
			if err := c.indices(r, op, at, locals); err != nil {
				return err
			}
		}
		if err := r.Immediates(op, at); err != nil {
			return err
		}
		if c.shape.StateOp == "" {
			c.shape.StateOp = stateOp(r.Buf[at:r.Pos])
		}
		switch {
		case op == 0x02 || op == 0x03 || op == 0x04 || op == 0x1F: // block loop if try_table
			if depth++; depth > c.l.NestingDepth {
				return c.over(r, at, "NestingDepth", uint64(depth), uint64(c.l.NestingDepth))
			}
			deepest = max(deepest, depth)
		case op == 0x0B && depth > 0: // end of a block
			depth--
		case op == 0x0B && r.Remaining() > 0: // end of the function
			return r.Malformed(at, "end of the function before the end of its body")
		}
	}
	c.shape.MaxDepth = max(c.shape.MaxDepth, deepest)
	if c.shape.NestingCost += uint64(deepest) * uint64(deepest); c.shape.NestingCost > c.l.NestingCost {
		return c.over(r, start, "NestingCost", c.shape.NestingCost, c.l.NestingCost)
	}
	return nil
}

// stateOps name the 0xFC instructions that change a table or drop a
// segment, by their second opcode.
var stateOps = map[uint32]string{9: "data.drop", 12: "table.init", 13: "elem.drop", 14: "table.copy", 15: "table.grow", 17: "table.fill"}

// stateOp names the instruction ins (its opcode and immediates, checked) if
// it changes a table or drops a segment, else "".
func stateOp(ins []byte) string {
	switch ins[0] {
	case 0x26:
		return "table.set"
	case 0xFC:
		r := NewReader(ins[1:], "code")
		sub, _ := r.U32() // read by Immediates already
		return stateOps[sub]
	}
	return ""
}

// indices refuses a local or global index beyond the function's locals
// (parameters included) or the module's globals. wazero would refuse it too,
// but only after the rewrite that adds a local and a global for its deadline
// checks (package interrupt): an out-of-range index the guest chose to be
// the next one would then name the deadline counter, which the guest could
// reset for ever. r is after op, and is left there.
func (c *checker) indices(r *Reader, op byte, at int, locals uint64) error {
	peek := *r
	idx, err := peek.U32()
	switch {
	case err != nil: // Immediates reports it
	case op <= 0x22 && uint64(idx) >= locals:
		return r.Malformed(at, "local index %d out of range (%d locals)", idx, locals)
	case op >= 0x23 && uint64(idx) >= c.globals:
		return r.Malformed(at, "global index %d out of range (%d globals)", idx, c.globals)
	}
	return nil
}

// custom checks a custom section: it counts, and the entries of the name
// section's maps, which wazero allocates by their declared counts, are
// bounded.
func (c *checker) custom(r *Reader, at int) error {
	if c.customs++; c.customs > c.l.CustomSections {
		return c.over(r, at, "CustomSections", uint64(c.customs), uint64(c.l.CustomSections))
	}
	if name, err := c.name(r); err != nil || name != "name" {
		return err
	}
	var entries uint64
	// nameMap reads a vec((index, name)), counting its entries.
	nameMap := func(sub *Reader) error {
		at := sub.Pos
		n, err := sub.U32()
		if err != nil {
			return err
		}
		if entries += uint64(n); entries > uint64(c.l.Names) {
			return c.over(sub, at, "Names", entries, uint64(c.l.Names))
		}
		for i := uint32(0); i < n; i++ {
			if _, err := sub.U32(); err != nil {
				return err
			}
			if _, err := c.name(sub); err != nil {
				return err
			}
		}
		return nil
	}
	for r.Remaining() > 0 {
		id, _ := r.Byte() // cannot fail: Remaining > 0
		sub, err := r.Sized()
		if err != nil {
			return err
		}
		switch id { // wazero decodes the function (1) and local (2) names
		case 1:
			err = nameMap(&sub)
		case 2:
			var n uint32
			if n, err = sub.U32(); err == nil {
				for i := uint32(0); i < n && err == nil; i++ {
					if _, err = sub.U32(); err == nil {
						err = nameMap(&sub)
					}
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// constExpr reads a constant expression, up to its end.
func constExpr(r *Reader) error {
	for {
		at := r.Pos
		op, err := r.Byte()
		if err != nil {
			return err
		}
		if err := r.Immediates(op, at); err != nil {
			return err
		}
		if op == 0x0B {
			return nil
		}
	}
}
