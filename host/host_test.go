package host

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/llm"
)

// TestMain keeps the tests to a temporary home and cache directory (a
// loader with the default cache directory would fill the developer's), and
// the default logger quiet.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	testenv.Main(m)
}

// fixture returns the path of a guests/testdata module built by `make fixtures`.
func fixture(t testing.TB, name string) string {
	t.Helper()
	return testenv.Built(t, filepath.Join("..", "guests", "testdata", name+".wasm"), "fixtures")
}

func newLoader(t testing.TB) *Loader {
	t.Helper()
	l, err := NewLoader(LoaderOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

func load(t testing.TB, l *Loader, cfg Config) *Plugin {
	t.Helper()
	p, err := l.Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// checkFinal checks that a run of the engine, named what, ended without an
// error in a final answer of output want.
func checkFinal(t *testing.T, what string, final *engine.Final, err error, want string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if final == nil {
		t.Fatalf("%s: no final answer", what)
	}
	if final.Output != want {
		t.Errorf("%s: final output %q, want %q", what, final.Output, want)
	}
}

// checkCount checks a count, named name: one of a plugin's counters
// (Stats, MemoryStatus, SessionStatus), say.
func checkCount[N ~int | ~uint64](t testing.TB, name string, got, want N) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", name, got, want)
	}
}

// checkErr checks that err, what returned, is of kind and says each of
// wants.
func checkErr(t *testing.T, what string, err, kind error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", what, kind)
	}
	if !errors.Is(err, kind) {
		t.Errorf("%s: error %v, want %v", what, err, kind)
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q, want it to say %q", what, err, want)
		}
	}
}

// checkPluginErr is checkErr for an error that is a *Error of the plugin
// named plugin, which it returns.
func checkPluginErr(t *testing.T, what string, err, kind error, plugin string, wants ...string) *Error {
	t.Helper()
	checkErr(t, what, err, kind, wants...)
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("%s: error %v (%T), want a *Error", what, err, err)
	}
	if pe.Plugin != plugin {
		t.Errorf("%s: the error's Plugin = %q, want %q", what, pe.Plugin, plugin)
	}
	return pe
}

// checkOneInstance checks that all of p's calls ran on one instance, kept
// after faults faults (guest-reported errors keep it).
func checkOneInstance(t *testing.T, p *Plugin, faults uint64) {
	t.Helper()
	st := p.Stats()
	checkCount(t, "Faults", st.Faults, faults)
	checkCount(t, "Discarded", st.Discarded, 0)
	checkCount(t, "Instantiated", st.Instantiated, 1)
}

// The minimal plugin of SPEC.md loads, describes itself and builds a prompt.
func TestMinimalSpecPlugin(t *testing.T) {
	spec, err := os.ReadFile("../abi/SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	wat, err := os.ReadFile("../guests/testdata/minimal.wat")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.SplitN(string(wat), "\n", 2)[1]
	if !strings.Contains(string(spec), "```wat\n"+body+"```") {
		t.Fatal("guests/testdata/minimal.wat no longer matches the example in abi/SPEC.md")
	}
	p := load(t, newLoader(t), Config{Path: fixture(t, "minimal")})
	m := p.Manifest()
	if p.Name() != "min" {
		t.Errorf("Name = %q, want min", p.Name())
	}
	if m.ABIVersion != 1 {
		t.Errorf("manifest ABIVersion = %d, want 1", m.ABIVersion)
	}
	if want := []string{abi.HookBuildPrompt}; !slices.Equal(m.Hooks, want) {
		t.Errorf("manifest Hooks = %q, want %q", m.Hooks, want)
	}
	out, err := invoke[abi.PromptOutput](context.Background(), p, abi.ExportBuildPrompt, abi.PromptInput{Task: "x"})
	if err != nil || out.SystemPrompt != "Be brief." {
		t.Fatalf("build_prompt = %+v, %v", out, err)
	}
}

func TestLoadErrors(t *testing.T) {
	l := newLoader(t)
	dir := t.TempDir()
	notWasm := filepath.Join(dir, "notes.wasm")
	os.WriteFile(notWasm, []byte("hello, not a module"), 0o644)
	cases := []struct {
		name string
		cfg  Config
		kind error
		want string
	}{
		{"missing file", Config{Name: "ghost", Path: filepath.Join(dir, "nope.wasm")}, ErrLoad, "nope.wasm"},
		{"not wasm", Config{Name: "notes", Path: notWasm}, ErrLoad, "not a WebAssembly module"},
		{"sha mismatch", Config{Name: "pinned", Path: fixture(t, "minimal"), SHA256: strings.Repeat("0", 64)}, ErrLoad, "sha256 mismatch"},
		{"missing marker", Config{Name: "nm", Path: fixture(t, "nomarker")}, ErrABIMismatch, "found none, this host supports morph_abi_v1"},
		{"wrong version", Config{Name: "v2", Path: fixture(t, "wrongversion")}, ErrABIMismatch, "found morph_abi_v2, this host supports morph_abi_v1"},
		{"missing export", Config{Name: "me", Path: fixture(t, "missingexport")}, ErrABIMismatch, "does not export morph_build_prompt"},
		{"hook not implemented", Config{Name: "min", Path: fixture(t, "minimal"), Hooks: []string{abi.HookFallbackFinal}}, ErrABIMismatch, "implements only"},
		{"imported memory", Config{Name: "im", Path: fixture(t, "import_memory")}, ErrLoad, "imports env.memory, a memory: a plugin imports only functions"},
		{"marker as a global", Config{Name: "mg", Path: fixture(t, "marker_global")}, ErrABIMismatch, "export morph_abi_v1 is a global: the ABI marker must be a function"},
		{"Extism describe as a global", Config{Name: "eg", Path: fixture(t, "extism_describe_global")}, ErrABIMismatch, "export morph_describe is a global, not a function"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := l.Load(context.Background(), c.cfg)
			checkPluginErr(t, "Load", err, c.kind, c.cfg.Name, c.want, c.cfg.Name)
		})
	}
	wasm, _ := os.ReadFile(fixture(t, "minimal"))
	sum := sha256.Sum256(wasm)
	load(t, l, Config{Path: fixture(t, "minimal"), SHA256: strings.ToUpper(hex.EncodeToString(sum[:]))})
}

// A module that is neither morph's nor Extism's (no ABI marker, no
// extism:host/env import) is told what each convention needs.
func TestLoadNeitherConvention(t *testing.T) {
	_, err := newLoader(t).Load(context.Background(), Config{Name: "nm", Path: fixture(t, "nomarker")})
	if !errors.Is(err, ErrABIMismatch) {
		t.Fatalf("err = %v, want ErrABIMismatch", err)
	}
	for _, want := range []string{"neither a morph plugin nor an Extism plugin", "abi/SPEC.md", "morph_abi_v1 () -> ()",
		"morph_alloc", "morph_describe", "morph_call_tool", "guests/extism/README.md", "extism:host/env", "exports describe and call (or list_tools and call_tool)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// Every fault fixture: a typed error within the deadline, the instance
// replaced, the plugin still serving, and an agent run still ending in a final.
func TestFaultFixtures(t *testing.T) {
	const defaultTimeout = 300 * time.Millisecond
	cases := []struct {
		fixture string
		kind    error
		want    string
		timeout time.Duration // 0: defaultTimeout
	}{
		{"loop", ErrTimeout, "", 0},
		{"membomb", ErrTrap, "unreachable", 0},
		{"trap", ErrTrap, "unreachable", 0},
		// An unbounded recursion ends at the plugin's stack limit (some tens
		// of milliseconds), not at its deadline nor at wazero's ceiling,
		// whose trap says "stack overflow": before the limit, wazero let its
		// stack grow to about 100 MB (0.2 s natively, 1 s under -race). The
		// deadline is long so that a loaded machine cannot make it come first.
		{"stackoverflow", ErrTrap, "the guest's call stack would exceed 16777216 bytes", 5 * time.Second},
		{"bigoutput", ErrOutputTooLarge, "2097152 bytes, limit 1048576", 0},
		{"badjson", ErrBadOutput, "this is not json", 0},
		{"badpointer", ErrBadOutput, "outside guest memory", 0},
		{"guesterror", ErrGuest, "prompt store unavailable", 0},
	}
	l := newLoader(t)
	for _, c := range cases {
		timeout := cmp.Or(c.timeout, defaultTimeout)
		t.Run(c.fixture, func(t *testing.T) {
			p := load(t, l, Config{Path: fixture(t, c.fixture), Limits: Limits{Timeout: timeout, MemoryMiB: 4}})
			before := p.Stats()
			start := time.Now()
			_, err := invoke[abi.PromptOutput](context.Background(), p, abi.ExportBuildPrompt, abi.PromptInput{Task: "t"})
			elapsed := time.Since(start)
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %v containing %q", err, c.kind, c.want)
			}
			if !strings.Contains(err.Error(), c.fixture) || !strings.Contains(err.Error(), abi.ExportBuildPrompt) {
				t.Fatalf("error does not name the plugin and export: %v", err)
			}
			if elapsed > min(timeout+100*time.Millisecond, 10*time.Second) {
				t.Fatalf("error after %v, deadline %v", elapsed, timeout)
			}
			after := p.Stats()
			wantDiscard := uint64(1)
			if c.kind == ErrGuest {
				wantDiscard = 0 // a clean error report leaves the instance in service
			}
			if after.Discarded-before.Discarded != wantDiscard || after.Faults-before.Faults != 1 {
				t.Fatalf("stats before %+v after %+v", before, after)
			}
			// Still serving, on a fresh instance when the old one was discarded.
			if _, err := p.Call(context.Background(), abi.ExportDescribe, nil); err != nil {
				t.Fatalf("plugin not serving after the fault: %v", err)
			}
			if got := p.Stats().Instantiated - after.Instantiated; got != wantDiscard {
				t.Fatalf("%d instances created after the fault, want %d", got, wantDiscard)
			}
			// An agent run with the faulty prompt builder still ends with a final.
			var warned []string
			opts := append(p.hookOptions(), engine.WithEventHandler(func(ev engine.Event) {
				if ev.Kind == engine.EventWarning {
					warned = append(warned, ev.Message+": "+ev.Err.Error())
				}
			}))
			final, rc, err := engine.New(finalModel{}, nil, opts...).Run(context.Background(), "t", engine.RunOptions{})
			checkFinal(t, "run", final, err, "ok")
			if !strings.HasPrefix(rc.SystemPrompt, engine.DefaultIdentity) {
				t.Errorf("system prompt %q, want the default identity's", rc.SystemPrompt)
			}
			if len(warned) != 1 {
				t.Errorf("warnings %q, want one naming the plugin", warned)
			} else if !strings.Contains(warned[0], c.fixture) {
				t.Errorf("the warning %q does not name the plugin %s", warned[0], c.fixture)
			}
		})
	}
}

// finalModel answers every request with a final.
type finalModel struct{}

func (finalModel) Chat(context.Context, llm.Request) (llm.Result, error) {
	return llm.Result{Text: `{"type":"final","final":{"output":"ok"}}`}, nil
}

func TestInputAndCallerLimits(t *testing.T) {
	p := load(t, newLoader(t), Config{Path: fixture(t, "echo"), Limits: Limits{MaxInputBytes: 10}})
	if _, err := p.Call(context.Background(), abi.ExportBuildPrompt, make([]byte, 11)); !errors.Is(err, ErrInputTooLarge) {
		t.Fatalf("err = %v, want ErrInputTooLarge", err)
	}
	out, err := p.Call(context.Background(), abi.ExportBuildPrompt, []byte(`{"a":1}`))
	if err != nil || string(out) != `{"a":1}` {
		t.Fatalf("echo = %q, %v", out, err)
	}
	// The caller's own cancellation ends the call too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Call(ctx, abi.ExportBuildPrompt, []byte(`{}`)); err == nil {
		t.Fatal("a call with a cancelled context succeeded")
	}
	if _, err := p.Call(context.Background(), abi.ExportCallTool, []byte(`{}`)); !errors.Is(err, ErrABIMismatch) {
		t.Fatalf("calling an absent export: %v", err)
	}
}

func TestClosedPlugin(t *testing.T) {
	p, err := newLoader(t).Load(context.Background(), Config{Path: fixture(t, "echo")})
	if err != nil {
		t.Fatal(err)
	}
	p.Close(context.Background())
	if _, err := p.Call(context.Background(), abi.ExportBuildPrompt, []byte(`{}`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}

func TestInspect(t *testing.T) {
	l := newLoader(t)
	rep, err := l.Inspect(context.Background(), Config{Path: fixture(t, "minimal")})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Errorf("report Problems = %q, want none", rep.Problems)
	}
	if rep.Manifest == nil {
		t.Error("no Manifest in the report")
	} else if rep.Manifest.Name != "min" {
		t.Errorf("report Manifest.Name = %q, want min", rep.Manifest.Name)
	}
	if got := strings.Join(rep.Markers, ","); got != abi.MarkerV1 {
		t.Errorf("report Markers = %s, want %s", got, abi.MarkerV1)
	}
	if len(rep.SHA256) != 64 {
		t.Errorf("report SHA256 = %q, want 64 hex digits", rep.SHA256)
	}
	var sig string
	for _, e := range rep.Exports {
		if e.Name == abi.ExportBuildPrompt {
			sig = e.Type
		}
	}
	if sig != "(i32, i32) -> (i64)" || strings.Join(rep.Hooks, ",") != abi.HookBuildPrompt {
		t.Fatalf("build_prompt signature %q, hooks %v", sig, rep.Hooks)
	}
	rep, err = l.Inspect(context.Background(), Config{Path: fixture(t, "wrongversion")})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Manifest != nil {
		t.Errorf("report Manifest = %+v of a module that does not load, want none", rep.Manifest)
	}
	if len(rep.Problems) != 1 {
		t.Fatalf("report Problems = %q, want one", rep.Problems)
	}
	if !strings.Contains(rep.Problems[0], "found morph_abi_v2") {
		t.Errorf("the report's problem %q, want it to say found morph_abi_v2", rep.Problems[0])
	}
}

// A guest's stdout reaches the log under its name, up to its byte budget.
func TestGuestOutputCapped(t *testing.T) {
	var logs syncBuffer
	l, err := NewLoader(LoaderOptions{CacheDir: "off", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	p := load(t, l, Config{Path: fixture(t, "chatty"), Limits: Limits{MaxLogBytes: 640}})
	out, err := invoke[abi.PromptOutput](context.Background(), p, abi.ExportBuildPrompt, abi.PromptInput{})
	if err != nil || out.SystemPrompt != "still fine" {
		t.Fatalf("build_prompt = %+v, %v", out, err)
	}
	text := logs.String()
	if n := strings.Count(text, "chatty guest line"); n != 10 {
		t.Fatalf("%d guest lines logged, want the 10 that fit in 640 bytes:\n%s", n, text)
	}
	if strings.Count(text, "guest output over the log limit") != 1 || !strings.Contains(text, "plugin=chatty") {
		t.Fatalf("want one capping warning naming the plugin:\n%s", text)
	}
}

// The host's environment (an API key included) and arguments never reach a
// guest, and host functions given out-of-bounds pointers fail softly.
func TestGuestCannotSeeEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-secret-never-for-guests")
	t.Setenv("MORPH_TEST_SECRET", "also-secret")
	p := load(t, newLoader(t), Config{Path: fixture(t, "snoop")})
	out, err := invoke[abi.PromptOutput](context.Background(), p, abi.ExportBuildPrompt, abi.PromptInput{})
	if err != nil {
		t.Fatal(err)
	}
	if out.SystemPrompt != "env 0 args 0 log ok config -" {
		t.Fatalf("guest saw %q: want no environment, no arguments, and config_get answering -1", out.SystemPrompt)
	}
	if st := p.Stats(); st.Faults != 0 || st.Discarded != 0 {
		t.Fatalf("stats %+v: out-of-bounds host calls must not trap", st)
	}
}

// Instantiation and call have a deadline each: with a 1 s timeout, a call
// mode plugin that takes 600 ms to instantiate and 600 ms to answer works.
func TestInstantiationHasItsOwnDeadline(t *testing.T) {
	p := load(t, newLoader(t), Config{Path: fixture(t, "slowstart"), Isolation: IsolationCall, Limits: Limits{Timeout: time.Second}})
	out, err := p.Call(context.Background(), abi.ExportBuildPrompt, []byte(`{}`))
	if err != nil || string(out) != `{"system_prompt":"Be brief."}` {
		t.Fatalf("out %q err %v", out, err)
	}
	if s := p.Stats(); s.Instantiated != 2 || s.Faults != 0 {
		t.Fatalf("stats %+v: want describe's instance and the call's", s)
	}
}

// A call refused before it reaches the guest is counted as a call and a fault.
func TestRefusedCallsAreCounted(t *testing.T) {
	p := load(t, newLoader(t), Config{Path: fixture(t, "minimal"), Limits: Limits{MaxInputBytes: 10}})
	before := p.Stats()
	if _, err := p.Call(context.Background(), abi.ExportBuildPrompt, []byte(`{"task":"too long"}`)); !errors.Is(err, ErrInputTooLarge) {
		t.Fatalf("err %v, want ErrInputTooLarge", err)
	}
	if s := p.Stats(); s.Calls != before.Calls+1 || s.Faults != before.Faults+1 {
		t.Fatalf("stats %+v, before %+v", s, before)
	}
}
