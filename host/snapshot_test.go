package host

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// Snapshots (Config.NoSnapshot): the first instance initializes and every
// later one starts from its image, as initialized, whatever instances wrote
// since; a write in one instance is never seen by another; with snapshots
// off, or for a module whose state an image cannot hold, each instance runs
// _initialize itself, and answers the same. In both loaders: an Extism
// plugin's image also carries the vars its initialization set (kept by its
// kernel, in Go), and a var a call sets stays in its instance.
func TestSnapshot(t *testing.T) {
	for _, c := range []struct {
		loader, fixture string
		fresh, written  string
	}{
		// initialized once, globals and the grown page as _initialize left
		// them, nothing seen; then what build_prompt wrote
		{LoaderNative, "snapinit", "i1 kY s0", "i7 xZ s1"},
		// the same, and the var _initialize set, then the call's
		{LoaderExtism, "extism_snapinit", "i1 kY s0 vI", "i7 xZ s1 vC"},
	} {
		t.Run(c.loader, func(t *testing.T) { snapshot(t, c.fixture, c.fresh, c.written) })
	}
}

// snapshot is TestSnapshot's case: the fixture's answers from a fresh
// instance and from one it wrote in.
func snapshot(t *testing.T, fixtureName, fresh, written string) {
	for _, off := range []bool{false, true} {
		name := map[bool]string{false: "on", true: "off"}[off]
		t.Run(name, func(t *testing.T) {
			l, logs := newLoggedLoader(t)
			p := load(t, l, Config{Path: fixture(t, fixtureName), Isolation: IsolationSession, NoSnapshot: off})
			e := engine.New(finalModel{}, nil, p.hookOptions()...)
			// a's second turn sees a's writes (its globals and memory);
			// b and c start fresh: from the image, which a (the instance
			// it was taken of) and b wrote over in their own pages only.
			expect(t, e, "a", fresh, "a", written, "b", fresh, "b", written, "c", fresh)
			inits := strings.Count(logs.String(), "initializing")
			made := p.Stats().Instantiated
			if want := map[bool]uint64{false: 1, true: made}[off]; uint64(inits) != want || made != 3 {
				t.Fatalf("_initialize ran %d times for %d instances, want %d", inits, made, want)
			}
			st := p.Memory()
			if off != (st.Image == 0) || off != (st.NoSnapshot == "turned off (snapshot = false)") {
				t.Fatalf("memory %+v: snapshot %s, want an image exactly when on, and why not when off", st, name)
			}
			// Three instances, each holding 3 pages: the answer's, the
			// input's and the marker's, which it wrote (Extism: the input
			// is in the kernel's page, with the blocks of the answer and the
			// var); an instance from the image holds no page of the image
			// it only read.
			if page := os.Getpagesize(); runtime.GOOS == "linux" && page == 4096 && st.Resident != 9*4096 {
				t.Fatalf("memory %+v: want the 9 pages the instances wrote resident", st)
			}
		})
	}
	// Call isolation: each call a fresh instance from the image.
	l, logs := newLoggedLoader(t)
	p := load(t, l, Config{Path: fixture(t, fixtureName), Isolation: IsolationCall})
	for i := range 3 {
		if out, err := p.Call(context.Background(), abi.ExportBuildPrompt, []byte(`{}`)); err != nil || !strings.Contains(string(out), fresh) {
			t.Fatalf("call %d: %s, %v; want %q", i, out, err, fresh)
		}
	}
	if n := strings.Count(logs.String(), "initializing"); n != 1 {
		t.Fatalf("_initialize ran %d times, want once", n)
	}
}

// A module whose state is not all memory and globals (code that changes a
// table), whose _initialize opened or closed a file, or whose memory an
// image cannot hold (4 GiB) gets no snapshot: the log says why, and each
// instance initializes. The same in both loaders (the Extism guests are
// assembled, their _initialize logging through log_info), and for an Extism
// plugin with linked modules (an image holds one module's memory).
func TestSnapshotRefused(t *testing.T) {
	for name, reason := range map[string]string{"snapinit_table": "changes a table or a segment (table.set)",
		"snapinit_files": "its initialization called fd_close", "snapinit_4g": "its memory is 4 GiB"} {
		t.Run(name, func(t *testing.T) {
			snapshotRefused(t, Config{Path: fixture(t, name), Limits: Limits{MemoryMiB: 4096}}, `"ok"`, reason)
		})
	}
	fdClose := guestImport{"wasi_snapshot_preview1", "fd_close", []byte{0x60, 1, 0x7F, 1, 0x7F}}
	for name, c := range map[string]struct {
		g      guestModule
		reason string
	}{
		"table": {guestModule{tables: [][]byte{{0x70, 0, 1}},
			funcs: []guestFunc{{typ: 0, body: []byte{0, 0x41, 0, 0xD0, 0x70, 0x26, 0, 0x0B}}}}, // table.set 0 (never called)
			"changes a table or a segment (table.set)"},
		"files": {guestModule{imports: []guestImport{fdClose}}, "its initialization called fd_close"},
		// no 4 GiB row: memory_mb is at most 4096, and the kernel's memory
		// counts in it, so an Extism guest cannot hold 4 GiB
	} {
		t.Run("extism/"+name, func(t *testing.T) {
			g := extismInitializing(c.g)
			if name == "files" {
				init := &g.funcs[len(g.funcs)-1]
				init.body = slices.Concat(init.body[:len(init.body)-1], i32const(9), g.call(fdClose), []byte{0x1A, 0x0B}) // drop (fd_close 9)
			}
			snapshotRefused(t, Config{Name: "snapinit", Wasm: g.wasm()}, `"ok"`, c.reason)
		})
	}
	t.Run("extism/linked", func(t *testing.T) {
		snapshotRefused(t, Config{Path: fixture(t, "extism_snapinit"), Modules: []LinkedModule{{Name: "lib", Path: fixture(t, "extism_stacklib")}}},
			"i1 kY s0 vI", "the plugin has linked modules")
	})
}

// snapshotRefused loads cfg with call isolation and checks that its calls
// answer want, that the log says why there is no snapshot (reason), and
// that each instance ran _initialize (each logged "initializing").
func snapshotRefused(t *testing.T, cfg Config, want, reason string) {
	l, logs := newLoggedLoader(t)
	cfg.Isolation = IsolationCall
	p := load(t, l, cfg)
	for range 2 {
		if out, err := p.Call(context.Background(), abi.ExportBuildPrompt, []byte(`{}`)); err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("%s, %v; want %s", out, err, want)
		}
	}
	if !strings.Contains(logs.String(), "no snapshot") || !strings.Contains(logs.String(), reason) {
		t.Fatalf("the log does not say why there is no snapshot (%q):\n%s", reason, logs)
	}
	if n, made := strings.Count(logs.String(), "initializing"), p.Stats().Instantiated; uint64(n) != made || made < 3 {
		t.Fatalf("_initialize ran %d times for %d instances", n, made)
	}
	if st := p.Memory(); st.Image != 0 || !strings.Contains(st.NoSnapshot, reason) {
		t.Fatalf("memory %+v: an image, or no reason", st)
	}
}

// extismInitializing is g as an Extism module with an _initialize that logs
// "initializing" (log_info of a kernel block it writes a byte at a time).
func extismInitializing(g guestModule) guestModule {
	logInfo := guestImport{"extism:host/env", "log_info", []byte{0x60, 1, 0x7E, 0}}
	g = g.extism()
	g.imports = append(slices.Clone(g.imports), logInfo)
	g.types = append(slices.Clone(g.types), []byte{0x60, 0, 0}) // () -> (), type 0 of g.funcs
	const msg = "initializing"
	body := append([]byte{1, 1, 0x7E, 0x42}, sleb(int64(len(msg)))...)
	body = append(body, 0x10, 0, 0x21, 0) // local 0 = alloc(len)
	for i := range len(msg) {
		body = append(append(append(body, 0x20, 0, 0x42), sleb(int64(i))...), 0x7C)      // local 0 + i
		body = append(append(append(body, i32const(int64(msg[i]))...), 0x10), leb(1)...) // store_u8
	}
	body = append(append(append(body, 0x20, 0), g.call(logInfo)...), 0x0B)
	g.funcs = append(slices.Clone(g.funcs), guestFunc{typ: uint32(len(g.types) - 1), body: body, export: "_initialize"})
	return g
}

// An _initialize that fills its memory to the plugin's cap makes the
// largest image there can be: the cap, once for the plugin, not once per
// instance; an instance started from it holds only what it writes.
func TestSnapshotAtTheCap(t *testing.T) {
	const mib = 4
	p := load(t, newLoader(t), Config{Path: fixture(t, "snapinit_fill"), Isolation: IsolationSession, Limits: Limits{MemoryMiB: mib}})
	e := engine.New(finalModel{}, nil, p.hookOptions()...)
	for _, s := range []string{"a", "b", "c"} {
		expect(t, e, s, fmt.Sprintf("pages %d", mib*16%10))
	}
	st := p.Memory()
	if st.Image > mib<<20 || st.Image < (mib<<20)-8<<10 {
		t.Fatalf("memory %+v: want an image of the whole %d MiB cap", st, mib)
	}
	// a's instance (the image's source) holds the cap; b's and c's, 3 pages each.
	if page := uint64(os.Getpagesize()); runtime.GOOS == "linux" && st.Resident > mib<<20+6*page {
		t.Fatalf("memory %+v: the instances from the image hold more than the pages they wrote", st)
	}
}
