package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/sandbox"
	"github.com/morphhost/morph/host/internal/sandbox/sandboxtest"
	"github.com/morphhost/morph/internal/testenv"
)

// capLoader is shared by the capability tests, so the standard Go guest
// compiles once: through testenv.CompileCache, since a cache in memory
// alone drops the compiled module when the test that loaded it closes its
// plugin, and the next test compiled it again. Its log is captured.
var capLoader struct {
	once sync.Once
	l    *Loader
	logs *syncBuffer
	err  error
}

func capGo(t *testing.T) (*Loader, *syncBuffer, string) {
	t.Helper()
	capLoader.once.Do(func() {
		capLoader.logs = &syncBuffer{}
		capLoader.l, capLoader.err = NewLoader(LoaderOptions{CacheDir: testenv.CompileCache(),
			Logger: slog.New(slog.NewTextHandler(capLoader.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	})
	if capLoader.err != nil {
		t.Fatal(capLoader.err)
	}
	return capLoader.l, capLoader.logs, fixture(t, "cap_go")
}

// callTool calls one of cap_go's tools.
func callTool(t *testing.T, p *Plugin, name string, params map[string]any) (string, error) {
	t.Helper()
	out, err := invoke[abi.ToolCallOutput](context.Background(), p, abi.ExportCallTool, abi.ToolCallInput{Tool: name, Params: params})
	return out.Output, err
}

// mustTool is callTool that must succeed.
func mustTool(t *testing.T, p *Plugin, name string, params map[string]any) string {
	t.Helper()
	out, err := callTool(t, p, name, params)
	if err != nil {
		t.Fatalf("%s %v: %v", name, params, err)
	}
	return out
}

// deniedTool is callTool that must fail with a guest-reported error containing
// want: the guest saw the denial as an error it handled.
func deniedTool(t *testing.T, p *Plugin, name string, params map[string]any, want string) {
	t.Helper()
	out, err := callTool(t, p, name, params)
	if !errors.Is(err, ErrGuest) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s %v = %q, %v; want a guest error containing %q", name, params, out, err, want)
	}
}

// checkHTTPResponse checks that out, what answered, is an abi.HTTPResponse
// of status and body.
func checkHTTPResponse(t *testing.T, what, out string, status int, body string) {
	t.Helper()
	var resp abi.HTTPResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("%s: %q is not an HTTPResponse: %v", what, out, err)
	}
	if resp.Status != status {
		t.Errorf("%s: Status = %d, want %d", what, resp.Status, status)
	}
	if resp.Body != body {
		t.Errorf("%s: Body = %q, want %q", what, resp.Body, body)
	}
}

// grantDirs lays out base/ro (inside.txt, a link to it, a link leading out
// of the grant), base/rw (empty) and base/outside/secret.
func grantDirs(t *testing.T) (ro, rw, secret string) {
	t.Helper()
	base := t.TempDir()
	ro, rw, secret = filepath.Join(base, "ro"), filepath.Join(base, "rw"), filepath.Join(base, "outside", "secret")
	for _, d := range []string{ro, rw, filepath.Dir(secret), filepath.Join(ro, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(ro, "inside.txt"), []byte("inside"), 0o644))
	must(os.WriteFile(secret, []byte("TOPSECRET"), 0o644))
	must(os.Symlink("inside.txt", filepath.Join(ro, "inlink")))
	must(os.Symlink(filepath.Join("..", "outside", "secret"), filepath.Join(ro, "escape")))
	must(os.Symlink(secret, filepath.Join(ro, "abs_escape")))
	return ro, rw, secret
}

// Files: a read-only grant reads but never changes, a writable one writes
// to the host, and nothing outside the grants is reachable, by path, by a
// link already there, or by a link the guest makes. Every denial is an
// error the guest handles; the instance stays in service.
func TestGrantedFiles(t *testing.T) {
	l, logs, wasm := capGo(t)
	ro, rw, secret := grantDirs(t)
	p := load(t, l, Config{Name: "files", Path: wasm, Grants: Grants{Paths: []PathGrant{
		{Host: ro, Guest: "/ro"}, {Host: rw, Guest: "/rw", Writable: true}}}})

	if got := mustTool(t, p, "read", map[string]any{"path": "/ro/inside.txt"}); got != "inside" {
		t.Fatalf("read in the read-only grant: %q", got)
	}
	if got := mustTool(t, p, "read", map[string]any{"path": "/ro/inlink"}); got != "inside" {
		t.Fatalf("a link inside the grant: %q", got)
	}
	if got := mustTool(t, p, "list", map[string]any{"path": "/ro"}); got != "abs_escape,escape,inlink,inside.txt,sub" {
		t.Fatalf("list: %q", got)
	}
	deniedTool(t, p, "write", map[string]any{"path": "/ro/new.txt", "text": "x"}, "Read-only file system")
	deniedTool(t, p, "write", map[string]any{"path": "/ro/inside.txt", "text": "x"}, "Read-only file system")
	if _, err := os.Stat(filepath.Join(ro, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file appeared in the read-only grant: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ro, "inside.txt")); string(b) != "inside" {
		t.Fatalf("the read-only file changed: %q", b)
	}
	for _, path := range []string{secret, "/ro/../outside/secret", "/ro/escape", "/ro/abs_escape", "/etc/passwd"} {
		deniedTool(t, p, "read", map[string]any{"path": path}, "")
	}

	mustTool(t, p, "write", map[string]any{"path": "/rw/out.txt", "text": "hello"})
	if b, err := os.ReadFile(filepath.Join(rw, "out.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("the write did not reach the host: %q, %v", b, err)
	}
	deniedTool(t, p, "symlink", map[string]any{"target": "../outside/secret", "link": "/rw/link"}, "Operation not permitted")
	deniedTool(t, p, "symlink", map[string]any{"target": "out.txt", "link": "/rw/link2"}, "Operation not permitted")
	if _, err := os.Lstat(filepath.Join(rw, "link")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the guest created a link on the host: %v", err)
	}
	if !strings.Contains(logs.String(), "guest symbolic link creation refused") || !strings.Contains(logs.String(), "outside its granted directory refused") {
		t.Fatalf("the refusals were not logged:\n%s", logs.String())
	}
	if st := p.Stats(); st.Discarded != 0 {
		t.Fatalf("stats %+v: a denial must not cost the instance", st)
	}
}

// Raw WASI paths that Go would clean before the host saw them: "..", an
// absolute path, and a link out of the grant are refused at the host.
func TestGrantedFilesRawPaths(t *testing.T) {
	ro, _, _ := grantDirs(t)
	p := load(t, newLoader(t), Config{Path: fixture(t, "cap_escape"), Grants: Grants{Paths: []PathGrant{{Host: ro, Guest: "/data"}}}})
	for path, want := range map[string]string{"inside.txt": "inside", "inlink": "inside", "sub/../inside.txt": "inside"} {
		if out, err := p.Call(context.Background(), abi.ExportBuildPrompt, []byte(path)); err != nil || string(out) != want {
			t.Fatalf("open %q = %q, %v; want %q", path, out, err, want)
		}
	}
	for _, path := range []string{"../outside/secret", "sub/../../outside/secret", "/etc/passwd", "escape", "abs_escape", "sub/../escape"} {
		out, err := p.Call(context.Background(), abi.ExportBuildPrompt, []byte(path))
		checkErr(t, "open "+strconv.Quote(path), err, ErrGuest, "errno") // a WASI error
		if strings.Contains(string(out), "TOPSECRET") {
			t.Fatalf("open %q = %q: the secret's content", path, out)
		}
	}
}

// Environment: the guest sees the granted variables, with their values at
// load, and nothing else; the model's API key never, even when the host's
// environment holds it and a grant names it.
func TestGrantedEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-secret-never-for-guests")
	t.Setenv("MORPH_API_KEY", "mk-test-secret")
	t.Setenv("MORPH_TEST_LANG", "en")
	t.Setenv("MORPH_TEST_OTHER", "not granted")
	l, logs, wasm := capGo(t)

	none := load(t, l, Config{Name: "no-env", Path: wasm})
	if got := mustTool(t, none, "environ", nil); got != "" {
		t.Fatalf("without a grant the guest sees %q", got)
	}
	p := load(t, l, Config{Name: "env", Path: wasm, Isolation: IsolationCall, Grants: Grants{Env: []string{"MORPH_TEST_LANG", "MORPH_TEST_UNSET"}}})
	if got := mustTool(t, p, "environ", nil); got != "MORPH_TEST_LANG=en" {
		t.Fatalf("the guest sees %q, want only MORPH_TEST_LANG=en", got)
	}
	if !strings.Contains(logs.String(), "granted environment variable is not set") || !strings.Contains(logs.String(), "MORPH_TEST_UNSET") {
		t.Fatalf("an unset granted variable was not logged:\n%s", logs.String())
	}
	t.Setenv("MORPH_TEST_LANG", "changed")
	if got := mustTool(t, p, "environ", nil); got != "MORPH_TEST_LANG=en" {
		t.Fatalf("a fresh instance sees %q: the environment is fixed at load", got)
	}

	strict, err := NewLoader(LoaderOptions{CacheDir: "off", SecretEnv: []string{"OPENAI_API_KEY", "MORPH_API_KEY"}})
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close(context.Background())
	for _, key := range []string{"OPENAI_API_KEY", "MORPH_API_KEY"} {
		_, err = strict.Load(context.Background(), Config{Name: "greedy", Path: wasm, Grants: Grants{Env: []string{"MORPH_TEST_LANG", key}}})
		checkErr(t, "granting "+key, err, ErrLoad, key, "API key", "greedy")
		if strings.Contains(err.Error(), "secret") {
			t.Fatalf("the error shows the key's value: %v", err)
		}
	}
}

// http_request as a raw guest calls it: answers and denials come back as
// the import's packed result, never as a trap.
func TestHTTPRequestImport(t *testing.T) {
	f := sandboxtest.NewHTTPFixture(t, 1000)
	l := newLoader(t)
	call := func(p *Plugin, export, req string) (string, error) {
		out, err := p.Call(context.Background(), export, []byte(req))
		return string(out), err
	}
	echo := `{"url":"` + f.AllowedURL + `/echo","method":"PUT","body":"b"}`

	ungranted := load(t, l, Config{Name: "no-http", Path: fixture(t, "cap_http")})
	if out, err := call(ungranted, abi.ExportBuildPrompt, echo); !errors.Is(err, ErrGuest) || !strings.Contains(err.Error(), "capability not granted") {
		t.Fatalf("without the grant: %q, %v", out, err)
	}

	p := load(t, l, Config{Name: "http", Path: fixture(t, "cap_http"), Grants: Grants{Hosts: []string{"localhost"}}})
	out, err := call(p, abi.ExportBuildPrompt, echo)
	if err != nil {
		t.Fatalf("allowed: %v", err)
	}
	checkHTTPResponse(t, "allowed", out, http.StatusCreated, "PUT  b")
	for _, c := range []struct{ export, req, want string }{
		{abi.ExportBuildPrompt, `{"url":"` + f.OtherURL() + `"}`, "host not allowed"},
		{abi.ExportBuildPrompt, `{"url":"` + f.AllowedURL + `/away"}`, "host not allowed"},
		{abi.ExportBuildPrompt, `not json`, "not an HTTPRequest"},
		{abi.ExportFallbackFinal, ``, "outside guest memory"},
		{abi.ExportBuildParams, echo, ""}, // the guest can allocate neither the answer nor the message saying so: an error without a message
	} {
		if out, err := call(p, c.export, c.req); !errors.Is(err, ErrGuest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %q, %v; want a guest error containing %q", c.export, c.req, out, err, c.want)
		}
	}
	if n := f.OtherHits.Load(); n != 0 {
		t.Fatalf("the host not allowed received %d requests", n)
	}
	// The plugin call's deadline cuts a request that the HTTP timeout would let run (/slow answers after 5 s).
	short := load(t, l, Config{Name: "short", Path: fixture(t, "cap_http"), Limits: Limits{Timeout: 200 * time.Millisecond},
		Grants: Grants{Hosts: []string{"localhost"}, HTTPTimeout: time.Minute}})
	start := time.Now()
	out, err = call(short, abi.ExportBuildPrompt, `{"url":"`+f.AllowedURL+`/slow"}`)
	took := time.Since(start)
	if !errors.Is(err, ErrGuest) {
		t.Errorf("a request past the call's deadline: %q, %v; want a guest error", out, err)
	} else if !strings.Contains(err.Error(), "timed out") {
		t.Errorf("a request past the call's deadline: error %q, want it to say timed out", err)
	}
	if took > 4*time.Second {
		t.Errorf("a request past the call's deadline answered after %v, want at the deadline (200ms)", took)
	}
	// Closing the plugin cuts a request in flight too: Close does not wait for it.
	closing := load(t, l, Config{Name: "closing", Path: fixture(t, "cap_http"), Limits: Limits{Timeout: time.Minute},
		Grants: Grants{Hosts: []string{"localhost"}, HTTPTimeout: time.Minute}})
	done := make(chan error, 1)
	go func() { _, err := call(closing, abi.ExportBuildPrompt, `{"url":"`+f.AllowedURL+`/slow"}`); done <- err }()
	time.Sleep(100 * time.Millisecond) // the request is under way
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := closing.Close(ctx); err != nil {
		t.Fatalf("Close with a request in flight: %v; want the request cut", err)
	}
	if err := <-done; err == nil {
		t.Fatal("the request in flight at Close succeeded")
	}
	for _, q := range []*Plugin{ungranted, p} {
		if st := q.Stats(); st.Discarded != 0 || st.Instantiated != 1 {
			t.Fatalf("%s: stats %+v: a denied request must not trap", q.Name(), st)
		}
	}
}

// The Go PDK's HTTP, through the real host: the answer is allocated in the
// guest from inside the import call.
func TestHTTPFromGoGuest(t *testing.T) {
	f := sandboxtest.NewHTTPFixture(t, 1000)
	l, _, wasm := capGo(t)
	p := load(t, l, Config{Name: "fetcher", Path: wasm, Grants: Grants{Hosts: []string{"localhost"}}})
	out := mustTool(t, p, "fetch", map[string]any{"url": f.AllowedURL + "/echo", "method": "POST", "headers": map[string]any{"X-Token": "go"}, "body": "hi"})
	checkHTTPResponse(t, "fetch", out, http.StatusCreated, "POST go hi")
	deniedTool(t, p, "fetch", map[string]any{"url": f.OtherURL()}, "host not allowed")
	deniedTool(t, p, "fetch", map[string]any{"url": f.AllowedURL + "/away"}, "redirect from")
	if n := f.OtherHits.Load(); n != 0 {
		t.Fatalf("the host not allowed received %d requests", n)
	}
}

// The manifest's requests against the grants: a warning or a typed load
// failure per Ungranted, and the report inspect and status print.
func TestUngrantedCapabilities(t *testing.T) {
	l, logs, wasm := capGo(t)
	ctx := context.Background()

	_, err := l.Load(ctx, Config{Name: "strict", Path: wasm, Grants: Grants{Hosts: []string{"api.example.com"}, Ungranted: UngrantedError}})
	checkPluginErr(t, "ungranted = error", err, ErrNotGranted, "strict")
	var ce *CapabilityError
	if !errors.As(err, &ce) {
		t.Fatalf("ungranted = error: %v (%T), want a *CapabilityError", err, err)
	}
	if want := []string{abi.CapabilityFS, abi.CapabilityEnv}; !slices.Equal(ce.Capabilities, want) {
		t.Errorf("the error's Capabilities = %q, want %q", ce.Capabilities, want)
	}
	if want := "fs (set allowed_paths), env (set env)"; !strings.Contains(err.Error(), want) {
		t.Errorf("the error %q does not name what is missing and how to grant it (%q)", err, want)
	}
	if strings.Contains(err.Error(), "allowed_hosts") {
		t.Errorf("the error %q names allowed_hosts, which is granted", err)
	}

	before := strings.Count(logs.String(), "not granted")
	p := load(t, l, Config{Name: "lenient", Path: wasm, Grants: Grants{Env: []string{"LANG"}}})
	text := logs.String()
	if n := strings.Count(text, "not granted") - before; n != 2 {
		t.Errorf("%d not-granted warnings, want 2 (http, fs):\n%s", n, text)
	}
	for _, want := range []string{"capability=http", "grant_with=allowed_hosts"} {
		if !strings.Contains(text, want) {
			t.Errorf("the warnings do not say %s:\n%s", want, text)
		}
	}
	var got []string
	for _, c := range p.Capabilities() {
		got = append(got, c.String())
	}
	want := []string{"http (requested, NOT granted)", "fs (requested, NOT granted)", "env (requested, granted: LANG)"}
	if !slices.Equal(got, want) {
		t.Fatalf("capabilities %q, want %q", got, want)
	}

	// Least privilege: a grant the manifest does not ask for shows too.
	ro, _, _ := grantDirs(t)
	q := load(t, l, Config{Path: fixture(t, "cap_http"), Grants: Grants{Hosts: []string{"*.example.com"}, Env: []string{"LANG"}, Paths: []PathGrant{{Host: ro, Guest: "/ro"}}}})
	got = got[:0]
	for _, c := range q.Capabilities() {
		got = append(got, c.String())
	}
	want = []string{"http (requested, granted: *.example.com)", "fs (granted: " + ro + " -> /ro (ro), not requested)", "env (granted: LANG, not requested)"}
	if !slices.Equal(got, want) {
		t.Fatalf("capabilities %q, want %q", got, want)
	}

	// Inspect reports under "error" rather than failing, so the report shows.
	rep, err := l.Inspect(ctx, Config{Path: fixture(t, "cap_http"), Grants: Grants{Ungranted: UngrantedError}})
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if rep.Manifest == nil {
		t.Error("inspect: no Manifest in the report")
	}
	if len(rep.Capabilities) != 1 {
		t.Errorf("inspect: Capabilities = %q, want one", rep.Capabilities)
	} else if got, want := rep.Capabilities[0].String(), "http (requested, NOT granted)"; got != want {
		t.Errorf("inspect: the capability is %q, want %q", got, want)
	}
	if len(rep.Problems) != 1 {
		t.Errorf("inspect: Problems = %q, want one", rep.Problems)
	} else if !strings.Contains(rep.Problems[0], "capability not granted") {
		t.Errorf("inspect: the problem is %q, want it to say capability not granted", rep.Problems[0])
	}

	_, err = l.Load(ctx, Config{Path: wasm, Grants: Grants{Ungranted: "maybe"}})
	if !errors.Is(err, ErrLoad) || !strings.Contains(err.Error(), `ungranted "maybe"`) {
		t.Fatalf("a bad policy: %v", err)
	}
}

func TestBadGrants(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	dir := t.TempDir()
	cases := []struct {
		g    Grants
		want string
	}{
		{Grants{Paths: []PathGrant{{Host: filepath.Join(dir, "missing"), Guest: "/x"}}}, "missing"},
		{Grants{Paths: []PathGrant{{Host: file, Guest: "/x"}}}, "not a directory"},
		{Grants{Paths: []PathGrant{{Host: dir, Guest: "x"}}}, "must be absolute"},
		{Grants{Paths: []PathGrant{{Host: dir, Guest: "/x"}, {Host: dir, Guest: "/x/"}}}, "mounted twice"},
		{Grants{Hosts: []string{"https://example.com"}}, "not a URL"},
		{Grants{Env: []string{"NOT-A-NAME"}}, "not an environment variable name"},
	}
	l := newLoader(t)
	for _, c := range cases {
		_, err := l.Load(context.Background(), Config{Name: "bad", Path: fixture(t, "cap_http"), Grants: c.g})
		checkErr(t, fmt.Sprintf("%+v", c.g), err, ErrLoad, c.want, "bad")
	}
}

// End to end: a run whose tool calls are denied their files and hosts still
// ends with a final, the denials reach the model as errors, and the host
// and the plugin go on serving.
func TestDeniedCapabilitiesInARun(t *testing.T) {
	f := sandboxtest.NewHTTPFixture(t, 1000)
	ro, _, secret := grantDirs(t)
	t.Setenv("OPENAI_API_KEY", "sk-test-secret-never-for-guests")
	l, _, wasm := capGo(t)
	plugin := l.Extender(Config{Name: "cap_go", Path: wasm, Grants: Grants{
		Paths: []PathGrant{{Host: ro, Guest: "/ro"}}, Hosts: []string{"localhost"}}}, engine.MiddlewareConfig{})
	call := func(tool string, params map[string]any) string {
		b, _ := json.Marshal(map[string]any{"type": "tool_call", "tool_call": map[string]any{"tool_name": tool, "tool_params": params}})
		return string(b)
	}
	m := &scriptModel{replies: []string{
		call("read", map[string]any{"path": secret}),
		call("fetch", map[string]any{"url": f.OtherURL()}),
		call("fetch", map[string]any{"url": f.AllowedURL + "/away"}),
		call("environ", map[string]any{}),
		call("read", map[string]any{"path": "/ro/inside.txt"}),
		`{"type":"final","final":{"output":"done"}}`,
	}}
	e := engine.New(m, nil, engine.WithExtenders(plugin))
	defer e.Close(context.Background())
	final, rc, err := e.Run(context.Background(), "probe the sandbox", engine.RunOptions{})
	checkFinal(t, "run", final, err, "done")
	if len(rc.Steps) < 5 {
		t.Fatalf("%d steps", len(rc.Steps))
	}
	for i, want := range []string{"error:", "host not allowed: 127.0.0.1", "redirect from", "", "inside"} {
		obs := rc.Steps[i].Observation
		if !strings.Contains(obs, want) {
			t.Errorf("step %d observation %q, want it to contain %q", i+1, obs, want)
		}
		for _, secret := range []string{"TOPSECRET", "OPENAI_API_KEY", "sk-test"} {
			if strings.Contains(obs, secret) {
				t.Errorf("step %d observation %q shows the secret %q", i+1, obs, secret)
			}
		}
	}
	if f.OtherHits.Load() != 0 {
		t.Fatal("the host not allowed was reached")
	}
	st := e.Status()
	if len(st.Plugins) != 1 {
		t.Fatalf("status %+v", st.Plugins)
	}
	if caps := st.Plugins[0].Details.(*Details).Capabilities; len(caps) != 3 || caps[0].String() != "http (requested, granted: localhost)" {
		t.Fatalf("status %+v", st.Plugins)
	}
}

// A guest's morph_alloc that calls http_request while the host writes an
// answer into it gets an error at once: the host does not recurse through
// the guest's allocator.
func TestHTTPRequestNotReentrant(t *testing.T) {
	p := load(t, newLoader(t), Config{Path: fixture(t, "cap_reenter"), Grants: Grants{Hosts: []string{"localhost"}}, Limits: Limits{Timeout: 5 * time.Second}})
	_, err := p.Call(context.Background(), abi.ExportBuildPrompt, nil)
	if !errors.Is(err, ErrGuest) || !strings.Contains(err.Error(), "outside guest memory") {
		t.Fatalf("err %v, want the guest's error result for the outer request", err)
	}
}

// The package's stated defaults and policy names are the sandbox's, which
// applies them.
func TestGrantConstantsAreTheSandboxs(t *testing.T) {
	if DefaultHTTPTimeout != sandbox.DefaultHTTPTimeout {
		t.Errorf("DefaultHTTPTimeout = %v, the sandbox's %v", DefaultHTTPTimeout, sandbox.DefaultHTTPTimeout)
	}
	if DefaultHTTPMaxResponseBytes != sandbox.DefaultHTTPMaxResponseBytes {
		t.Errorf("DefaultHTTPMaxResponseBytes = %d, the sandbox's %d", DefaultHTTPMaxResponseBytes, sandbox.DefaultHTTPMaxResponseBytes)
	}
	if DefaultHTTPMaxRedirects != sandbox.DefaultHTTPMaxRedirects {
		t.Errorf("DefaultHTTPMaxRedirects = %d, the sandbox's %d", DefaultHTTPMaxRedirects, sandbox.DefaultHTTPMaxRedirects)
	}
	if UngrantedWarn != sandbox.UngrantedWarn {
		t.Errorf("UngrantedWarn = %q, the sandbox's %q", UngrantedWarn, sandbox.UngrantedWarn)
	}
	if UngrantedError != sandbox.UngrantedError {
		t.Errorf("UngrantedError = %q, the sandbox's %q", UngrantedError, sandbox.UngrantedError)
	}
}
