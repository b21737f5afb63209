package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/internal/testenv"
)

// FuzzLoad loads arbitrary bytes as a module: whatever they are, Load
// returns a plugin or an error, never a panic.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"minimal", "echo", "trap", "nomarker", "badjson"} {
		if b, err := os.ReadFile("../guests/testdata/" + name + ".wasm"); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte("not wasm"))
	l, err := NewLoader(LoaderOptions{CacheDir: "off"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, wasm []byte) {
		p, err := l.Load(context.Background(), Config{Name: "fuzz", Wasm: wasm, Limits: Limits{MemoryMiB: 4}})
		if err == nil {
			p.Close(context.Background())
		}
	})
}

// FuzzDecodeOutput feeds arbitrary guest output to the decoding every
// adapter uses (through the echo guest, which answers its input): a typed
// error or a payload, never a panic.
func FuzzDecodeOutput(f *testing.F) {
	f.Add([]byte(`{"system_prompt":"x"}`))
	f.Add([]byte(`{"thought":"t","output":{"a":[1,2,{"b":null}]},"plan":{"steps":["s",{"step":"x","status":"done"}]}}`))
	f.Add([]byte(`{"parameters":{"temperature":"hot"}}`))
	f.Add([]byte(`[`))
	wasm := testenv.File(f, "../guests/testdata/echo.wasm", "fixtures")
	l, err := NewLoader(LoaderOptions{CacheDir: "off"})
	if err != nil {
		f.Fatal(err)
	}
	p, err := l.Load(context.Background(), Config{Wasm: wasm})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		ctx := context.Background()
		var raw json.RawMessage = out
		if !json.Valid(out) {
			raw, _ = json.Marshal(string(out)) // the echo guest answers its input, which must be JSON to be sent
		}
		invoke[abi.PromptOutput](ctx, p, abi.ExportBuildPrompt, raw)
		invoke[*abi.Final](ctx, p, abi.ExportBuildPrompt, raw)
		invoke[abi.ParamsOutput](ctx, p, abi.ExportBuildPrompt, raw)
		invoke[abi.BeforeToolCallOutput](ctx, p, abi.ExportBuildPrompt, raw)
		invoke[abi.Manifest](ctx, p, abi.ExportBuildPrompt, raw)
	})
}

// recipe reads a hostile guest's plan from fuzz input: each read takes
// the next bytes, or zeros once they run out.
type recipe struct{ b []byte }

func (r *recipe) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// u32 reads a little-endian u32: extreme values are the point.
func (r *recipe) u32() uint32 {
	return uint32(r.byte()) | uint32(r.byte())<<8 | uint32(r.byte())<<16 | uint32(r.byte())<<24
}

// fuzzGuest builds a valid guest from the recipe: its declared sizes
// (locals, a table, memory, extra functions) and build_prompt's body, a
// sequence of stack-neutral snippets (nested blocks and loops, branches
// back, bulk memory and table operations of any size, memory growth, WASI
// sleeps, random bytes and writes, log calls, recursion, traps), each with
// operands from the recipe.
func fuzzGuest(in []byte) guestModule {
	r := &recipe{b: in}
	flags := r.byte()
	g := guestModule{name: "fuzz", imports: []guestImport{importPollOneoff, importRandomGet, importFdWrite}}
	if flags&1 != 0 {
		g.extismABI = true
	} else {
		g.imports = append(g.imports, importLog)
	}
	locals := r.u32()
	g.locals = append(append([]byte{1}, leb(uint64(locals))...), 0x7F)
	local := func() uint64 { // build_prompt's first own local (after its two parameters in ABI v1)
		if g.extismABI {
			return 0
		}
		return 2
	}
	if flags&2 != 0 {
		table := []byte{0x70, 0}
		if flags&4 != 0 {
			table[1] = 1
			table = append(append(table, leb(uint64(r.u32()))...), leb(uint64(r.u32()))...)
		} else {
			table = append(table, leb(uint64(r.u32()))...)
		}
		g.tables = [][]byte{table}
	}
	if flags&8 != 0 {
		min, max := r.u32()&0xFFFF, r.u32()&0xFFFF
		g.memory = append(append([]byte{1}, leb(uint64(min))...), leb(uint64(max))...)
	}
	// f(n): recursion to depth n, through a function of its own.
	g.types = [][]byte{{0x60, 1, 0x7F, 0}}
	g.funcs = []guestFunc{{typ: 0, body: append(append([]byte{0, 0x20, 0, 0x04, 0x40, 0x20, 0, 0x41, 1, 0x6B, 0x10}, leb(g.fn(4))...), 0x0B, 0x0B)}}
	for range int(r.byte()) * 64 { // extra functions
		g.funcs = append(g.funcs, guestFunc{typ: 0, body: []byte{0, 0x0B}})
	}
	var body []byte
	open := []byte{} // the constructs open: 0x02 block, 0x03 loop
	n := func() []byte { return i32const(int64(int32(r.u32()))) }
	for steps := 0; len(r.b) > 0 && steps < 4096 && len(body) < 4<<20; steps++ { // past FunctionBytes: refused, but not built for long
		switch op := r.byte() % 16; op {
		case 0:
			body = append(body, bytes.Repeat([]byte{0x01}, int(r.u32()%(1<<20)))...) // straight-line nops
		case 1, 2:
			kind := byte(0x02 + op - 1) // block or loop
			body, open = append(body, kind, 0x40), append(open, kind)
		case 3:
			if len(open) > 0 {
				body, open = append(body, 0x0B), open[:len(open)-1]
			}
		case 4: // branch back to the innermost loop: a loop forever, unless something ends it
			for i := len(open) - 1; i >= 0; i-- {
				if open[i] == 0x03 {
					body = append(append(body, 0x0C), leb(uint64(len(open)-1-i))...)
					break
				}
			}
		case 5: // memory.fill
			body = append(append(append(append(body, n()...), n()...), n()...), 0xFC, 11, 0)
		case 6: // memory.copy
			body = append(append(append(append(body, n()...), n()...), n()...), 0xFC, 10, 0, 0)
		case 7: // table.grow, when there is a table
			if g.tables != nil {
				body = append(append(append(body, 0xD0, 0x70), n()...), 0xFC, 15, 0, 0x1A)
			}
		case 8: // memory.grow
			body = append(append(body, n()...), 0x40, 0, 0x1A)
		case 9: // random_get
			body = append(append(append(append(body, n()...), n()...), g.call(importRandomGet)...), 0x1A)
		case 10: // a sleep
			body = append(body, g.sleepFor(time.Duration(r.u32())*time.Millisecond)...)
		case 11: // fd_write of an iovec count from the recipe
			body = append(append(append(append(append(append(body, i32const(1)...), n()...), n()...), n()...), g.call(importFdWrite)...), 0x1A)
		case 12: // a log call (ABI v1)
			if !g.extismABI {
				body = append(append(append(append(body, n()...), n()...), n()...), g.call(importLog)...)
			}
		case 13: // recursion
			body = append(append(append(body, n()...), 0x10), leb(g.fn(4))...)
		case 14:
			body = append(body, 0x00) // unreachable
		case 15: // a counter loop: local += 1, branch back while below n
			body = append(body, times(int(r.u32()%(1<<24)), byte(local()), nil)...)
		}
	}
	for range open {
		body = append(body, 0x0B)
	}
	g.attack = body
	return g
}

// FuzzHostileModule builds valid guests of extreme declared sizes and
// bodies (fuzzGuest) and runs them: whatever the guest, Load returns a
// plugin or a typed error, a call ends within a bound of its deadline with
// a typed error or an answer, no failure's text is over its limit, and
// Close returns. The process surviving is the rest of the assertion.
func FuzzHostileModule(f *testing.F) {
	// Layout: flags (1 Extism, 2 a table, 4 with a maximum, 8 a memory of
	// its own), locals (u32), table sizes, memory sizes, extra functions (a
	// byte, times 64), then the snippets and their operands. Each seed runs
	// in both conventions, under the same bounds: an Extism guest is
	// instrumented as a native one.
	for _, seed := range [][]byte{
		{0},
		{0, 0xFF, 0xFF, 0xFF, 0xFF},             // billions of locals
		{2, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0x7F}, // a huge table
		{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 7, 0, 0, 0x80, 0, 4},                                     // table.grow of 8M in a loop
		{8, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xF0, 0, 4}, // a loop of 15 MiB fills
		{9, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 9, 0, 0, 0, 0, 0, 0, 0xF0, 0, 4},             // an Extism loop of random_get
		{1, 0, 0, 0, 0, 0, 10, 0x30, 0x75, 0, 0},                                                   // an Extism guest sleeping 30 s
		{0, 0, 0, 0, 0, 0, 13, 0xFF, 0xFF, 0xFF, 0x7F},                                             // deep recursion
		{8, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 2, 8, 1, 0, 0, 0, 4},                            // memory growth in a loop
		{0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0x0F, 0},                                                 // a million nops
		{0, 1, 0, 0, 0, 4, 2, 2, 2, 2, 15, 0xFF, 0xFF, 0xFF, 0, 4},                                 // 256 extra functions, nested loops
		// The same with no local: the loop's local.tee 2 names a local the
		// module does not have, which, once instrumented, is the counter's
		// copy (the guest resets it forever unless the rewrite refuses it).
		{0, 0, 0, 0, 0, 4, 2, 2, 2, 2, 15, 0xFF, 0xFF, 0xFF, 0, 4},
	} {
		f.Add(seed)
		if seed[0]&1 == 0 {
			f.Add(append([]byte{seed[0] | 1}, seed[1:]...)) // the same guest, Extism's
		}
	}
	const timeout = 100 * time.Millisecond
	f.Fuzz(func(t *testing.T, in []byte) {
		l, err := NewLoader(LoaderOptions{CacheDir: "off"})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close(context.Background())
		wasm := fuzzGuest(in).wasm()
		start := time.Now()
		p, err := l.Load(context.Background(), Config{Name: "fuzz", Wasm: wasm,
			Limits: Limits{Timeout: timeout, MemoryMiB: 16, MaxOutputBytes: 64 << 10}})
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("loading a module of %d bytes took %v", len(wasm), took)
		}
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Load failed with an untyped error: %v", err)
			}
			return
		}
		start = time.Now()
		_, err = p.Call(context.Background(), abi.ExportBuildPrompt, []byte(`{}`))
		if took := time.Since(start); took > timeout+time.Second {
			t.Fatalf("the call took %v, deadline %v: %v", took, timeout, err)
		}
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("untyped failure (%T): %.500v", err, err)
			}
			if n := len(err.Error()); n > 2*DefaultMaxErrorBytes+512 {
				t.Fatalf("unbounded failure: %d bytes, want at most %d: %.500v", n, 2*DefaultMaxErrorBytes+512, err)
			}
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
}
