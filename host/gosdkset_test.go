package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/internal/testenv"
)

// goSDKSetDir is go-sdk's own test set, its wasm/ directory in the module
// cache (go-sdk is a dependency: `go mod download` puts it there, and CI
// has the module proxy). Outside CI a machine without it skips, saying
// how to get it; in CI its absence fails (see internal/testenv).
func goSDKSetDir(t *testing.T) string {
	t.Helper()
	dir, err := goSDKDir()
	if err == nil && dir != "" {
		if _, err = os.Stat(filepath.Join(dir, "wasm")); err == nil {
			return filepath.Join(dir, "wasm")
		}
	}
	if testenv.CI() {
		t.Fatalf("go-sdk's module directory (go list -m github.com/extism/go-sdk): %q, %v", dir, err)
	}
	t.Skipf("go-sdk's wasm/ is not in the module cache (%v): run `go mod download github.com/extism/go-sdk`", err)
	return ""
}

// sdkCall is one call of a row of TestGoSDKTestSet: the export, its
// input, and the answer. want is the output, or, with kind set, a part of
// the error's text; rc is the return code go-sdk answers (its own tests'
// expectation), checked when the row runs through go-sdk too.
type sdkCall struct {
	export, in, want string
	kind             error
	rc               uint32
}

// sdkRow is a module of go-sdk's test set as a user configures it in
// morph: its values, grants, host functions and linked modules, the
// calls go-sdk's extism_test.go makes and the answers it expects.
type sdkRow struct {
	name, file string
	values     map[string]string
	grants     Grants
	hosts      []HostFunction
	modules    []string // linked modules, of the set, by name
	calls      []sdkCall
	refused    string // with it, Load fails with refusal's kind, saying it
	refusal    error
	logs       []string // what the plugin's log must say after the calls
	// oracle: the row needs no grant, host function or morph-only
	// setting, so go-sdk runs the same module, configuration and calls,
	// and must answer the same (rc, output; a failure where morph fails).
	oracle bool
}

// TestGoSDKTestSet loads every module of go-sdk's own test set (27
// published Extism plugins by the Extism authors: Go, TinyGo, Rust, C,
// Haskell, AssemblyScript) through morph's Extism loader, configured as a
// user would, and checks the answers go-sdk's own tests expect; where no
// grant is needed go-sdk runs the same calls as the oracle. It is the
// regression set of the Extism loader: every convention that loads today
// must keep loading and answering the same.
func TestGoSDKTestSet(t *testing.T) {
	dir := goSDKSetDir(t)
	testdata := filepath.Join(filepath.Dir(dir), "testdata") // go-sdk's own, holding test.txt

	// http_headers.wasm fetches the URL of its input and answers the
	// response's headers: a server on 127.0.0.1 serves it.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header()["Date"] = nil // no Date header: the answer is the same on every run
		w.Write([]byte("<p>hi</p>"))
	}))
	t.Cleanup(srv.Close) // after the parallel rows
	local := Grants{Hosts: []string{strings.TrimPrefix(srv.URL, "http://")}}
	headersIn, err := json.Marshal(map[string]string{"url": srv.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}

	i64 := []api.ValueType{api.ValueTypeI64}
	// rewrite is a host function answering f of its string argument:
	// host_memory.wasm's to_upper, host_multiple.wasm's prefixes.
	rewrite := func(f func([]byte) []byte) func(context.Context, *HostCall, []uint64) error {
		return func(_ context.Context, call *HostCall, stack []uint64) error {
			b, err := call.Read(stack[0])
			if err == nil {
				stack[0], err = call.Write(f(b))
			}
			return err
		}
	}
	prefix := func(p string) func(context.Context, *HostCall, []uint64) error {
		return rewrite(func(b []byte) []byte { return append([]byte(p), b...) })
	}
	mult := func(_ context.Context, _ *HostCall, stack []uint64) error {
		stack[0] = api.EncodeI32(api.DecodeI32(stack[0]) * api.DecodeI32(stack[1]))
		return nil
	}
	readOnly := Grants{Paths: []PathGrant{{Host: testdata, Guest: "/mnt"}}}
	// fs.wasm and fs_std.wasm open the file for writing too (they fail on
	// a read-only mount in go-sdk as well): a writable copy.
	writable := t.TempDir()
	if err := os.WriteFile(filepath.Join(writable, "test.txt"), []byte("hello world!"), 0o600); err != nil {
		t.Fatal(err)
	}
	readWrite := Grants{Paths: []PathGrant{{Host: writable, Guest: "/mnt", Writable: true}}}

	rows := []sdkRow{
		// alloc.wasm allocates and writes blocks in a loop, one store_u8 a
		// byte: go-sdk's kernel makes each a call into its wasm kernel, so
		// that the call takes seconds (6 s in go-sdk alone, no -race, on a
		// 2-core machine; its TestAlloc has no timeout). morph's kernel is
		// Go (issue 27): the call succeeds, as go-sdk's test expects, within
		// morph's default deadline (2 s; it takes well under one).
		{name: "alloc", file: "alloc", calls: []sdkCall{{export: "run_test"}}},
		{name: "config", file: "config", values: map[string]string{"thing": "hello"}, oracle: true,
			calls: []sdkCall{{export: "run_test", want: `{"config": "hello"}`}}},
		{name: "config unset", file: "config", oracle: true,
			calls: []sdkCall{{export: "run_test", want: `{"config": "<unset by host>"}`}}},
		// TestCallFunction, then TestMultipleCallsOutput on the same
		// instance: "total" is a var the calls share.
		{name: "count_vowels", file: "count_vowels", oracle: true, calls: []sdkCall{
			{export: "count_vowels", in: "aaa", want: `{"count":3,"total":3,"vowels":"aeiouAEIOU"}`},
			{export: "count_vowels", in: "bbba", want: `{"count":1,"total":4,"vowels":"aeiouAEIOU"}`},
			{export: "count_vowels", in: "hello world", want: `{"count":3,"total":7,"vowels":"aeiouAEIOU"}`},
		}},
		{name: "count_vowels_std", file: "count_vowels_std", oracle: true, calls: []sdkCall{{export: "_start", in: "hello world",
			want: `{"count": 3, "config": "<unset by host>", "a": "this is var a"}`}}},
		// TestExit: the exit code is go-sdk's rc; in morph a command
		// module's exit other than 0 fails the call naming it.
		// An exit code of -1 is wazero's sys.ExitCodeContextCanceled: the
		// loader today takes the guest's exit for a cancellation.
		{name: "exit -1", file: "exit", values: map[string]string{"code": "-1"}, oracle: true,
			calls: []sdkCall{{export: "_start", kind: ErrCanceled, want: "module closed with context canceled", rc: 0xffffffff}}},
		{name: "exit 500", file: "exit", values: map[string]string{"code": "500"}, oracle: true,
			calls: []sdkCall{{export: "_start", kind: ErrTrap, want: "exit_code(500)", rc: 500}}},
		{name: "exit abc", file: "exit", values: map[string]string{"code": "abc"}, oracle: true,
			calls: []sdkCall{{export: "_start", kind: ErrTrap, want: "exit_code(1)", rc: 1}}},
		{name: "exit unset", file: "exit", oracle: true,
			calls: []sdkCall{{export: "_start", kind: ErrTrap, want: "exit_code(2)", rc: 2}}},
		{name: "fail", file: "fail", oracle: true,
			calls: []sdkCall{{export: "run_test", kind: ErrGuest, want: "Some error message", rc: 1}}},
		{name: "fs", file: "fs", grants: readWrite,
			calls: []sdkCall{{export: "run_test", want: "hello world!"}}},
		{name: "fs_std", file: "fs_std", grants: readWrite,
			calls: []sdkCall{{export: "run_test", want: "hello world!"}}},
		{name: "hello", file: "hello", oracle: true,
			calls: []sdkCall{{export: "run_test", want: "Hello, world!"}}},
		{name: "hello_haskell", file: "hello_haskell", values: map[string]string{"greeting": "Howdy"}, oracle: true,
			calls: []sdkCall{{export: "testing", in: "John", want: "Howdy, John"}, {export: "testing", in: "Jane", want: "Howdy, Jane"}}},
		{name: "host", file: "host",
			hosts: []HostFunction{{Name: "mult", Params: append(i64, i64...), Results: i64, Func: mult}},
			calls: []sdkCall{{export: "run_test", want: "42 x 2 = 84"}}},
		{name: "host_memory", file: "host_memory",
			hosts: []HostFunction{{Module: "host", Name: "to_upper", Params: i64, Results: i64, Func: rewrite(bytes.ToUpper)}},
			calls: []sdkCall{{export: "run_test", in: "Frodo", want: "HELLO FRODO!"}}},
		{name: "host_multiple", file: "host_multiple",
			hosts: []HostFunction{
				{Name: "hostGreenMessage", Params: i64, Results: i64, Func: prefix("🟢:")},
				{Name: "hostPurpleMessage", Params: i64, Results: i64, Func: prefix("🟣:")},
			},
			calls: []sdkCall{
				{export: "say_green", in: "John Doe", want: "🟢:🫱 Hey from say_green John Doe"},
				{export: "say_purple", in: "Jane Doe", want: "🟣:👋 Hello from say_purple Jane Doe"},
			}},
		// TestHTTP_denied: the host it asks for is not granted (the
		// allowed case needs the network; morph's HTTP grant is tested on
		// 127.0.0.1 by http_headers and TestExtismHostileGuests).
		{name: "http", file: "http", grants: local,
			calls: []sdkCall{{export: "run_test", kind: ErrNotGranted, want: "jsonplaceholder.typicode.com"}}},
		{name: "http_headers", file: "http_headers", grants: local, calls: []sdkCall{{export: "http_get", in: string(headersIn),
			want: `{"content-length":"9","content-type":"text/html; charset=utf-8"}`}}},
		// TestInputOffset: the output's first byte is the input's length.
		{name: "input_offset", file: "input_offset", oracle: true,
			calls: []sdkCall{{export: "input_offset_length", in: "hello world", want: "\x0b\x00\x00\x00\x00\x00\x00\x00"}}},
		// lib.wasm is a library: it loads as main.wasm's linked module.
		{name: "lib", file: "lib", refusal: ErrABIMismatch, refused: "it exports no function () -> i32 that could be one"},
		{name: "log", file: "log", oracle: true,
			calls: []sdkCall{{export: "run_test"}},
			logs:  []string{"this is a warning log", "this is an error log"}},
		{name: "main", file: "main", modules: []string{"lib"}, oracle: true,
			calls: []sdkCall{{export: "run_test", in: "benjamin", want: "Hello, BENJAMIN"}}},
		// Dylibso-instrumented C: it imports dylibso_observe, which
		// neither go-sdk without an observe adapter nor morph provides.
		{name: "nested.c.instr", file: "nested.c.instr", refusal: ErrLoad, refused: "of Dylibso's Observe SDK"},
		{name: "noop", file: "noop", oracle: true, calls: []sdkCall{{export: "run_test"}}},
		{name: "println", file: "println", oracle: true, calls: []sdkCall{{export: "run_test", in: "hi"}}},
		// TestReadOnlyMount.
		{name: "read_write", file: "read_write", grants: readOnly, values: map[string]string{"path": "/mnt/test.txt"},
			calls: []sdkCall{
				{export: "try_read", want: "hello world!"},
				{export: "try_write", in: "hello hello!", kind: ErrGuest, want: "Failed to write file"},
			}},
		// BenchmarkReplace: every "test" becomes "wasm".
		{name: "replace", file: "replace", oracle: true,
			calls: []sdkCall{{export: "run_test", in: "a test, b test.", want: "a wasm, b wasm."}}},
		// TestContextCancel.
		{name: "sleep", file: "sleep", values: map[string]string{"duration": "0"}, oracle: true,
			calls: []sdkCall{{export: "run_test", want: "slept for 0 seconds"}}},
		{name: "std_command", file: "std_command", oracle: true,
			calls: []sdkCall{{export: "_start", in: "ben", want: "hello ben"}}},
		// TestVar sets the var "a" before the call, which a morph plugin's
		// host cannot: unset, it starts at 0 and stays 0 when doubled.
		{name: "var", file: "var", oracle: true, calls: []sdkCall{{export: "run_test", want: "a: 0"}, {export: "run_test", want: "a: 0"}}},
	}

	// Every module of the set has a row: a go-sdk upgrade that adds one
	// fails here until it has.
	files, err := filepath.Glob(filepath.Join(dir, "*.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".wasm")
		if !slices.ContainsFunc(rows, func(r sdkRow) bool { return r.file == name || slices.Contains(r.modules, name) }) {
			t.Errorf("%s has no row in TestGoSDKTestSet: add what go-sdk's extism_test.go expects of it", f)
		}
	}

	l, logs := extismLoader()
	ctx := context.Background()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel() // most of the time is compiling standard Go guests: two cores do it in half
			cfg := Config{Path: filepath.Join(dir, r.file+".wasm"), Name: strings.ReplaceAll(r.name, " ", "-"),
				Values: r.values, Grants: r.grants, HostFunctions: r.hosts,
				// one instance: calls see the state of the ones before, as
				// go-sdk's tests' calls on one Plugin do
				Isolation: IsolationPooled, Limits: Limits{MaxInstances: 1}}
			for _, m := range r.modules {
				cfg.Modules = append(cfg.Modules, LinkedModule{Name: m, Path: filepath.Join(dir, m+".wasm")})
			}
			for _, c := range r.calls {
				if !slices.ContainsFunc(cfg.Tools, func(tool ExportTool) bool { return tool.Export == c.export }) {
					cfg.Tools = append(cfg.Tools, ExportTool{Export: c.export, Name: sdkToolName(c.export), Input: "field:input"})
				}
			}
			if r.refused != "" {
				cfg.Tools = nil
				_, err := l.Load(ctx, cfg)
				if !errors.Is(err, r.refusal) || !strings.Contains(err.Error(), r.refused) {
					t.Fatalf("Load: %v, want %v saying %q", err, r.refusal, r.refused)
				}
				return
			}
			p := load(t, l, cfg)
			for i, c := range r.calls {
				out, err := callTool(t, p, sdkToolName(c.export), map[string]any{"input": c.in})
				switch {
				case c.kind == nil && (err != nil || out != c.want):
					t.Errorf("call %d, %s(%q): %q, %v; want %q", i, c.export, c.in, out, err, c.want)
				case c.kind != nil && (!errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want)):
					t.Errorf("call %d, %s(%q): %q, %v; want %v saying %q", i, c.export, c.in, out, err, c.kind, c.want)
				}
			}
			for _, want := range r.logs {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the plugin's log does not say %q", want)
				}
			}
			if r.oracle {
				goSDKAgrees(t, dir, r)
			}
		})
	}
}

// goSDKAgrees runs the row's calls through go-sdk, as its README calls a
// plugin (one Plugin, its calls in turn), and checks go-sdk's answers
// against the row's: the rc, and the output of each call that succeeds.
func goSDKAgrees(t *testing.T, dir string, r sdkRow) {
	t.Helper()
	ctx := context.Background()
	m := sdk.Manifest{Config: r.values}
	for _, name := range append(r.modules, r.file) {
		wasm, err := os.ReadFile(filepath.Join(dir, name+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		m.Wasm = append(m.Wasm, sdk.WasmData{Data: wasm, Name: name})
	}
	pl, err := sdk.NewPlugin(ctx, m, sdk.PluginConfig{EnableWasi: true,
		RuntimeConfig: wazero.NewRuntimeConfigInterpreter().WithCompilationCache(goSDKCache())}, nil)
	if err != nil {
		t.Fatalf("go-sdk: %v", err)
	}
	defer pl.Close(ctx)
	pl.SetLogger(func(sdk.LogLevel, string) {}) // morph's log is checked; go-sdk's would go to stdout
	for i, c := range r.calls {
		rc, out, err := pl.Call(c.export, []byte(c.in))
		switch {
		case rc != c.rc:
			t.Errorf("go-sdk call %d, %s(%q): rc %d (%v), want %d", i, c.export, c.in, rc, err, c.rc)
		case c.kind == nil && (err != nil || string(out) != c.want):
			t.Errorf("go-sdk call %d, %s(%q): %q, %v; want %q", i, c.export, c.in, out, err, c.want)
		case c.kind != nil && err == nil:
			t.Errorf("go-sdk call %d, %s(%q): %q, want an error", i, c.export, c.in, out)
		}
	}
}

// goSDKCache is the compilation cache of go-sdk's runs of the set (on
// wazero's interpreter: the same semantics, without compiling each
// standard Go module a second time, seconds each): a module of several
// rows (exit.wasm, config.wasm) is read once.
var goSDKCache = sync.OnceValue(wazero.NewCompilationCache)

// sdkToolName is the tool an export of the set is configured as: its name,
// without a command module's leading underscore.
func sdkToolName(export string) string { return strings.TrimPrefix(export, "_") }
