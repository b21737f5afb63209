package extism

import (
	"context"
	"os"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/morphhost/morph/host/internal/wasmbin"
	"github.com/morphhost/morph/internal/testenv"
)

// testdata holds the WAT fixtures `make fixtures` builds.
const testdata = "../../../guests/testdata/"

// renameImports changes the module name of the chosen imports only, and the
// result is a valid module with the same exports and function imports in
// the same order.
func TestRenameImports(t *testing.T) {
	wasm := testenv.File(t, testdata+"extism_oob.wasm", "fixtures")
	info, err := parseWasm(wasm, true)
	if err != nil {
		t.Fatal(err)
	}
	out := renameImports(wasm, info, extismEnv, extismMorphEnv, extismOverridden)
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	compiled, err := r.CompileModule(ctx, out)
	if err != nil {
		t.Fatalf("the renamed module does not compile: %v", err)
	}
	got := compiled.ImportedFunctions()
	if len(got) != len(info.imports) {
		t.Fatalf("%d imports, want %d", len(got), len(info.imports))
	}
	renamed := 0
	for i, def := range got {
		mod, name, _ := def.Import()
		wantMod := info.imports[i].Module
		if wantMod == extismEnv && extismOverridden[name] {
			wantMod = extismMorphEnv
			renamed++
		}
		if mod != wantMod || name != info.imports[i].Name {
			t.Errorf("import %d is %s.%s, want %s.%s", i, mod, name, wantMod, info.imports[i].Name)
		}
	}
	if renamed != 2 { // output_set and log_info
		t.Fatalf("%d imports renamed, want 2", renamed)
	}
	if len(compiled.ExportedFunctions()) != len(info.exports) {
		t.Fatalf("exports %d, want %d", len(compiled.ExportedFunctions()), len(info.exports))
	}
}

// FuzzExtismBinary reads arbitrary bytes as the Extism loader does: an
// error or a module, never a panic; and what it reads, renamed, reads back
// the same but for the renamed imports.
func FuzzExtismBinary(f *testing.F) {
	for _, name := range []string{"extism_echo", "extism_oob", "extism_badimport", "minimal"} {
		if b, err := os.ReadFile(testdata + name + ".wasm"); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x02\x80\x80\x80\x80\x00"))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		_ = Detect(wasm)
		m, err := parseWasm(wasm, true)
		if err != nil || m.importHead == 0 {
			return
		}
		out := renameImports(wasm, m, extismEnv, extismMorphEnv, extismOverridden)
		back, err := parseWasm(out, true)
		if err != nil {
			t.Fatalf("renamed module does not read back: %v (from %v)", err, m)
		}
		if len(back.imports) != len(m.imports) {
			t.Fatalf("renamed module reads back with %d imports, want %d (%v, from %v)", len(back.imports), len(m.imports), back, m)
		}
		if len(back.exports) != len(m.exports) {
			t.Fatalf("renamed module reads back with %d exports, want %d (%v, from %v)", len(back.exports), len(m.exports), back, m)
		}
		for i, imp := range m.imports {
			if imp.Kind == wasmbin.KindFunction && imp.Module == extismEnv && extismOverridden[imp.Name] {
				imp.Module = extismMorphEnv
			}
			got := back.imports[i]
			if got.Module != imp.Module {
				t.Fatalf("import %d (%s) reads back from module %q, want %q", i, imp.Name, got.Module, imp.Module)
			}
			if got.Name != imp.Name {
				t.Fatalf("import %d reads back named %q, want %q", i, got.Name, imp.Name)
			}
			if !got.fn.Equal(imp.fn) {
				t.Fatalf("import %d (%s.%s) reads back as %s, want %s", i, imp.Module, imp.Name, signature(got.fn), signature(imp.fn))
			}
		}
	})
}
