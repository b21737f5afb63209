package extism

import (
	"os"
	"slices"
	"testing"
)

// testdata holds the WAT fixtures `make fixtures` builds.
const testdata = "../../../guests/testdata/"

// FuzzExtismBinary reads arbitrary bytes as the Extism loader does: an
// error or a module, never a panic; a module read in full reads the same
// imports when only they are read (Detect's reading), and Detect says it
// is Extism's exactly when it imports from extism:host/env.
func FuzzExtismBinary(f *testing.F) {
	for _, name := range []string{"extism_echo", "extism_oob", "extism_badimport", "extism_noimports", "minimal"} {
		if b, err := os.ReadFile(testdata + name + ".wasm"); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x02\x80\x80\x80\x80\x00"))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		detected := Detect(wasm)
		m, err := parseWasm(wasm, true)
		if err != nil {
			return
		}
		imports, err := parseWasm(wasm, false)
		if err != nil {
			t.Fatalf("the module reads in full but not its imports alone: %v", err)
		}
		if !slices.EqualFunc(m.imports, imports.imports, func(a, b wasmImport) bool { return a.Import == b.Import }) {
			t.Fatalf("imports read in full %v, alone %v", m.imports, imports.imports)
		}
		if want := slices.ContainsFunc(m.imports, func(i wasmImport) bool { return i.Module == extismEnv }); detected != want {
			t.Fatalf("Detect = %v, want %v for imports %v", detected, want, m.imports)
		}
	})
}
