package wasmbin

// Section ids (spec 5.5.2; 13 is exception handling's tag section).
const (
	IDCustom    = 0
	IDType      = 1
	IDImport    = 2
	IDFunction  = 3
	IDTable     = 4
	IDMemory    = 5
	IDGlobal    = 6
	IDExport    = 7
	IDStart     = 8
	IDElement   = 9
	IDCode      = 10
	IDData      = 11
	IDDataCount = 12
	IDTag       = 13
)

// Order is each known non-custom section's place in a module, 0 for an unknown id. The tag section sits
// between memory and global, the data count section between element and code.
var Order = [...]int{IDType: 1, IDImport: 2, IDFunction: 3, IDTable: 4, IDMemory: 5, IDTag: 6, IDGlobal: 7,
	IDExport: 8, IDStart: 9, IDElement: 10, IDDataCount: 11, IDCode: 12, IDData: 13}

// SectionNames name the sections in errors, as wasm-objdump does.
var SectionNames = [...]string{IDCustom: "custom", IDType: "type", IDImport: "import", IDFunction: "function",
	IDTable: "table", IDMemory: "memory", IDGlobal: "global", IDExport: "export", IDStart: "start",
	IDElement: "element", IDCode: "code", IDData: "data", IDDataCount: "data count", IDTag: "tag"}

// Section is one section of a module.
type Section struct {
	ID    byte
	Start int    // offset of the id byte: a section copied unchanged keeps its original header
	Body  Reader // the payload
}

// Sections returns the sections of the binary module wasm (see Walk).
func Sections(wasm []byte) ([]Section, error) {
	var sections []Section
	err := Walk(wasm, func(s Section) error {
		sections = append(sections, s)
		return nil
	})
	return sections, err
}

// Walk checks the header and the section order of the binary module wasm and calls fn on each section in
// turn, with a Reader over its payload, until fn returns an error, which Walk returns.
func Walk(wasm []byte, fn func(Section) error) error {
	r := NewReader(wasm, "header")
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return r.Malformed(0, "not a WebAssembly binary module (no \\0asm magic)")
	}
	if string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return r.Malformed(4, "binary format version %x, want 1", wasm[4:8])
	}
	r.Pos = 8
	last := 0
	for r.Remaining() > 0 {
		start := r.Pos
		id, _ := r.Byte() // cannot fail: Remaining > 0
		if id != IDCustom && (int(id) >= len(Order) || Order[id] == 0) {
			r.Section = "unknown"
			return r.Malformed(start, "unknown section id %d", id)
		}
		r.Section = SectionNames[id]
		body, err := r.Sized()
		if err != nil {
			return err
		}
		if id != IDCustom {
			if Order[id] <= last {
				return r.Malformed(start, "section out of order or repeated")
			}
			last = Order[id]
		}
		if err := fn(Section{ID: id, Start: start, Body: body}); err != nil {
			return err
		}
	}
	return nil
}
