package interrupt_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/morphhost/morph/host/internal/interrupt"
	"github.com/morphhost/morph/host/internal/wasmbin"
	"github.com/morphhost/morph/internal/testenv"
)

// allFeatures is everything wazero v1.12 can compile, for the fixtures that use tail calls, threads,
// exception handling or typed function references, and for the fuzz target.
var allFeatures = api.CoreFeaturesV2 | experimental.CoreFeaturesThreads | experimental.CoreFeaturesTailCall |
	experimental.CoreFeaturesExtendedConst | experimental.CoreFeaturesExceptionHandling |
	experimental.CoreFeaturesTypedFunctionReferences

// wat assembles testdata/name.wat with wat2wasm (with function and local names, and extra flags such as
// --enable-tail-call).
func wat(t testing.TB, name string, flags ...string) []byte {
	t.Helper()
	bin := testenv.Tool(t, "wat2wasm", "tools-wabt")
	out := filepath.Join(t.TempDir(), name+".wasm")
	args := append([]string{"--debug-names", "-o", out, filepath.Join("testdata", name+".wat")}, flags...)
	if msg, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", name, err, msg)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

func instrument(t testing.TB, wasm []byte, budget uint32) []byte {
	t.Helper()
	out, err := interrupt.Instrument(wasm, budget, hostStack)
	if err != nil {
		t.Fatalf("Instrument: %v", err)
	}
	return out
}

// checker is the host side of the check import, as the host will write it: it panics with the call's
// context error once the context is done, which wazero returns from the call. It also counts its calls.
type checker struct {
	calls atomic.Int64
	hook  func() // if set, called on every check; set before the guest runs
}

func (c *checker) check(ctx context.Context) {
	c.calls.Add(1)
	if c.hook != nil {
		c.hook()
	}
	if err := ctx.Err(); err != nil {
		panic(err)
	}
}

// guestCache is shared by the runtimes that compile whole guests, so that TestRealModules and
// TestMergeDataGuests compile a standard Go guest and its instrumented copy once between them (a
// file cache: it outlives each runtime). TestMain sets it.
var guestCache wazero.CompilationCache

// TestMain gives guestCache make test's per-run directory, or a temporary one it removes after.
func TestMain(m *testing.M) { os.Exit(runWithCache(m)) }

func runWithCache(m *testing.M) int {
	dir := os.Getenv(testenv.CompileCacheEnv)
	if dir == "" {
		tmp, err := os.MkdirTemp("", "interrupt-cache")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		panic(err)
	}
	defer c.Close(context.Background())
	guestCache = c
	return m.Run()
}

// guestConfig is the one configuration of the runtimes that share guestCache.
func guestConfig() wazero.RuntimeConfig {
	return wazero.NewRuntimeConfig().WithCoreFeatures(allFeatures).WithCloseOnContextDone(true).WithCompilationCache(guestCache)
}

// errStack is what the tests' StackFunc panics with, as the host's does with its own error.
var errStack = errors.New("stack budget exhausted")

// newRuntime returns a runtime with the imports instantiated, closed at the end of the test.
func newRuntime(t testing.TB, cfg wazero.RuntimeConfig) (wazero.Runtime, *checker) {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	t.Cleanup(func() { r.Close(ctx) })
	c := &checker{}
	_, err := r.NewHostModuleBuilder(interrupt.Module).
		NewFunctionBuilder().WithFunc(c.check).Export(interrupt.Func).
		NewFunctionBuilder().WithFunc(func() { panic(errStack) }).Export(interrupt.StackFunc).
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

// instantiate compiles and instantiates wasm as an anonymous module (so that it can be instantiated again).
func instantiate(t testing.TB, r wazero.Runtime, wasm []byte) api.Module {
	t.Helper()
	ctx := context.Background()
	mod, err := r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	t.Cleanup(func() { mod.Close(ctx) })
	return mod
}

// Hand-assembled modules: for what wat2wasm 1.0.32 cannot write (try_table; call_ref in its final
// encoding) and for malformed input.

func u32(v uint32) []byte { return wasmbin.AppendU32(nil, v) }

func vec(items ...[]byte) []byte {
	return append(u32(uint32(len(items))), bytes.Join(items, nil)...)
}

func str(s string) []byte { return append(u32(uint32(len(s))), s...) }

func sec(id byte, payload ...[]byte) []byte {
	p := bytes.Join(payload, nil)
	return append(append([]byte{id}, u32(uint32(len(p)))...), p...)
}

// body is a function body: the locals' and the code's bytes, size-prefixed.
func body(code ...byte) []byte { return append(u32(uint32(len(code))), code...) }

func module(sections ...[]byte) []byte {
	return append([]byte("\x00asm\x01\x00\x00\x00"), bytes.Join(sections, nil)...)
}

// typedModule uses exception handling and typed function references (hand-assembled: wat2wasm 1.0.32 knows
// neither in its final encoding): a table initialiser, a tag section, try_table with all four kinds of catch
// clause, throw, call_ref, return_call_ref, ref.as_non_null, br_on_null, ref.null of a concrete type and of
// exn, and block types that are a type index or a (ref null t). Its exports are all (i32) -> (i32):
// callref, brnull, fromtable and tailref double their argument; catch(n) loops n times, then throws 42,
// catches it and returns it; catchref returns 7 and catchall 44, both thrown and caught.
func typedModule() []byte {
	return module(
		sec(1, vec(
			[]byte{0x60, 1, 0x7F, 1, 0x7F},   // 0: (i32) -> (i32)
			[]byte{0x60, 1, 0x7F, 0},         // 1: (i32) -> (), the tag
			[]byte{0x60, 0, 2, 0x7F, 0x69})), // 2: () -> (i32 exnref)
		sec(3, vec(u32(0), u32(0), u32(0), u32(0), u32(0), u32(0), u32(0), u32(0))),
		sec(4, vec([]byte{0x40, 0, 0x70, 0, 1, 0xD2, 0, 0x0B})), // funcref table [ref.func 0]
		sec(13, vec([]byte{0, 1})),                              // tag (i32)
		sec(7, vec(append(str("callref"), 0, 1), append(str("brnull"), 0, 2), append(str("catch"), 0, 3),
			append(str("fromtable"), 0, 4), append(str("tailref"), 0, 5), append(str("catchref"), 0, 6),
			append(str("catchall"), 0, 7))),
		sec(9, vec([]byte{3, 0, 1, 0})), // declare func 0
		sec(10, vec(
			body(0, 0x20, 0, 0x41, 1, 0x74, 0x0B),                         // double: x << 1
			body(0, 0x20, 0, 0x02, 0x63, 0, 0xD2, 0, 0x0B, 0x14, 0, 0x0B), // call_ref (block (result (ref null 0)) ref.func 0)
			body(1, 1, 0x63, 0, // local (ref null 0)
				0xD0, 0, 0xD1, 0x1A, // ref.null 0, ref.is_null, drop
				0xD2, 0, 0x21, 1, // local.set 1 (ref.func 0)
				0x02, 0x40, 0x20, 0, 0x20, 1, 0xD4, 0xD5, 0, 0x14, 0, 0x0F, 0x0B, // block: br_on_null, call_ref, return
				0x41, 0x7F, 0x0B),
			body(0, 0x02, 0x7F, // block (result i32)
				0x1F, 0x40, 1, 0, 0, 0, // try_table (catch tag 0 -> label 0)
				0x03, 0x40, 0x20, 0, 0x41, 1, 0x6B, 0x22, 0, 0x0D, 0, 0x0B, // loop: x--, br_if
				0x41, 42, 0x08, 0, // throw 0 (42)
				0x0B, 0x41, 0x7F, 0x0B, 0x0B),
			body(0, 0x20, 0, 0x41, 0, 0x11, 0, 0, 0x0B), // call_indirect through the initialised table
			body(0, 0x20, 0, 0xD2, 0, 0x15, 0, 0x0B),    // return_call_ref $double
			body(0, 0x02, 2, 0x02, 0x69, // block (type 2), block (result exnref)
				0x1F, 0x40, 2, 1, 0, 1, 3, 0, // try_table (catch_ref tag 0 -> 1) (catch_all_ref -> 0)
				0x41, 7, 0x08, 0, 0x0B, 0x00, // throw 0 (7), end, unreachable
				0x0B, 0x1A, 0x41, 0, 0xD0, 0x69, // end, drop, i32.const 0, ref.null exn
				0x0B, 0x1A, 0x0B), // end, drop the exnref: the tag's 7
			body(0, 0x02, 0x40, 0x1F, 0x40, 1, 2, 0, 0x41, 7, 0x08, 0, 0x0B, 0x0B, // block (try_table (catch_all -> 0) throw)
				0x41, 44, 0x0B),
		)))
}

// recGroupModule declares its types in a recursive type group (0x4E, from the GC proposal, which wazero
// accepts): three types in two entries of the type section, so the added type's index must be 3, not 2.
func recGroupModule() []byte {
	return module(
		sec(1, vec([]byte{0x4E, 2, 0x60, 0, 0, 0x60, 1, 0x7F, 0}, []byte{0x60, 0, 1, 0x7F})),
		sec(3, vec(u32(2))),
		sec(7, vec(append(str("answer"), 0, 0))),
		sec(10, vec(body(0, 0x41, 42, 0x0B))))
}

// cat concatenates pieces of code.
func cat(pieces ...[]byte) []byte { return bytes.Join(pieces, nil) }

// repeat is n copies of code.
func repeat(n int, code ...byte) []byte { return bytes.Repeat(code, n) }

// i32c is i32.const v.
func i32c(v int32) []byte { return wasmbin.AppendS32([]byte{0x41}, v) }

// limits is a memory's or table's limits with a maximum.
func limits(min, max uint32) []byte { return append(append([]byte{1}, u32(min)...), u32(max)...) }

// export exports the function idx as name.
func export(name string, idx uint32) []byte { return append(append(str(name), 0), u32(idx)...) }
