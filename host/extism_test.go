package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/extism/go-sdk"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/testenv"
)

// The Extism loader (package internal/extism) with real Extism-PDK plugins built from
// guests/extism by `make extism-guests` (standard Go, github.com/extism/go-pdk)
// and hand-written WAT fixtures against extism:host/env.

// extismGuestWasm returns the path of guests/extism/extism-<name>.wasm.
func extismGuestWasm(t testing.TB, name string) string {
	t.Helper()
	return testenv.Built(t, filepath.Join("..", "guests", "extism", "extism-"+name+".wasm"), "extism-guests")
}

// extismLoader is the loader every test of a Go Extism guest shares, with
// the log its plugins write to (at debug level): a standard Go guest takes
// about a second to compile, over ten under -race. The run's compilation
// cache (testenv.CompileCache, a directory under make test) makes that once
// per module and run: the in-memory cache of CacheDir "off" drops a module
// when the last plugin of it closes, and the next test compiled it again.
var extismLoader = sync.OnceValues(func() (*Loader, *syncBuffer) {
	logs := &syncBuffer{}
	l, err := NewLoader(LoaderOptions{CacheDir: testenv.CompileCache(),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		panic(err)
	}
	return l, logs
})

// The loader is chosen by the module's imports, and says so.
func TestExtismLoaderChoice(t *testing.T) {
	l, _ := extismLoader()
	for _, c := range []struct{ path, want string }{
		{fixture(t, "minimal"), LoaderNative},
		{fixture(t, "extism_echo"), LoaderExtism},
		{extismGuestWasm(t, "tools"), LoaderExtism},
	} {
		rep, err := l.Inspect(context.Background(), Config{Path: c.path})
		if err != nil {
			t.Fatalf("%s: Inspect: %v", c.path, err)
		}
		if len(rep.Problems) > 0 {
			t.Errorf("%s: report problems %q, want none", c.path, rep.Problems)
		}
		if rep.Loader != c.want {
			t.Errorf("%s: report Loader = %q, want %s", c.path, rep.Loader, c.want)
		}
		if p := load(t, l, Config{Path: c.path}); p.Loader() != c.want {
			t.Fatalf("%s: Plugin.Loader() = %s, want %s", c.path, p.Loader(), c.want)
		}
	}
}

func TestExtismLoadErrors(t *testing.T) {
	l := newLoader(t)
	cases := []struct {
		name string
		cfg  Config
		kind error
		want []string
	}{
		{"imports", Config{Path: fixture(t, "extism_badimport")}, ErrLoad, []string{
			"extism:host/env.no_such_function, which Extism (go-sdk v1.7.1) does not provide",
			"extism:host/user.my_function, a host function neither morph nor the embedding host provides",
			"morph:host/v1.log: an Extism plugin may import only",
			"extism:host/env.http_request with signature (i32) -> (i32), want (i64, i64) -> (i64)",
		}},
		{"export signature", Config{Path: fixture(t, "extism_badexports")}, ErrABIMismatch, []string{
			"export morph_build_prompt has signature (i32, i32) -> (i64), want () -> (i32)"}},
		{"neither hooks nor tools", Config{Path: fixture(t, "extism_nohooks")}, ErrABIMismatch, []string{
			"must export morph_describe (a morph plugin), describe and call or list_tools and call_tool (an MCP tool plugin), or have its plain exports made tools"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := l.Load(context.Background(), c.cfg)
			if !errors.Is(err, c.kind) {
				t.Fatalf("err = %v, want %v", err, c.kind)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// End to end: a morph plugin and an Extism tool plugin, both written with
// the Extism Go PDK, in a run of the engine. The hooks plugin builds the
// prompt, denies a tool (before_tool_call) and logs each turn's end
// (on_final, through Extism's log_info); the tool plugin's tools are
// served with their schemas, and a result with isError reaches the model as
// the tool's error.
func TestExtismPluginsInARun(t *testing.T) {
	l, logs := extismLoader()
	hooks := l.Extender(Config{Path: extismGuestWasm(t, "hooks"), Values: map[string]string{"deny_tools": "reverse", "style": "Be exact."}},
		engine.MiddlewareConfig{})
	tools := l.Extender(Config{Path: extismGuestWasm(t, "tools")}, engine.MiddlewareConfig{})
	m := &scriptModel{replies: []string{
		`{"type":"tool_call","tool_call":{"tool_name":"reverse","tool_params":{"text":"abc"}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"divide","tool_params":{"a":1,"b":0}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"divide","tool_params":{"a":6}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"divide","tool_params":{"a":6,"b":4}}}`,
		`{"type":"final","final":{"output":"1.5"}}`,
	}}
	e := engine.New(m, nil, engine.WithExtenders(hooks, tools))
	defer e.Close(context.Background())
	s := e.NewSession("s-1")
	final, rc, err := s.RunTurn(context.Background(), "divide 6 by 4", engine.RunOptions{})
	if err != nil || final.Output != "1.5" {
		t.Fatalf("final %+v err %v", final, err)
	}
	if !strings.Contains(rc.SystemPrompt, "## House style (from extism-hooks plugin)\n- Be exact.") {
		t.Fatalf("system prompt not built by the plugin:\n%s", rc.SystemPrompt)
	}
	for i, want := range []string{
		"Tool call denied: reverse is denied by extism-hooks",
		"division by zero",
		"missing property", // the inputSchema, checked by the engine before the guest sees the call
		"1.5",
	} {
		if obs := rc.Steps[i].Observation; !strings.Contains(obs, want) {
			t.Errorf("step %d observation %q, want %q", i+1, obs, want)
		}
	}
	if n := len(linesWith(logs.String(), "extism-hooks: session s-1 turn 1 ended final", "plugin=extism-hooks")); n != 1 {
		t.Errorf("%d on_final log lines:\n%s", n, logs.String())
	}
	st := e.Status()
	loader := func(i int) string { return st.Plugins[i].Details.(*Details).Loader }
	if len(st.Plugins) != 2 {
		t.Fatalf("status: %d plugins, want 2: %+v", len(st.Plugins), st.Plugins)
	}
	for i := range st.Plugins {
		if got := loader(i); got != LoaderExtism {
			t.Errorf("status: plugin %d's Loader = %q, want %s", i, got, LoaderExtism)
		}
	}
	if got := strings.Join(st.Plugins[1].Tools, ","); got != "divide,reverse" {
		t.Errorf("status: the tools plugin's Tools = %s, want divide,reverse", got)
	}
}

// An Extism tool plugin's manifest is made from its describe: named after
// the configuration or the file, no hooks, its tools with their inputSchema.
func TestExtismToolManifest(t *testing.T) {
	l, _ := extismLoader()
	for name, want := range map[string]string{"": "extism-tools", "my-tools": "my-tools"} {
		p := load(t, l, Config{Name: name, Path: extismGuestWasm(t, "tools")})
		m := p.Manifest()
		if m.Name != want {
			t.Errorf("configured name %q: manifest Name = %q, want %q", name, m.Name, want)
		}
		if p.Name() != want {
			t.Errorf("configured name %q: Plugin.Name() = %q, want %q", name, p.Name(), want)
		}
		if m.ABIVersion != abi.Version {
			t.Errorf("configured name %q: ABIVersion = %d, want %d", name, m.ABIVersion, abi.Version)
		}
		if len(m.Hooks) != 0 {
			t.Errorf("configured name %q: Hooks = %q, want none", name, m.Hooks)
		}
		if len(m.Tools) != 2 {
			t.Fatalf("configured name %q: %d tools, want 2: %+v", name, len(m.Tools), m.Tools)
		}
		if m.Tools[1].Name != "divide" {
			t.Errorf("configured name %q: the second tool is %q, want divide", name, m.Tools[1].Name)
		}
		var schema struct{ Required []string }
		if err := json.Unmarshal(m.Tools[1].Parameters, &schema); err != nil {
			t.Fatalf("divide's parameters %s: %v", m.Tools[1].Parameters, err)
		}
		if got := strings.Join(schema.Required, ","); got != "a,b" {
			t.Fatalf("divide's parameters %s require %q, want a,b", m.Tools[1].Parameters, got)
		}
	}
}

// A guest's Extism error is ErrGuest with its message and keeps the
// instance; a non-zero return without one is ErrGuest too.
func TestExtismGuestErrors(t *testing.T) {
	p := load(t, newLoader(t), Config{Path: fixture(t, "extism_echo")})
	_, err := p.Call(context.Background(), abi.ExportOnToolSuccess, []byte(`{}`))
	if !errors.Is(err, ErrGuest) || !strings.HasSuffix(err.Error(), "plugin reported an error: tool store unavailable") {
		t.Fatalf("on_tool_success: %v", err)
	}
	_, err = p.Call(context.Background(), abi.ExportFallbackFinal, []byte(`{}`))
	if !errors.Is(err, ErrGuest) || !strings.Contains(err.Error(), "returned 7 without an error message") {
		t.Fatalf("fallback_final: %v", err)
	}
	checkOneInstance(t, p, 2) // a guest-reported error keeps the instance
}

// The isolation modes apply to Extism plugins as to native ones: the same
// sequences as TestIsolationModes, on extism_echo's per-instance counter.
func TestExtismIsolationModes(t *testing.T) {
	l := newLoader(t)
	for _, c := range []struct {
		mode  string
		steps []string
		insts uint64
	}{
		{IsolationPooled, []string{"a", "calls: 1", "b", "calls: 2", "a", "calls: 3"}, 1},
		{IsolationSession, []string{"a", "calls: 1", "b", "calls: 1", "a", "calls: 2", "b", "calls: 2"}, 2},
		{IsolationCall, []string{"a", "calls: 1", "a", "calls: 1", "b", "calls: 1"}, 4},
	} {
		t.Run(c.mode, func(t *testing.T) {
			p := load(t, l, Config{Path: fixture(t, "extism_echo"), Isolation: c.mode, Hooks: []string{abi.HookBuildPrompt}})
			expect(t, engine.New(finalModel{}, nil, p.hookOptions()...), c.steps...)
			if st := p.Stats(); st.Instantiated != c.insts || st.Discarded != 0 {
				t.Fatalf("stats %+v, want %d instances", st, c.insts)
			}
		})
	}
}

// An Extism plugin's input limit is the configured one (no kernel
// arithmetic lowers it): an input at the limit arrives whole when it fits
// in memory_mb beside the guest, and one that does not fit there, the
// kernel's memory and the guest's sharing memory_mb, is ErrInputTooLarge
// naming memory_mb, never an empty or cut input.
func TestExtismInputLimit(t *testing.T) {
	input := func(n int) []byte { return append(bytes.Repeat([]byte{'x'}, n-16), "0123456789abcdef"...) }
	for _, c := range []struct {
		mib  uint32
		fits bool
	}{{8, true}, {4, false}} {
		p := load(t, newLoader(t), Config{Path: fixture(t, "extism_echo"), Limits: Limits{MemoryMiB: c.mib}})
		if p.limits.MaxInputBytes != DefaultMaxInputBytes {
			t.Fatalf("memory_mb %d: input limit %d, want the default %d", c.mib, p.limits.MaxInputBytes, DefaultMaxInputBytes)
		}
		out, err := p.Call(context.Background(), abi.ExportBuildParams, input(DefaultMaxInputBytes))
		switch {
		case c.fits && (err != nil || string(out) != "0123456789abcdef"):
			t.Fatalf("memory_mb %d, an input at the limit: %q, %v; want its last 16 bytes", c.mib, out, err)
		case !c.fits && (!errors.Is(err, ErrInputTooLarge) || !strings.Contains(err.Error(), "memory_mb")):
			t.Fatalf("memory_mb %d, an input at the limit: %q, %v; want ErrInputTooLarge naming memory_mb", c.mib, out, err)
		}
		if _, err := p.Call(context.Background(), abi.ExportBuildParams, input(DefaultMaxInputBytes+1)); !errors.Is(err, ErrInputTooLarge) {
			t.Fatalf("memory_mb %d, an input over the limit: %v, want ErrInputTooLarge", c.mib, err)
		}
		if out, err := p.Call(context.Background(), abi.ExportBuildParams, input(100)); err != nil || string(out) != "0123456789abcdef" {
			t.Fatalf("memory_mb %d, a small input after: %q, %v", c.mib, out, err)
		}
	}
}

// extismProbe loads the probe plugin in one of its modes.
func extismProbe(t *testing.T, mode string, cfg Config) *Plugin {
	t.Helper()
	l, _ := extismLoader()
	cfg.Path = extismGuestWasm(t, "probe")
	values := map[string]string{"mode": mode}
	for k, v := range cfg.Values {
		values[k] = v
	}
	cfg.Values = values
	return load(t, l, cfg)
}

// The hostile-guest matrix for the Extism loader: each attack is a typed
// error within the call's deadline, the plugin serves on (on a fresh
// instance after anything but a guest-reported error), and an agent run
// with the hostile prompt builder ends with a final.
func TestExtismHostileGuests(t *testing.T) {
	dir := t.TempDir()
	granted := filepath.Join(dir, "granted")
	os.Mkdir(granted, 0o755)
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("host secret"), 0o600)
	t.Setenv("MORPH_EXTISM_SECRET", "must-not-leak")

	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		w.Write([]byte("secret"))
	}))
	defer other.Close()
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/stolen", http.StatusFound)
	}))
	defer allowed.Close()
	grants := Grants{Paths: []PathGrant{{Host: granted, Guest: "/data"}}, Hosts: []string{strings.TrimPrefix(allowed.URL, "http://")}}

	const timeout = 2 * time.Second
	cases := []struct {
		name   string
		mode   string
		values map[string]string
		limits Limits
		kind   error
		want   string
	}{
		{"read a file outside the grants", "file", map[string]string{"path": "/etc/passwd"}, Limits{}, ErrGuest, "open /etc/passwd"},
		{"read a file out of a granted directory", "file", map[string]string{"path": "/data/../secret.txt"}, Limits{}, ErrGuest, "open /data/../secret.txt"},
		{"write a read-only grant", "write", map[string]string{"path": "/data/new.txt"}, Limits{}, ErrGuest, "read-only file system"},
		{"read the environment", "env", nil, Limits{}, ErrGuest, "the environment is empty"},
		{"reach a host not allowed", "http", map[string]string{"url": other.URL + "/"}, Limits{}, ErrNotGranted, "is not in the plugin's allowed_hosts"},
		{"reach a host not allowed by redirect", "http", map[string]string{"url": allowed.URL + "/"}, Limits{}, ErrNotGranted, "redirect from " + allowed.URL},
		{"exhaust memory", "alloc", nil, Limits{MemoryMiB: 4}, ErrTrap, "unreachable"},
		{"spin", "spin", nil, Limits{Timeout: 300 * time.Millisecond}, ErrTimeout, "deadline exceeded"},
		// the trap's kind is the point, not the deadline: one generous
		// enough for the recursion to fill 4 MiB under -race on a loaded
		// machine (it ran past 2 s there)
		{"recurse", "recurse", nil, Limits{MemoryMiB: 4, Timeout: time.Minute}, ErrTrap, "unreachable"},
		// with the default memory, the call stack's bound (max_stack_kb,
		// by instrumentation) comes before the guest's memory is full
		{"recurse past the stack limit", "recurse", nil, Limits{Timeout: time.Minute}, ErrTrap, "max_stack_kb"},
		// as for recurse, the kind is the point: under -race on a
		// machine at load 9 writing the megabyte ran past 2 s
		{"emit huge output", "huge", nil, Limits{Timeout: time.Minute}, ErrOutputTooLarge, "bytes, limit 1048576"},
		{"emit malformed JSON", "badjson", nil, Limits{}, ErrBadOutput, "this is not json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.limits.Timeout == 0 {
				c.limits.Timeout = timeout
			}
			p := extismProbe(t, c.mode, Config{Values: c.values, Limits: c.limits, Grants: grants})
			before := p.Stats()
			start := time.Now()
			_, err := invoke[abi.PromptOutput](context.Background(), p, abi.ExportBuildPrompt, abi.PromptInput{Task: "t"})
			elapsed := time.Since(start)
			if !errors.Is(err, c.kind) || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.want)) {
				t.Fatalf("err = %v, want %v containing %q", err, c.kind, c.want)
			}
			if !strings.Contains(err.Error(), `plugin "extism-probe" export morph_build_prompt`) {
				t.Fatalf("the error does not name the plugin and export: %v", err)
			}
			if elapsed > c.limits.Timeout+500*time.Millisecond {
				t.Fatalf("error after %v, deadline %v", elapsed, c.limits.Timeout)
			}
			for _, leak := range []string{"must-not-leak", "host secret", "root:"} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("the error leaks %q: %v", leak, err)
				}
			}
			after := p.Stats()
			discarded := uint64(1)
			if c.kind == ErrGuest {
				discarded = 0
			}
			if after.Faults-before.Faults != 1 || after.Discarded-before.Discarded != discarded {
				t.Fatalf("stats before %+v after %+v", before, after)
			}
			if _, err := p.Call(context.Background(), abi.ExportDescribe, nil); err != nil {
				t.Fatalf("the plugin does not serve after the attack: %v", err)
			}
			var warned []string
			opts := append(p.hookOptions(), engine.WithEventHandler(func(ev engine.Event) {
				if ev.Kind == engine.EventWarning {
					warned = append(warned, ev.Err.Error())
				}
			}))
			final, rc, err := engine.New(finalModel{}, nil, opts...).Run(context.Background(), "t", engine.RunOptions{})
			checkFinal(t, "run", final, err, "ok")
			if !strings.HasPrefix(rc.SystemPrompt, engine.DefaultIdentity) {
				t.Errorf("system prompt %q, want the default identity's", rc.SystemPrompt)
			}
			if len(warned) != 1 || !strings.Contains(warned[0], "extism-probe") {
				t.Fatalf("want one warning naming the plugin, got %q", warned)
			}
		})
	}
	if n := otherHits.Load(); n != 0 {
		t.Fatalf("the host that was not allowed got %d requests", n)
	}
}

// What the grants give, the Extism guest gets, and nothing more: a granted
// directory (read-only unless writable), the named environment variables,
// and HTTP to the allowed hosts with Extism's status and headers.
func TestExtismGrants(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "note.txt"), []byte("granted note"), 0o644)
	t.Setenv("MORPH_EXTISM_GRANTED", "yes")
	t.Setenv("MORPH_EXTISM_SECRET", "must-not-leak")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte("served"))
	}))
	defer srv.Close()
	grants := Grants{Paths: []PathGrant{{Host: dir, Guest: "/data", Writable: true}}, Env: []string{"MORPH_EXTISM_GRANTED"},
		Hosts: []string{strings.TrimPrefix(srv.URL, "http://")}}
	for _, c := range []struct{ mode, path, url, want string }{
		{"file", "/data/note.txt", "", "read: granted note"},
		{"write", "/data/written.txt", "", "wrote /data/written.txt"},
		{"env", "", "", "env: MORPH_EXTISM_GRANTED=yes"},
		{"http", "", srv.URL, "http 418: served"},
	} {
		p := extismProbe(t, c.mode, Config{Values: map[string]string{"path": c.path, "url": c.url}, Grants: grants})
		out, err := invoke[abi.PromptOutput](context.Background(), p, abi.ExportBuildPrompt, abi.PromptInput{})
		if err != nil || out.SystemPrompt != c.want {
			t.Fatalf("%s: %q, %v; want %q", c.mode, out.SystemPrompt, err, c.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "written.txt")); err != nil || string(b) != "probe" {
		t.Fatalf("the writable grant: %q, %v", b, err)
	}
}

// Extism's host functions called with offsets outside the kernel's memory,
// or that are no memory block: a trap or a typed error, never a silent
// answer; on a kernel whose block headers the guest corrupted, the call
// answers (no kernel operation walks the blocks); and a run through every
// such hook ends with its final.
func TestExtismOutOfBounds(t *testing.T) {
	var logs syncBuffer
	l, err := NewLoader(LoaderOptions{CacheDir: "off", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	p := load(t, l, Config{Path: fixture(t, "extism_oob"), Isolation: IsolationPooled, Limits: Limits{Timeout: 500 * time.Millisecond}})
	for _, c := range []struct {
		export string
		kind   error
		want   string
	}{
		{abi.ExportBuildPrompt, ErrTrap, "extism:host/env.load_u64"},
		{abi.ExportBuildParams, ErrBadOutput, "output [2147483632, +64) is outside the Extism memory"},
		{abi.ExportOnToolSuccess, ErrTrap, "extism:host/env.store_u64"},
		{abi.ExportFallbackFinal, ErrTrap, "extism:host/env.input_load_u64"},
		{abi.ExportAfterRun, ErrOutputTooLarge, "1099511627776 bytes, limit 1048576"},
	} {
		if _, err := p.Call(context.Background(), c.export, []byte(`{}`)); !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %v containing %q", c.export, err, c.kind, c.want)
		}
	}
	out, err := p.Call(context.Background(), abi.ExportBeforeRun, []byte(`{}`))
	if err != nil || string(out) != "{}" {
		t.Fatalf("before_run (soft log and config_get): %q, %v", out, err)
	}
	if out, err := p.Call(context.Background(), abi.ExportOnTurnStart, []byte(`{}`)); err != nil || string(out) != "{}" {
		t.Fatalf("on_turn_start (a corrupted block header, then alloc): %q, %v", out, err)
	}
	if !strings.Contains(logs.String(), "guest log call with an offset that is not an Extism memory block") {
		t.Fatalf("the bad log call was not reported:\n%s", logs.String())
	}
	if st := p.Stats(); st.Faults != 5 || st.Discarded != 5 {
		t.Fatalf("stats %+v: want 5 faults, each instance discarded", st)
	}
	// A run through the faulty hooks: turn start, prompt, params, a tool
	// success, after_run.
	reg := engine.NewRegistry()
	reg.Register(echoTool{})
	opts := append(p.hookOptions(), engine.WithMiddleware(p.middleware()))
	m := &scriptModel{replies: []string{
		`{"type":"tool_call","tool_call":{"tool_name":"echo","tool_params":{}}}`,
		`{"type":"final","final":{"output":"ok"}}`,
	}}
	final, _, err := engine.New(m, reg, opts...).Run(context.Background(), "t", engine.RunOptions{})
	checkFinal(t, "run", final, err, "ok")
}

// echoTool is a native tool that succeeds, so that on_tool_success runs.
type echoTool struct{}

func (echoTool) Name() string            { return "echo" }
func (echoTool) Description() string     { return "answers ok" }
func (echoTool) ParameterSchema() string { return `{"type":"object"}` }
func (echoTool) Execute(context.Context, map[string]any) (string, error) {
	return "ok", nil
}

// BenchmarkExtismCall is an Extism plugin's call on a warm instance
// against go-sdk's own: extism-hooks' build_prompt (standard Go, go-pdk)
// with a 100 B and a 1 KB PromptInput, called
//   - gosdk-bare: through go-sdk as its README calls a plugin
//     (NewCompiledPlugin, Instance, Plugin.Call), with no timeout;
//   - gosdk-timeout: the same with Manifest.Timeout, morph's default call
//     timeout (go-sdk then closes the module when the call's context ends);
//   - morph-extism: through morph's Extism loader;
//   - native: the go-hooks example, the same logic on morph's own ABI.
//
// scripts/bench.sh (make bench BENCH=extism) compares them, one run's rounds
// alternating the contenders.
func BenchmarkExtismCall(b *testing.B) {
	hooks := extismGuestWasm(b, "hooks")
	calls := []struct {
		name string
		call func(b *testing.B) func(in []byte) ([]byte, error)
	}{
		{"gosdk-bare", func(b *testing.B) func([]byte) ([]byte, error) { return goSDKBuildPrompt(b, hooks, 0) }},
		{"gosdk-timeout", func(b *testing.B) func([]byte) ([]byte, error) {
			return goSDKBuildPrompt(b, hooks, uint64(DefaultTimeout.Milliseconds()))
		}},
		{"morph-extism", func(b *testing.B) func([]byte) ([]byte, error) { return morphBuildPrompt(b, hooks) }},
		{"native", func(b *testing.B) func([]byte) ([]byte, error) { return morphBuildPrompt(b, goHooksStd.wasm(b)) }},
	}
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			call := c.call(b)
			if _, err := call(jsonPayload(benchSizes[0].n)); err != nil { // go-sdk initializes the guest in the first call
				b.Fatal(err)
			}
			for _, s := range benchSizes[:2] {
				in := jsonPayload(s.n)
				b.Run(s.name, func(b *testing.B) {
					b.SetBytes(int64(len(in)))
					b.ReportAllocs()
					for b.Loop() {
						if out, err := call(in); err != nil || len(out) == 0 {
							b.Fatalf("%d bytes, %v", len(out), err)
						}
					}
				})
			}
		})
	}
}

// morphBuildPrompt is build_prompt of a plugin of the module at path, loaded
// by morph with the defaults.
func morphBuildPrompt(b *testing.B, path string) func([]byte) ([]byte, error) {
	p := load(b, newLoader(b), Config{Path: path})
	return func(in []byte) ([]byte, error) { return p.Call(context.Background(), abi.ExportBuildPrompt, in) }
}

// goSDKBuildPrompt is build_prompt of the Extism module at path through
// go-sdk alone, as its README calls a plugin; timeoutMS is
// Manifest.Timeout (0: none).
func goSDKBuildPrompt(b *testing.B, path string, timeoutMS uint64) func([]byte) ([]byte, error) {
	ctx := context.Background()
	wasm, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	c, err := sdk.NewCompiledPlugin(ctx, sdk.Manifest{Wasm: []sdk.Wasm{sdk.WasmData{Data: wasm}}, Timeout: timeoutMS},
		sdk.PluginConfig{EnableWasi: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(ctx) })
	pl, err := c.Instance(ctx, sdk.PluginInstanceConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pl.Close(ctx) })
	return func(in []byte) ([]byte, error) {
		rc, out, err := pl.Call(abi.ExportBuildPrompt, in)
		if err == nil && rc != 0 {
			err = fmt.Errorf("go-sdk: %s returned %d", abi.ExportBuildPrompt, rc)
		}
		return out, err
	}
}

// A module with no import section loads as an Extism plugin when its
// configuration makes its exports tools, and its tools answer (issue 28:
// the loader used to write an import section before its header).
func TestExtismNoImportSection(t *testing.T) {
	p := load(t, newLoader(t), Config{Path: fixture(t, "extism_noimports"),
		Tools: []ExportTool{{Export: "answer"}, {Export: "refuse"}}})
	if p.Loader() != LoaderExtism {
		t.Fatalf("Loader = %s, want %s", p.Loader(), LoaderExtism)
	}
	if out, err := callTool(t, p, "answer", nil); err != nil || out != "" {
		t.Fatalf("answer: %q, %v; want no output", out, err)
	}
	if out, err := callTool(t, p, "refuse", nil); !errors.Is(err, ErrGuest) || !strings.Contains(err.Error(), "returned 3 without an error message") {
		t.Fatalf("refuse: %q, %v; want ErrGuest naming its return code", out, err)
	}
}

// An Extism plugin's stack budget (max_stack_kb) is shared evenly by its
// main module and its linked modules, so that a call crossing modules
// keeps the plugin's bound: a linked module recurses as deep, within a
// plugin of budget S with one linked module, as it does alone within S/2
// (one call deeper: alone, its run's frame takes from the same budget),
// and less deep than alone within S.
func TestExtismLinkedStackShare(t *testing.T) {
	const budget = 256 << 10
	l := newLoader(t)
	tool := []ExportTool{{Export: "run", Input: "field:s"}}
	plugin := func(stack int, linked bool) *Plugin {
		cfg := Config{Path: fixture(t, "extism_stacklib"), Tools: tool, Limits: Limits{MaxStackBytes: stack, Timeout: time.Minute}}
		if linked {
			cfg.Path, cfg.Modules = fixture(t, "extism_stackmain"), []LinkedModule{{Name: "lib", Path: fixture(t, "extism_stacklib")}}
		}
		return load(t, l, cfg)
	}
	// deepest is the deepest recursion p serves, found by bisection:
	// each deeper one is a StackLimitError.
	deepest := func(p *Plugin) int {
		lo, hi := 0, 1<<20 // lo succeeds, hi fails
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			_, err := callTool(t, p, "run", map[string]any{"s": strings.Repeat("x", mid)})
			var stack *StackLimitError
			switch {
			case err == nil:
				lo = mid
			case errors.As(err, &stack):
				hi = mid
			default:
				t.Fatalf("a recursion %d deep: %v, want success or a StackLimitError", mid, err)
			}
		}
		return lo
	}
	alone, half, linked := deepest(plugin(budget, false)), deepest(plugin(budget/2, false)), deepest(plugin(budget, true))
	if half == 0 || linked < half || linked > half+1 || linked >= alone {
		t.Fatalf("deepest recursion: %d alone with %d bytes of stack, %d alone with half, %d linked with all; want linked = half (+1) < alone",
			alone, budget, half, linked)
	}
}

// An Extism plugin whose initialization calls http_request has no
// snapshot: every instance initializes, and so sends its own request.
func TestExtismInitHTTPNoSnapshot(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	defer srv.Close()
	p := load(t, newLoader(t), Config{Path: fixture(t, "extism_inithttp"), Isolation: IsolationCall,
		Tools:  []ExportTool{{Export: "run"}},
		Values: map[string]string{"req": `{"url":"` + srv.URL + `/","method":"GET"}`},
		Grants: Grants{Hosts: []string{strings.TrimPrefix(srv.URL, "http://")}}})
	for i := range 2 {
		if _, err := callTool(t, p, "run", nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	st := p.Memory()
	if st.Image != 0 || !strings.Contains(st.NoSnapshot, "http_request") {
		t.Fatalf("memory status %+v, want no image, for http_request", st)
	}
	if n := p.Stats().Instantiated; requests.Load() != int32(n) || n < 3 {
		t.Fatalf("%d requests for %d instances, want one each (at least 3: describe's and the calls')", requests.Load(), n)
	}
}

// The vars an Extism plugin's initialization sets are every new instance's,
// with a snapshot as without (the image carries them), and the vars a call
// sets are its instance's only.
func TestExtismInitVars(t *testing.T) {
	for _, noSnapshot := range []bool{false, true} {
		p := load(t, newLoader(t), Config{Path: fixture(t, "extism_initvar"), Isolation: IsolationCall, NoSnapshot: noSnapshot,
			Tools: []ExportTool{{Export: "run"}}})
		for i := range 3 {
			if out, err := callTool(t, p, "run", nil); err != nil || out != "init" {
				t.Fatalf("no_snapshot %v, call %d: %q, %v; want the var its initialization set", noSnapshot, i, out, err)
			}
		}
		if st := p.Memory(); (st.Image > 0) == noSnapshot {
			t.Fatalf("no_snapshot %v: memory status %+v", noSnapshot, st)
		}
	}
}

// A command module's constructors run once per instance, as go-sdk runs
// them: _start runs them itself, so the instance's runtime initialization
// is not run before it; a plain export of the same module gets them run
// before its first call. extism_ctors answers how many times they ran.
func TestExtismCommandCtors(t *testing.T) {
	for _, noSnapshot := range []bool{false, true} {
		p := load(t, newLoader(t), Config{Path: fixture(t, "extism_ctors"), Isolation: IsolationCall, NoSnapshot: noSnapshot,
			Tools: []ExportTool{{Export: "_start", Name: "start"}, {Export: "count"}}})
		for i := range 2 {
			for _, tool := range []string{"start", "count"} {
				if out, err := callTool(t, p, tool, nil); err != nil || out != "1" {
					t.Fatalf("no_snapshot %v, call %d of %s: %q, %v; want the constructors run once (\"1\")", noSnapshot, i, tool, out, err)
				}
			}
		}
	}
}

// memory_mb holds an Extism plugin's modules together: linked modules
// whose declared memories add up past it are refused at load, naming
// memory_mb and each module, and fit when it is raised.
func TestExtismLinkedMemory(t *testing.T) {
	l := newLoader(t)
	cfg := func(mib uint32) Config {
		return Config{Path: fixture(t, "extism_stackmain"), Tools: []ExportTool{{Export: "run"}}, Limits: Limits{MemoryMiB: mib},
			Modules: []LinkedModule{{Name: "lib", Path: fixture(t, "extism_biglib")}, {Name: "other", Path: fixture(t, "extism_biglib")}}}
	}
	_, err := l.Load(context.Background(), cfg(4))
	var limit *MemoryLimitError
	want := []ModuleMemory{{Module: "main", Bytes: 64 << 10}, {Module: "lib", Bytes: 40 * 64 << 10}, {Module: "other", Bytes: 40 * 64 << 10}}
	if !errors.Is(err, ErrLoad) || !errors.As(err, &limit) || limit.LimitMiB != 4 || limit.Held <= 4<<20 || !slices.Equal(limit.Declared, want) ||
		!strings.Contains(err.Error(), "memory_mb = 4") || !strings.Contains(err.Error(), "lib 2621440") {
		t.Fatalf("two linked modules of 2.5 MiB in memory_mb = 4: %v, want ErrLoad with a MemoryLimitError naming memory_mb and each module's memory %v", err, want)
	}
	p := load(t, l, cfg(8))
	if _, err := callTool(t, p, "run", nil); err != nil {
		t.Fatalf("in memory_mb = 8: %v", err)
	}
}

// A recursion through a linked module (one that imports its own export)
// answers right at a small depth, and an unbounded one ends with a
// LinkedDepthError naming the limit (max_linked_depth, its default or as
// set): never a crash of the process nor a corrupted call.
func TestExtismLinkedRecursion(t *testing.T) {
	l := newLoader(t)
	for _, c := range []struct{ set, limit int }{{0, DefaultMaxLinkedDepth}, {8, 8}} {
		p := load(t, l, Config{Path: fixture(t, "extism_stackmain"), Tools: []ExportTool{{Export: "run", Input: "field:s"}},
			Modules: []LinkedModule{{Name: "lib", Path: fixture(t, "extism_reclib")}}, Limits: Limits{MaxLinkedDepth: c.set}})
		for _, n := range []int{1, 3, c.limit - 1} {
			if _, err := callTool(t, p, "run", map[string]any{"s": strings.Repeat("x", n)}); err != nil {
				t.Fatalf("max_linked_depth %d: a recursion %d deep through the linked module: %v", c.set, n, err)
			}
		}
		for range 2 { // the instance serves the next call after the refusal
			_, err := callTool(t, p, "run", map[string]any{"s": strings.Repeat("x", 10*c.limit)})
			var depth *LinkedDepthError
			if !errors.Is(err, ErrTrap) || !errors.As(err, &depth) || depth.Limit != c.limit || !strings.Contains(err.Error(), "max_linked_depth") {
				t.Fatalf("max_linked_depth %d: a recursion %d deep through the linked module: %v, want ErrTrap with a LinkedDepthError of limit %d", c.set, 10*c.limit, err, c.limit)
			}
			if _, err := callTool(t, p, "run", map[string]any{"s": "xx"}); err != nil {
				t.Fatalf("max_linked_depth %d: a recursion 2 deep after the refusal: %v", c.set, err)
			}
		}
	}
	_, err := l.Load(context.Background(), Config{Path: fixture(t, "extism_stackmain"), Tools: []ExportTool{{Export: "run"}},
		Modules: []LinkedModule{{Name: "lib", Path: fixture(t, "extism_reclib")}}, Limits: Limits{MaxLinkedDepth: LinkedDepthCeiling + 1}})
	if !errors.Is(err, ErrLoad) || !strings.Contains(err.Error(), "max_linked_depth") {
		t.Fatalf("max_linked_depth past the ceiling: %v, want ErrLoad naming it", err)
	}
}

// memory_mb caps an Extism guest's memory and the kernel's together from
// the kernel's first growth: a call with an empty input whose guest holds
// all of memory_mb but 64 KiB gets 0 from an alloc of 2 MiB, and a block
// from an alloc that fits (see extism_allocnear).
func TestExtismKernelShare(t *testing.T) {
	p := load(t, newLoader(t), Config{Path: fixture(t, "extism_allocnear"), Isolation: IsolationCall,
		Tools: []ExportTool{{Export: "run", Input: "field:s"}}, Limits: Limits{MemoryMiB: 4}})
	if _, err := callTool(t, p, "run", map[string]any{"s": ""}); err != nil {
		t.Fatalf("allocs beside a guest holding memory_mb less 64 KiB: %v, want 2 MiB refused and 16 KiB served", err)
	}
}
