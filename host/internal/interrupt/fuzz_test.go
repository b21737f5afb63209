package interrupt_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// FuzzInstrument feeds arbitrary bytes to Instrument. Whatever they are, it returns a module or an error,
// never a panic; and when wazero (every feature enabled) compiles the input, Instrument must succeed,
// unless the module cannot be instrumented, wazero must compile the output, the plan must keep its
// bounds (checkPlan), and the output must instantiate as the input does, with the same memory (the merge
// of data segments): the rewrite neither refuses what wazero accepts nor breaks it, nor leaves it long
// unchecked. The same holds of the rewrite for snapshots after it (wasmbin.PrepareSnapshot), which the
// host applies to every native plugin.
func FuzzInstrument(f *testing.F) {
	if _, err := exec.LookPath("wat2wasm"); err == nil {
		f.Add(wat(f, "semantics"))
		f.Add(wat(f, "loops"))
		f.Add(wat(f, "tailcall", "--enable-tail-call"))
		f.Add(wat(f, "threads", "--enable-threads"))
	}
	guests, _ := filepath.Glob("../../../guests/testdata/*.wasm")
	for _, path := range guests {
		if b, err := os.ReadFile(path); err == nil && len(b) < 4096 {
			f.Add(b)
		}
	}
	f.Add(module(memory(1), sec(11, vec(active(100, "AAAA"), active(98, "BB"), active(pageSize-1, "C"), passive("p")))))
	f.Add(typedModule())
	f.Add(recGroupModule())
	f.Add(module())
	f.Add([]byte("not wasm"))

	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(allFeatures))
	f.Cleanup(func() { r.Close(ctx) })
	compiles := func(wasm []byte) (ok bool) {
		defer func() {
			if recover() != nil { // a wazero bug: the input counts as not compiling, the output fails
				ok = false
			}
		}()
		c, err := r.CompileModule(ctx, wasm)
		if err == nil {
			c.Close(ctx)
		}
		return err == nil
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := interrupt.Instrument(in, 3, hostStack)
		if err != nil && !errors.Is(err, wasmbin.ErrMalformed) && !errors.Is(err, interrupt.ErrUnsupported) {
			t.Fatalf("error of no kind: %v", err)
		}
		if hugeCount(in) || !compiles(in) {
			return
		}
		if err != nil {
			if !errors.Is(err, interrupt.ErrUnsupported) && !wazeroTableLaxness(err) {
				t.Fatalf("wazero compiles the input, Instrument fails: %v", err)
			}
			return
		}
		if !compiles(out) {
			_, cerr := r.CompileModule(ctx, out)
			t.Fatalf("wazero compiles the input, not the output: %v", cerr)
		}
		checkPlan(t, "input", in)
		// The merge of data segments: an instance starts with the same memory, or fails alike.
		want, werr := instantiated(t, in)
		got, gerr := instantiated(t, out)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("the input instantiates with %v, the output with %v; same memory: %v", werr, gerr, bytes.Equal(got, want))
		}
		// The host's next rewrite, for snapshots: it refuses or keeps the module valid.
		if snap, _, err := wasmbin.PrepareSnapshot(out); err == nil && !compiles(snap) {
			_, cerr := r.CompileModule(ctx, snap)
			t.Fatalf("wazero compiles the instrumented module, not its rewrite for snapshots: %v", cerr)
		}
	})
}

// wazeroTableLaxness reports whether err is Instrument refusing a table whose element type is no value
// type, which wazero 1.12 compiles: its binary.decodeTable takes any byte there (its default case) once
// reference types are on. The refusal is the right answer, the spec allowing only a reference type; a
// global's or a function type's bad value type wazero refuses too, so only a table's reaches here.
func wazeroTableLaxness(err error) bool {
	return errors.Is(err, wasmbin.ErrMalformed) && strings.Contains(err.Error(), "invalid value type") &&
		(strings.Contains(err.Error(), "import section") || strings.Contains(err.Error(), "table section"))
}

// hugeCount reports whether wasm may declare a vector of 2^21 entries or more: a LEB128 of 4 bytes or
// more, so three bytes in a row with the continuation bit. wazero allocates a declared vector before
// reading its entries, so a lying count of 2^32 would exhaust the fuzzer's memory inside wazero (2^21 costs
// it a few hundred MB at most). Instrument never allocates by a declared count, and still runs on them.
func hugeCount(wasm []byte) bool {
	for i := 2; i < len(wasm); i++ {
		if wasm[i-2]&wasm[i-1]&wasm[i]&0x80 != 0 {
			return true
		}
	}
	return false
}
