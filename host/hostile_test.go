package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/guest"
)

// The hostile matrix, part two: modules written to take the host down by
// what they declare or by the work and output they make the host do. Each
// case asserts a typed error or the specification's behaviour, bounded time
// and memory, the host still serving, and an agent run that still ends with
// its final. SECURITY.md maps each class to its tests.

// peakRSS runs fn and returns how far the process's peak resident memory
// rose above what it held before (Linux: /proc/self/status VmHWM, reset
// through /proc/self/clear_refs). ok is false where that is not available.
func peakRSS(t *testing.T, fn func()) (grew int64, ok bool) {
	t.Helper()
	read := func(field string) int64 {
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return -1
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if rest, found := strings.CutPrefix(line, field+":"); found {
				kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
				return kb << 10
			}
		}
		return -1
	}
	debug.FreeOSMemory() // what the heap held before is not counted as held after
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		fn()
		return 0, false
	}
	before := read("VmRSS")
	fn()
	return read("VmHWM") - before, before >= 0
}

// runEndsWithFinal runs an agent whose hooks include p's and checks that the
// run still ends with its final.
func runEndsWithFinal(t *testing.T, p *Plugin) {
	t.Helper()
	final, _, err := engine.New(finalModel{}, nil, p.hookOptions()...).Run(context.Background(), "t", engine.RunOptions{})
	checkFinal(t, "run", final, err, "ok")
}

// loaders are the guest's two conventions, by the loader each goes to.
var loaders = []struct {
	name string
	as   func(guestModule) guestModule
}{
	{LoaderNative, func(g guestModule) guestModule { return g }},
	{LoaderExtism, guestModule.extism},
}

// The assembled guest works as the ABI says, in both conventions: the
// matrix's attacks are changes of one part of it.
func TestAssembledGuest(t *testing.T) {
	for _, lc := range loaders {
		t.Run(lc.name, func(t *testing.T) {
			wasm := lc.as(guestModule{name: "asm"}).wasm()
			p := load(t, newLoader(t), Config{Wasm: wasm})
			out, err := invoke[abi.PromptOutput](context.Background(), p, abi.ExportBuildPrompt, abi.PromptInput{Task: "t"})
			if p.Name() != "asm" {
				t.Errorf("Name = %q, want asm", p.Name())
			}
			if p.Loader() != lc.name {
				t.Errorf("Loader = %s, want %s", p.Loader(), lc.name)
			}
			if err != nil {
				t.Fatalf("build_prompt: %v", err)
			}
			if out.SystemPrompt != "ok" {
				t.Errorf("build_prompt's SystemPrompt = %q, want ok", out.SystemPrompt)
			}
		})
	}
}

// A memory cap past what a 32-bit memory addresses is refused at load in
// both conventions, naming memory_mb (wazero panicked on it before).
func TestMemoryCeiling(t *testing.T) {
	for _, lc := range loaders {
		t.Run(lc.name, func(t *testing.T) {
			_, err := newLoader(t).Load(context.Background(), Config{Wasm: lc.as(guestModule{name: "asm"}).wasm(),
				Limits: Limits{MemoryMiB: MemoryCeilingMiB + 1}})
			if !errors.Is(err, ErrLoad) || !strings.Contains(err.Error(), "memory_mb = 4097") {
				t.Fatalf("memory_mb %d: %v, want ErrLoad naming memory_mb", MemoryCeilingMiB+1, err)
			}
		})
	}
}

// Class 1, decoding bombs: a module declaring more than real guests ever do
// is refused before wazero allocates by its declarations (without the
// check, the billions of locals kill the test process: "fatal error: out of
// memory"), with an error naming the limit, the value and the setting.
func TestDecodingBombs(t *testing.T) {
	cases := []struct {
		name    string
		g       guestModule
		setting string
	}{
		{"billions of locals", guestModule{locals: append(append([]byte{1}, leb(0xFFFFFFFF)...), 0x7F)}, "function_locals"},
		{"a huge function", guestModule{attack: bytes.Repeat([]byte{0x01}, 3<<20)}, "function_kb"}, // 3 MiB of nop
		{"a huge table", guestModule{tables: [][]byte{append([]byte{0x70, 0}, leb(1<<31)...)}}, "table_entries"},
		{"nesting", guestModule{attack: append(bytes.Repeat([]byte{0x02, 0x40}, 5000), bytes.Repeat([]byte{0x0B}, 5000)...)}, "nesting_depth"},
	}
	l := newLoader(t)
	for _, c := range cases {
		for _, lc := range loaders {
			t.Run(c.name+"/"+lc.name, func(t *testing.T) {
				wasm := lc.as(c.g).wasm()
				if got := loaderOf(wasm, Config{}).name; got != lc.name {
					t.Fatalf("the module goes to the %s loader", got)
				}
				var err error
				grew, measured := peakRSS(t, func() {
					_, err = l.Load(context.Background(), Config{Name: "bomb", Wasm: wasm})
				})
				checkErr(t, "Load", err, ErrLoad, "over the limit", c.setting, `"bomb"`)
				if measured && grew > 64<<20 {
					t.Fatalf("refusing the module took %d MB", grew>>20)
				}
			})
		}
	}
}

// Class 2, tables outside memory_mb: a table without a maximum grows only up
// to the loader's TableEntries (table.grow past it answers -1, as the
// specification says of a failed growth), so a guest cannot make the host
// allocate 8 bytes per entry without bound. Without the cap, the grow of 8
// million entries succeeds (answering 0) and the host holds 64 MB more.
func TestTableGrowthCapped(t *testing.T) {
	// build_prompt: unless table.grow 0 by 8M null entries answers -1, trap.
	attack := append(append([]byte{0xD0, 0x70}, i32const(8<<20)...), 0xFC, 15, 0, 0x41, 0x7F, 0x47, 0x04, 0x40, 0x00, 0x0B)
	for _, lc := range loaders {
		t.Run(lc.name, func(t *testing.T) {
			p := load(t, newLoader(t), Config{Name: "grower", Wasm: lc.as(guestModule{attack: attack, tables: [][]byte{{0x70, 0, 0}}}).wasm(),
				Limits: Limits{MemoryMiB: 2, MaxOutputBytes: 64 << 10}})
			var err error
			grew, measured := peakRSS(t, func() {
				_, err = invoke[abi.PromptOutput](context.Background(), p, abi.ExportBuildPrompt, abi.PromptInput{})
			})
			if err != nil {
				t.Fatalf("table.grow past the cap did not answer -1: %v", err)
			}
			if measured && grew > 32<<20 {
				t.Fatalf("the host grew %d MB", grew>>20)
			}
			runEndsWithFinal(t, p)
		})
	}
}

// sleepFor is code that asks WASI's poll_oneoff for a relative clock
// subscription of d, written at 8192 in guest memory (events at 8256, their
// count at 8320).
func (g guestModule) sleepFor(d time.Duration) []byte {
	code := append(i32const(8192+24), 0x42)                    // the subscription's timeout
	code = append(append(code, sleb(int64(d))...), 0x37, 3, 0) // i64.store
	code = append(code, i32const(8192)...)
	code = append(code, i32const(8256)...)
	code = append(code, i32const(1)...)
	code = append(code, i32const(8320)...)
	return append(append(code, g.call(importPollOneoff)...), 0x1A) // drop the errno
}

// forever is a loop running body over and over.
func forever(body []byte) []byte {
	return append(append([]byte{0x03, 0x40}, body...), 0x0C, 0, 0x0B)
}

// callWithin calls build_prompt and returns its error and how long it took.
func callWithin(p *Plugin) (time.Duration, error) {
	start := time.Now()
	_, err := invoke[abi.PromptOutput](context.Background(), p, abi.ExportBuildPrompt, abi.PromptInput{})
	return time.Since(start), err
}

// overrun is how long past its deadline a call may end: the deadline
// checks' interval, and the scheduling of a loaded 2-core machine under -race.
const overrun = 500 * time.Millisecond

// Class 3, blocking WASI calls: a guest asking poll_oneoff for a long sleep
// (the way Go, Rust and TinyGo sleep) is stopped at its call's deadline, as
// a timeout, in a hook and in morph_destroy when the plugin closes, in both
// loaders. Before, the sleep ran its 5 s and the hook counted as a success.
func TestBlockingWASIEndsAtDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, lc := range loaders {
		t.Run(lc.name+"/hook", func(t *testing.T) {
			g := lc.as(guestModule{imports: []guestImport{importPollOneoff}})
			g.attack = g.sleepFor(5 * time.Second)
			p := load(t, newLoader(t), Config{Name: "sleeper", Wasm: g.wasm(), Limits: Limits{Timeout: timeout}})
			took, err := callWithin(p)
			if !errors.Is(err, ErrTimeout) || took > timeout+overrun {
				t.Fatalf("after %v: %v; want ErrTimeout at the %v deadline", took, err, timeout)
			}
			runEndsWithFinal(t, p)
		})
		t.Run(lc.name+"/destroy", func(t *testing.T) {
			g := lc.as(guestModule{imports: []guestImport{importPollOneoff}})
			g.destroy = g.sleepFor(5 * time.Second)
			p, err := newLoader(t).Load(context.Background(), Config{Name: "sleeper", Wasm: g.wasm(), Limits: Limits{Timeout: timeout}})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			p.Close(context.Background())
			if took := time.Since(start); took > timeout+overrun {
				t.Fatalf("Close took %v; each destroy's deadline is %v", took, timeout)
			}
			if s := p.Stats(); s.Faults != 1 {
				t.Fatalf("stats %+v: the timed-out destroy is a fault", s)
			}
		})
		t.Run(lc.name+"/destroy cancelled", func(t *testing.T) {
			g := lc.as(guestModule{imports: []guestImport{importPollOneoff}})
			g.destroy = g.sleepFor(5 * time.Second)
			p, err := newLoader(t).Load(context.Background(), Config{Name: "sleeper", Wasm: g.wasm(), Limits: Limits{Timeout: time.Minute}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			p.Close(ctx)
			if took := time.Since(start); took > 100*time.Millisecond+overrun {
				t.Fatalf("Close took %v; its context ended after 100ms", took)
			}
		})
	}
}

// Class 4, host calls charged by their work: loops of heavy WASI calls
// (random_get of 16 MiB, fd_write of the most buffers allowed, poll_oneoff
// of the most subscriptions allowed) are stopped at their deadline, and a
// call passing more buffers or subscriptions than any real program does is
// refused, naming the function. Before, each iteration counted one
// checkpoint of 10,000, and a loop ran for minutes; one poll_oneoff of a
// million subscriptions took 200 ms. A read or write of more bytes than the
// guest's memory holds (overlapping buffers: 16 GiB to a granted file in one
// call) is refused too.
func TestHeavyHostCallsEndAtDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	// fill writes n records of size bytes at 65536, each holding 1 at offset at (i32.store8): one-byte
	// buffers at 0 for fd_write, fd_read subscriptions of stdin for poll_oneoff.
	fill := func(g guestModule, n, size, at int) []byte {
		l := byte(2) // build_prompt's local, after its two parameters
		if g.extismABI {
			l = 0
		}
		addr := append(append(append([]byte{0x20, l}, i32const(int64(size))...), 0x6C), append(i32const(int64(65536+at)), 0x6A)...)
		return times(n, l, append(addr, append(i32const(1), 0x3A, 0, 0)...))
	}
	call := func(g guestModule, imp guestImport, args ...int64) []byte {
		var b []byte
		for _, a := range args {
			b = append(b, i32const(a)...)
		}
		return append(append(b, g.call(imp)...), 0x1A)
	}
	cases := []struct {
		name string
		imp  guestImport
		code func(g guestModule) []byte
		kind error
		want string
	}{
		{"random_get", importRandomGet, func(g guestModule) []byte {
			return forever(call(g, importRandomGet, 2<<16, 16<<20))
		}, ErrTimeout, ""},
		{"fd_write", importFdWrite, func(g guestModule) []byte {
			return append(fill(g, guest.MaxIOVecs, 8, 4), forever(call(g, importFdWrite, 1, 65536, guest.MaxIOVecs, 8))...)
		}, ErrTimeout, ""},
		{"fd_write over the limit", importFdWrite, func(g guestModule) []byte {
			return append(fill(g, guest.MaxIOVecs+1, 8, 4), call(g, importFdWrite, 1, 65536, guest.MaxIOVecs+1, 8)...)
		}, ErrTrap, "fd_write with 1025 buffers: this host allows at most 1024"},
		{"fd_write of more than its memory", importFdWrite, func(g guestModule) []byte { // 16 MiB buffers, all at 0
			return append(fill(g, guest.MaxIOVecs, 8, 7), call(g, importFdWrite, 1, 65536, guest.MaxIOVecs, 8)...)
		}, ErrTrap, "fd_write of 17179869184 bytes: more than the guest's memory holds"},
		{"poll_oneoff", importPollOneoff, func(g guestModule) []byte {
			return append(fill(g, guest.MaxSubscriptions, 48, 8), forever(call(g, importPollOneoff, 65536, 8<<20, guest.MaxSubscriptions, 8))...)
		}, ErrTimeout, ""},
		{"poll_oneoff over the limit", importPollOneoff, func(g guestModule) []byte { // refused before it reads one
			return call(g, importPollOneoff, 65536, 65536+48<<20, 1<<20, 8)
		}, ErrTrap, "poll_oneoff with 1048576 subscriptions: this host allows at most 1024"},
	}
	for _, lc := range loaders {
		for _, c := range cases {
			t.Run(lc.name+"/"+c.name, func(t *testing.T) {
				g := lc.as(guestModule{imports: []guestImport{c.imp}, memory: []byte{0, 0x80, 0x0C}, locals: []byte{1, 1, 0x7F}}) // 96 MiB
				g.attack = c.code(g)
				p := load(t, newLoader(t), Config{Name: "heavy", Wasm: g.wasm(), Limits: Limits{Timeout: timeout, MemoryMiB: 128}})
				took, err := callWithin(p)
				checkErr(t, "the call", err, c.kind, c.want)
				if took > timeout+overrun {
					t.Errorf("the call failed after %v, want within the %v deadline (and %v)", took, timeout, overrun)
				}
				runEndsWithFinal(t, p)
			})
		}
	}
}

// Class 3, work the deadline must reach wherever it is: a loop of bulk
// memory operations, a loop of long straight-line code, and a call tree of
// 2^60 calls without a loop end at their deadline, as a timeout, and the
// plugin serves the next call, in both loaders: an Extism guest is
// instrumented as a native one, its work charged at the same checkpoints
// (interrupt.TestWorkBetweenChecks bounds the work between two of them).
func TestHostileWorkEndsAtDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tree := []byte{0, 0x20, 0, 0x04, 0x40} // f(n): if n { f(n-1); f(n-1) }
	for range 2 {
		tree = append(append(tree, 0x20, 0, 0x41, 1, 0x6B, 0x10), 0xFF) // 0xFF: f's index, below
	}
	tree = append(tree, 0x0B, 0x0B)
	for _, lc := range loaders {
		for name, build := range map[string]func(g *guestModule){
			"bulk memory": func(g *guestModule) { // fill both pages, again and again
				g.attack = forever(slices.Concat(i32const(0), i32const(0), i32const(2<<16), []byte{0xFC, 11, 0}))
			},
			"straight-line code": func(g *guestModule) {
				g.attack = forever(bytes.Repeat([]byte{0x41, 1, 0x1A}, 50000)) // i32.const 1; drop
			},
			"call tree": func(g *guestModule) {
				f := leb(g.fn(4))
				g.types = [][]byte{{0x60, 1, 0x7F, 0}}
				g.funcs = []guestFunc{{typ: 0, body: bytes.ReplaceAll(tree, []byte{0x10, 0xFF}, append([]byte{0x10}, f...))}}
				g.attack = slices.Concat(i32const(60), []byte{0x10}, f)
			},
		} {
			t.Run(lc.name+"/"+name, func(t *testing.T) {
				g := lc.as(guestModule{})
				build(&g)
				p := load(t, newLoader(t), Config{Name: "worker", Wasm: g.wasm(), Limits: Limits{Timeout: timeout}})
				took, err := callWithin(p)
				if !errors.Is(err, ErrTimeout) || took > timeout+overrun {
					t.Fatalf("after %v: %v; want ErrTimeout at the %v deadline", took, err, timeout)
				}
				runEndsWithFinal(t, p)
			})
		}
	}
}

// nameSection names the functions of indices idx with names.
func nameSection(idx []uint64, names []string) []byte {
	var entries [][]byte
	for i, n := range names {
		entries = append(entries, append(leb(idx[i]), wname(n)...))
	}
	sub := wvec(entries...)
	return wsec(0, wname("name"), []byte{1}, leb(uint64(len(sub))), sub)
}

// Class 6, amplification: a trap whose stack names functions with 60 KiB
// names (30 frames of them: 3.6 MB) is reported in MaxErrorBytes, escaped;
// without the bound the error text was megabytes, and reached the model as
// an observation.
func TestTrapMessageBounded(t *testing.T) {
	long := strings.Repeat("\x1b[2J", 15<<10) // 60 KiB of "clear the screen"
	for _, lc := range loaders {
		t.Run(lc.name, func(t *testing.T) {
			g := lc.as(guestModule{types: [][]byte{{0x60, 1, 0x7F, 0}}})
			// f(n): unreachable at 0, else f(n-1).
			g.funcs = []guestFunc{{typ: 0, body: append([]byte{0, 0x20, 0, 0x45, 0x04, 0x40, 0x00, 0x0B, 0x20, 0, 0x41, 1, 0x6B, 0x10},
				append(leb(g.fn(4)), 0x0B)...)}}
			g.attack = append(i32const(40), append([]byte{0x10}, leb(g.fn(4))...)...)
			g.customs = [][]byte{nameSection([]uint64{g.fn(3), g.fn(4)}, []string{"a" + long, "b" + long})}
			p := load(t, newLoader(t), Config{Name: "namer", Wasm: g.wasm()})
			_, err := callWithin(p)
			var be *boundedErr
			if !errors.Is(err, ErrTrap) {
				t.Errorf("err = %.300v; want ErrTrap", err)
			}
			if !errors.As(err, &be) {
				t.Fatalf("err = %.300v (%T); want one bounding its cause (*boundedErr)", err, err)
			}
			if n := len(be.err.Error()); n < 1<<20 {
				t.Errorf("the trap's cause is %d bytes, want over 1 MB", n)
			}
			if n := len(err.Error()); n > 2*DefaultMaxErrorBytes+200 {
				t.Errorf("the error is %d bytes, want at most %d (twice the limit %d, and 200)", n, 2*DefaultMaxErrorBytes+200, DefaultMaxErrorBytes)
			}
			if strings.Contains(err.Error(), "\x1b") {
				t.Errorf("the error holds a raw escape: %.300q", err)
			}
			runEndsWithFinal(t, p)
		})
	}
}

var importExtismLogInfo = guestImport{"extism:host/env", "log_info", []byte{0x60, 1, 0x7E, 0}}

// times is code running body n times, counting in the local i (an i32).
func times(n int, i byte, body []byte) []byte {
	code := append([]byte{0x03, 0x40}, body...)
	code = append(code, 0x20, i, 0x41, 1, 0x6A, 0x22, i) // local.tee i (i+1)
	code = append(code, i32const(int64(n))...)
	return append(code, 0x49, 0x0D, 0, 0x0B) // i32.lt_u; br_if 0
}

// Class 6, amplification through the log: one call logging 200 messages of
// 1 MiB, or 100,000 messages the host cannot read (each made it warn), puts
// at most the call's log budget in the host's log. Before, the first wrote
// 12.8 MB (the budget capped each message, not the call) and the second
// 100,000 warnings.
func TestLogFloodBounded(t *testing.T) {
	logCall := func(g guestModule, oob bool) []byte {
		if g.extismABI {
			if oob {
				return append(append([]byte{0x42}, sleb(1<<40)...), g.call(importExtismLogInfo)...)
			}
			return append(append(append([]byte{0x42}, sleb(1<<20)...), 0x10, 0), g.call(importExtismLogInfo)...) // alloc(1 MiB)
		}
		ptr := int64(2 << 16)
		if oob {
			ptr = -16
		}
		return append(append(append(i32const(0), i32const(ptr)...), i32const(1<<20)...), g.call(importLog)...)
	}
	for _, lc := range loaders {
		for _, oob := range []bool{false, true} {
			name := lc.name + "/messages"
			n := 200
			if oob {
				name, n = lc.name+"/out of bounds", 100_000
			}
			t.Run(name, func(t *testing.T) {
				imp := importLog
				if lc.name == LoaderExtism {
					imp = importExtismLogInfo
				}
				g := lc.as(guestModule{imports: []guestImport{imp}, memory: []byte{0, 18}, locals: []byte{1, 1, 0x7F}})
				local := byte(2) // after build_prompt's two parameters
				if g.extismABI {
					local = 0
				}
				g.attack = times(n, local, logCall(g, oob))
				var logs syncBuffer
				l, err := NewLoader(LoaderOptions{CacheDir: "off", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close(context.Background())
				p := load(t, l, Config{Name: "flood", Wasm: g.wasm(), Limits: Limits{MemoryMiB: 4, MaxOutputBytes: 64 << 10, Timeout: 10 * time.Second}})
				if _, err := callWithin(p); err != nil {
					t.Fatal(err)
				}
				if got := len(logs.String()); got > DefaultMaxLogBytes+4<<10 {
					t.Fatalf("the log holds %d bytes; the call's budget is %d", got, DefaultMaxLogBytes)
				}
				want := "over the log limit" // one warning that the rest was dropped
				if oob {
					want = "(once per call)" // one warning about the bad calls
				}
				if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), want) {
					t.Fatalf("%d warnings, want one saying %q:\n%.2000s", n, want, logs.String())
				}
				runEndsWithFinal(t, p)
			})
		}
	}
}

// Class 6, amplification by nesting: an answer of 18 KB nested 9,000 deep
// (which encoding/json decodes, and an indenting printer turns into
// hundreds of MB) is refused as bad output, naming the limit.
func TestDeepOutputRefused(t *testing.T) {
	deep := `{"system_prompt":"x","extra":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`
	for _, lc := range loaders {
		t.Run(lc.name, func(t *testing.T) {
			p := load(t, newLoader(t), Config{Name: "deep", Wasm: lc.as(guestModule{reply: deep}).wasm()})
			_, err := callWithin(p)
			var de *abi.DepthError
			if !errors.Is(err, ErrBadOutput) {
				t.Errorf("err = %.300v; want ErrBadOutput", err)
			}
			if !errors.As(err, &de) {
				t.Fatalf("err = %.300v (%T); want an *abi.DepthError", err, err)
			}
			if de.Limit != DefaultMaxJSONDepth {
				t.Errorf("the DepthError's Limit = %d, want %d", de.Limit, DefaultMaxJSONDepth)
			}
			runEndsWithFinal(t, p)
		})
	}
}

// Class 6, memory reallocation: a guest growing its memory a page at a time
// up to its cap (and filling each page) makes the host hold little more
// than the cap. Before, each growth reallocated and copied the whole memory,
// and the garbage made the host's peak 3.5 to 4.5 times memory_mb. An
// Extism guest first takes all the kernel gives it (blocks of 1 MiB, each
// page written) and then grows its own memory: memory_mb holds the two
// together (before, each had memory_mb of its own, and the peak was twice it).
func TestMemoryGrowthBounded(t *testing.T) {
	const mib = 64
	// Grow by one page and fill it until memory.grow answers -1.
	attack := forever(append(append([]byte{0x41, 1, 0x40, 0, 0x22, 2, 0x41, 0x7F, 0x46, 0x0D, 1}, // memory.grow 1; local.tee 2; -1 == ? br_if 1 (out)
		0x20, 2, 0x41, 0x10, 0x74, 0x41, 1), append(i32const(1<<16), 0xFC, 11, 0)...), // memory.fill (old pages << 16) 1 65536
	)
	attack = append([]byte{0x02, 0x40}, append(attack, 0x0B)...) // block: br_if 1 leaves it
	for _, lc := range loaders {
		t.Run(lc.name, func(t *testing.T) {
			g := lc.as(guestModule{locals: []byte{1, 1, 0x7F}})
			if g.extismABI {
				attack := bytes.ReplaceAll(attack, []byte{0x22, 2}, []byte{0x22, 0})
				g.locals = []byte{2, 1, 0x7F, 1, 0x7E} // 0: i32, 1: i64
				g.attack = append(fillKernel, bytes.ReplaceAll(attack, []byte{0x20, 2}, []byte{0x20, 0})...)
			} else {
				g.attack = attack
			}
			p := load(t, newLoader(t), Config{Name: "grower", Wasm: g.wasm(), Limits: Limits{MemoryMiB: mib, Timeout: 10 * time.Second}})
			var err error
			grew, measured := peakRSS(t, func() { _, err = callWithin(p) })
			if err != nil {
				t.Fatal(err)
			}
			runEndsWithFinal(t, p)
			if !measured {
				t.Skip("no /proc/self/status")
			}
			t.Logf("peak RSS grew %d MiB for a memory of %d MiB", grew>>20, mib)
			if grew > (mib+mib/2)<<20 {
				t.Fatalf("peak RSS grew %d MiB for a memory of %d MiB", grew>>20, mib)
			}
		})
	}
}

// fillKernel is code of an assembled Extism guest (locals 0 i32, 1 i64)
// that allocates kernel blocks of 1 MiB until alloc answers 0, writing a
// byte in each page of each block, so that the kernel's memory is resident.
var fillKernel = slices.Concat([]byte{0x02, 0x40, 0x03, 0x40, 0x42}, sleb(1<<20), // block loop i64.const 1 MiB
	[]byte{0x10, 0, 0x22, 1, 0x50, 0x0D, 1},                                       // call alloc; local.tee 1; i64.eqz; br_if 1 (out)
	[]byte{0x41, 0, 0x21, 0, 0x03, 0x40},                                          // i = 0; loop
	[]byte{0x20, 1, 0x20, 0, 0xAD, 0x42, 12, 0x86, 0x7C, 0x41, 1, 0x10, 1},        // store_u8(block + i<<12, 1)
	[]byte{0x20, 0, 0x41, 1, 0x6A, 0x22, 0}, i32const(256), []byte{0x49, 0x0D, 0}, // i++ < 256: br_if 0
	[]byte{0x0B, 0x0C, 0, 0x0B, 0x0B}) // end; br 0 (the next block); end end

// Closing a plugin while calls spin on it ends them with ErrClosed, promptly,
// and unmaps no memory a call still uses (a use after unmap would kill the
// process: see package memory).
func TestCloseWithCallsInFlight(t *testing.T) {
	for _, lc := range loaders {
		t.Run(lc.name, func(t *testing.T) {
			g := lc.as(guestModule{attack: forever(nil)})
			p, err := newLoader(t).Load(context.Background(), Config{Name: "spinner", Wasm: g.wasm(), Limits: Limits{Timeout: time.Minute}})
			if err != nil {
				t.Fatal(err)
			}
			errs := make(chan error, 3)
			for range 3 {
				go func() {
					_, err := callWithin(p)
					errs <- err
				}()
			}
			time.Sleep(200 * time.Millisecond) // the calls are spinning
			start := time.Now()
			if err := p.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > overrun {
				t.Fatalf("Close took %v", took)
			}
			for range 3 {
				if err := <-errs; !errors.Is(err, ErrClosed) {
					t.Fatalf("a call in flight ended with %v, want ErrClosed", err)
				}
			}
			if _, err := callWithin(p); !errors.Is(err, ErrClosed) {
				t.Fatalf("a call after Close: %v", err)
			}
		})
	}
}

// A module naming the local or global one past its own is refused at load:
// once instrumented, that index is the deadline counter's, and the guest
// could reset it for ever (found by FuzzHostileModule: the call never ended).
// In both loaders: an Extism guest is instrumented too.
func TestCounterCannotBeNamed(t *testing.T) {
	for _, lc := range loaders {
		// build_prompt's first index past its own: two parameters and no
		// local in ABI v1, none of either in Extism's
		local := byte(2)
		if lc.as(guestModule{}).extismABI {
			local = 0
		}
		for name, g := range map[string]guestModule{
			"local":  {attack: forever([]byte{0x41, 1, 0x21, local})}, // local.set
			"global": {attack: forever([]byte{0x41, 1, 0x24, 0})},     // global.set 0: the module has no global
		} {
			t.Run(lc.name+"/"+name, func(t *testing.T) {
				_, err := newLoader(t).Load(context.Background(), Config{Name: "alias", Wasm: lc.as(g).wasm()})
				if !errors.Is(err, ErrLoad) || !strings.Contains(err.Error(), "index") {
					t.Fatalf("Load = %v; want ErrLoad for the index out of range", err)
				}
			})
		}
	}
}

// A module that passed the limits check is remembered in the cache
// directory, keyed by its bytes and the limits: a loader with other limits
// checks it again (and refuses it here), and a damaged entry is only a miss.
func TestCheckCache(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	l, err := NewLoader(LoaderOptions{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	load(t, l, Config{Path: fixture(t, "minimal")})
	entries, _ := filepath.Glob(filepath.Join(dir, "morph-check", "*.json"))
	if len(entries) != 1 {
		t.Fatalf("cache entries %v, want one", entries)
	}
	strict, err := NewLoader(LoaderOptions{CacheDir: dir, ModuleLimits: ModuleLimits{Functions: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close(ctx)
	if _, err := strict.Load(ctx, Config{Path: fixture(t, "minimal")}); !errors.Is(err, ErrLoad) || !strings.Contains(err.Error(), "functions") {
		t.Fatalf("a loader with other limits: %v, want the module refused", err)
	}
	os.WriteFile(entries[0], []byte("{not json"), 0o600)
	load(t, l, Config{Path: fixture(t, "minimal")})
}

// Class 3 in a fail-closed guard: a before_tool_call middleware that sleeps
// in WASI denies the call at its deadline (the guard failed, and fails
// closed), in both loaders, and the run goes on to its final. Before, each
// tool call waited out the sleep, and the guard's answer counted.
func TestSleepingGuardFailsClosed(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, lc := range loaders {
		t.Run(lc.name, func(t *testing.T) {
			g := lc.as(guestModule{name: "guard", as: abi.HookBeforeToolCall, imports: []guestImport{importPollOneoff}, reply: `{}`})
			g.attack = g.sleepFor(5 * time.Second)
			l := newLoader(t)
			guard := l.Extender(Config{Name: "guard", Wasm: g.wasm(), Limits: Limits{Timeout: timeout}}, engine.MiddlewareConfig{Policy: engine.FailClosed})
			reg := engine.NewRegistry()
			reg.Register(echoTool{})
			m := &scriptModel{replies: []string{
				`{"type":"tool_call","tool_call":{"tool_name":"echo","tool_params":{}}}`,
				`{"type":"final","final":{"output":"done"}}`,
			}}
			e := engine.New(m, reg, engine.WithExtenders(guard))
			defer e.Close(context.Background())
			start := time.Now()
			final, rc, err := e.Run(context.Background(), "t", engine.RunOptions{})
			if err != nil || final.Output != "done" {
				t.Fatalf("final %+v, err %v", final, err)
			}
			if took := time.Since(start); took > timeout+overrun {
				t.Fatalf("the run took %v; the guard's deadline is %v", took, timeout)
			}
			if obs := rc.Steps[0].Observation; !strings.HasPrefix(obs, "Tool call denied: ") || !strings.Contains(obs, "timed out") {
				t.Fatalf("the call's observation %q: want a denial by the guard's timeout", obs)
			}
		})
	}
}

// Class 2, the call stack outside memory_mb: an unbounded recursion, in
// every instance the plugin may run at once, ends at the plugin's stack
// limit as a trap that names it, at once, whether the frames are small (the
// host's estimate is then ten times theirs) or large (200 arguments, all on
// the stack: the estimate is close). wazero keeps a call's stack in a
// buffer of its own, which it doubles, copying, up to about 100 MB: a stack
// of s bytes may leave buffers of up to 2s behind it, so the host's memory
// grows by less than three times the limit an instance (measured: 3.5 MiB
// with small frames, 32 MiB with large, for 16 MiB). Before the limit, each
// recursion ran 0.4 s and the host's peak grew 609 MiB for four, whatever
// memory_mb said. The same in both loaders: an Extism guest is instrumented
// as a native one (before, its recursion ran to wazero's own ceiling, about
// 100 MB, and ended in a trap that named no limit).
func TestStackBounded(t *testing.T) {
	for _, lc := range loaders {
		for _, params := range []int{1, 200} {
			t.Run(fmt.Sprint(lc.name, "/", params, " parameters"), func(t *testing.T) {
				stackBounded(t, lc.as, params)
			})
		}
	}
}

// stackBounded is TestStackBounded's case: recursions in four instances at
// once, of a function of params parameters, in the convention as gives.
func stackBounded(t *testing.T, as func(guestModule) guestModule, params int) {
	const instances = 4
	// f(n i64, ...) i64: f(n+1, ...)+1
	typ := append(append([]byte{0x60}, leb(uint64(params))...), append(bytes.Repeat([]byte{0x7E}, params), 1, 0x7E)...)
	g := as(guestModule{types: [][]byte{typ}})
	call := append([]byte{0x10}, leb(g.fn(4))...)
	code := []byte{0, 0x20, 0, 0x42, 1, 0x7C}
	for i := 1; i < params; i++ {
		code = append(append(code, 0x20), leb(uint64(i))...)
	}
	g.funcs = []guestFunc{{typ: 0, body: append(append(code, call...), 0x42, 1, 0x7C, 0x0B)}}
	g.attack = append(append(bytes.Repeat([]byte{0x42, 0}, params), call...), 0x1A)
	p := load(t, newLoader(t), Config{Name: "recurser", Wasm: g.wasm(),
		Limits: Limits{MemoryMiB: 4, MaxInstances: instances, Timeout: 10 * time.Second}})
	errs := make(chan error, instances)
	start := time.Now()
	grew, measured := peakRSS(t, func() {
		for range instances {
			go func() {
				_, err := callWithin(p)
				errs <- err
			}()
		}
		for range instances {
			err := <-errs
			var se *StackLimitError
			if !errors.Is(err, ErrTrap) {
				t.Errorf("err = %.300v; want ErrTrap", err)
			}
			if !errors.As(err, &se) {
				t.Errorf("err = %.300v (%T); want a *StackLimitError", err, err)
				continue
			}
			if se.Limit != DefaultMaxStackBytes {
				t.Errorf("the StackLimitError's Limit = %d, want %d", se.Limit, DefaultMaxStackBytes)
			}
			if want := "call stack would exceed 16777216 bytes"; !strings.Contains(err.Error(), want) {
				t.Errorf("err = %.300v; want it to say %q", err, want)
			}
		}
	})
	// The error says the limit ended each recursion; how soon is a
	// benchmark's question (a time bound here failed under load).
	t.Logf("peak RSS grew %d MiB for %d recursions in %v, a stack limit of %d MiB each", grew>>20, instances,
		time.Since(start).Round(time.Millisecond), DefaultMaxStackBytes>>20)
	if measured && !raced() && grew > instances*3*DefaultMaxStackBytes {
		t.Errorf("peak RSS grew %d MiB", grew>>20)
	}
	runEndsWithFinal(t, p)
}

// raced tells whether the test binary was built with -race, whose shadow
// memory grows with every byte of Go's heap a test writes (wazero's stacks
// are there; guest memories are not).
func raced() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" {
				return s.Value == "true"
			}
		}
	}
	return false
}

// Class 6 across sessions: a guest that grows its memory to the cap in every
// session holds, at most, the cap in each instance the plugin keeps, and the
// plugin keeps instances for at most Limits.MaxSessions open sessions (plus
// MaxInstances running), refusing more sessions (ErrSessionLimit) rather
// than taking an open one's instance: that product bounds both its resident
// memory and the address space it reserves, which Plugin.Memory reports.
func TestMemoryGrowthBoundedAcrossSessions(t *testing.T) {
	const mib, sessions, kept = 4, 12, 3
	attack := forever(append(append([]byte{0x41, 1, 0x40, 0, 0x22, 2, 0x41, 0x7F, 0x46, 0x0D, 1},
		0x20, 2, 0x41, 0x10, 0x74, 0x41, 1), append(i32const(1<<16), 0xFC, 11, 0)...)) // as TestMemoryGrowthBounded's
	g := guestModule{locals: []byte{1, 1, 0x7F}, attack: append([]byte{0x02, 0x40}, append(attack, 0x0B)...)}
	p := load(t, newLoader(t), Config{Name: "grower", Wasm: g.wasm(), Isolation: IsolationSession,
		Limits: Limits{MemoryMiB: mib, MaxSessions: kept, SessionWait: time.Millisecond, Timeout: 10 * time.Second}})
	for i, ctx := range sessionContexts(t, sessions) {
		_, err := p.Call(ctx, abi.ExportBuildPrompt, jsonPayload(100))
		if i < kept && err != nil {
			t.Fatalf("session %d: %v; want the first %d admitted", i, err, kept)
		}
		if i >= kept && !errors.Is(err, ErrSessionLimit) {
			t.Fatalf("session %d: %v; want ErrSessionLimit past the first %d", i, err, kept)
		}
	}
	p.evicting.Wait()
	st := p.Memory()
	if st.Instances != kept || st.Reserved != kept*mib<<20 {
		t.Fatalf("memory %+v: want %d idle instances reserving %d MiB each", st, kept, mib)
	}
	// Each filled its memory but the first pages, which hold the guest's
	// data: resident is between most of the caps and the caps.
	if st.Resident > st.Reserved {
		t.Errorf("memory %+v: Resident %d, more than Reserved %d", st, st.Resident, st.Reserved)
	}
	if runtime.GOOS == "linux" && st.Resident < st.Reserved*3/4 {
		t.Errorf("memory %+v: Resident %d, want most (3/4) of the %d MiB reserved", st, st.Resident, st.Reserved>>20)
	}
}
