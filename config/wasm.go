package config

import (
	"math"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/host"
)

// Wasm is the [wasm] table.
type Wasm struct {
	// CacheDir holds compiled modules across runs; empty means the user
	// cache directory, "off" compiles in memory only.
	CacheDir string `toml:"cache_dir"`
	// Limits is the [wasm.limits] table: what any module may declare.
	Limits ModuleLimits `toml:"limits"`
}

// ModuleLimits is the [wasm.limits] table: what a module may declare before
// morph compiles it (see host.ModuleLimits: a module over one is refused,
// naming the key to raise). Absent keys take the host's defaults, far
// above what real guests declare; raise one only for a module you trust.
type ModuleLimits struct {
	ModuleMB        int   `toml:"module_mb"`        // the module file (64)
	CodeMB          int   `toml:"code_mb"`          // all function bodies (16)
	FunctionKB      int   `toml:"function_kb"`      // one function body (2048)
	Functions       int   `toml:"functions"`        // imported and defined (200000)
	FunctionLocals  int   `toml:"function_locals"`  // locals of one function (50000)
	TotalLocals     int   `toml:"total_locals"`     // locals of all functions (4000000)
	NestingDepth    int   `toml:"nesting_depth"`    // blocks open at once in one function (2000)
	NestingCost     int64 `toml:"nesting_cost"`     // the sum of the functions' nesting depths squared (100000000)
	Types           int   `toml:"types"`            // (100000)
	TypeArity       int   `toml:"type_arity"`       // parameters or results of one type (1000)
	Imports         int   `toml:"imports"`          // (10000)
	Exports         int   `toml:"exports"`          // (100000)
	Globals         int   `toml:"globals"`          // (100000)
	Tables          int   `toml:"tables"`           // (100)
	TableEntries    int   `toml:"table_entries"`    // all tables' entries, initial and grown (1048576)
	ElementSegments int   `toml:"element_segments"` // (100000)
	ElementItems    int   `toml:"element_items"`    // (1048576)
	DataSegments    int   `toml:"data_segments"`    // (100000)
	Tags            int   `toml:"tags"`             // (10000)
	CustomSections  int   `toml:"custom_sections"`  // (1000)
	Names           int   `toml:"names"`            // entries of the name section (1048576)
	NameKB          int   `toml:"name_kb"`          // one name (64)
}

// Host is the limits for package host; zero fields take its defaults.
func (m ModuleLimits) Host() host.ModuleLimits {
	u := func(n int) uint32 { return uint32(min(max(n, 0), math.MaxUint32)) }
	return host.ModuleLimits{
		ModuleBytes: m.ModuleMB << 20, CodeBytes: m.CodeMB << 20, FunctionBytes: u(m.FunctionKB << 10),
		Functions: u(m.Functions), FunctionLocals: u(m.FunctionLocals), TotalLocals: uint64(max(m.TotalLocals, 0)),
		NestingDepth: u(m.NestingDepth), NestingCost: uint64(max(m.NestingCost, 0)), Types: u(m.Types),
		TypeArity: u(m.TypeArity), Imports: u(m.Imports), Exports: u(m.Exports), Globals: u(m.Globals),
		Tables: u(m.Tables), TableEntries: u(m.TableEntries), ElementSegments: u(m.ElementSegments),
		ElementItems: u(m.ElementItems), DataSegments: u(m.DataSegments), Tags: u(m.Tags),
		CustomSections: u(m.CustomSections), Names: u(m.Names), NameBytes: u(m.NameKB << 10),
	}
}

// moduleLimits checks that each [wasm.limits] key set is from 1 to what
// its setting can hold.
func (v *validator) moduleLimits() {
	rv := reflect.ValueOf(v.c.Wasm.Limits)
	for i := range rv.NumField() {
		name := rv.Type().Field(i).Tag.Get("toml")
		key := toml.Key{"wasm", "limits", name}
		top := int64(math.MaxUint32)
		switch {
		case strings.HasSuffix(name, "_mb"):
			top = host.MemoryCeilingMiB
		case strings.HasSuffix(name, "_kb"):
			top = MaxKB
		case name == "nesting_cost":
			top = math.MaxInt64
		}
		if n := rv.Field(i).Int(); v.md.IsDefined(key...) && (n < 1 || n > top) {
			v.fail(key, nil, "must be from 1 to %d, got %d (leave it out for the default)", top, n)
		}
	}
}
